package translate_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// Values a hostile or careless tenant may write, mixed with valid ones so that routes attach.
var (
	fuzzHostnames = []any{"a.example.com", "*.example.com", "example.com", "*", "*.*.com", "A.Example.com", "10.0.0.1", "bad_host", "", "x\ny.com", "*.com"}
	fuzzPaths     = []any{"/", "/api", "/", "/api", "/v1", "/v1/x", "/", "/api", "/api/", "", "api", "/a b", "/x?y", "/%2e%2e", "/\x00", "(", "^/v[0-9]+$", "/a/b/c/d/e/f"}
	fuzzNames     = []any{"x-env", "X-Env", "x-env", "x-a", "x-b", "x-env", "host", ":authority", "bad header", "", "x\ny", "content-length"}
	fuzzValues    = []any{"1", "", "a\r\nb", "prod|staging", "(", "ok"}
	fuzzProtocols = []any{"HTTP", "HTTP", "HTTP", "HTTPS", "TLS", "TCP", "UDP", "SCTP"}
	fuzzPorts     = []any{80, 80, 80, 443, 8080, 53, 0, 70000}
	fuzzFilters   = []any{"RequestHeaderModifier", "RequestRedirect", "URLRewrite", "ResponseHeaderModifier", "ResponseHeaderModifier", "RequestRedirect", "URLRewrite", "RequestMirror", "ExtensionRef", "CORS", "Bogus"}
)

func (s *bytesource) any(options []any) any { return options[s.intn(len(options))] }

func (s *bytesource) fuzzListener(i int) map[string]any {
	l := map[string]any{"name": pick(s, fmt.Sprintf("l%d", i), fmt.Sprintf("l%d", i), fmt.Sprintf("l%d", i), fmt.Sprintf("l%d", i), fmt.Sprintf("l%d", i), "l0", "Bad_Name"), "port": s.any(fuzzPorts), "protocol": s.any(fuzzProtocols)}
	if s.intn(2) == 0 {
		l["hostname"] = s.any(fuzzHostnames)
	}
	switch s.intn(6) {
	case 0:
		l["tls"] = map[string]any{"mode": pick(s, "Terminate", "Passthrough", "Other"), "certificateRefs": []any{map[string]any{"name": pick(s, "tls", "missing"), "namespace": pick(s, "ns", "other")}}}
	case 1:
		l["allowedRoutes"] = map[string]any{"namespaces": map[string]any{"from": pick(s, "Same", "All", "Selector", "Bogus"),
			"selector": map[string]any{"matchLabels": map[string]any{"team": pick(s, "a", "b")}}}}
	case 2:
		l["allowedRoutes"] = map[string]any{"kinds": []any{map[string]any{"kind": pick(s, "HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "Bogus")}}}
	}
	return l
}

func (s *bytesource) fuzzRule(kind string) map[string]any {
	r := map[string]any{}
	var matches []any
	for i, n := 0, s.intn(3); i < n; i++ {
		m := map[string]any{}
		if kind == "HTTPRoute" {
			m["path"] = map[string]any{"type": pick(s, "PathPrefix", "Exact", "RegularExpression", "Bogus"), "value": s.any(fuzzPaths)}
		}
		if s.intn(2) == 0 {
			m["headers"] = []any{map[string]any{"name": s.any(fuzzNames), "value": s.any(fuzzValues), "type": pick(s, "Exact", "RegularExpression")}}
		}
		if s.intn(3) == 0 && kind == "HTTPRoute" {
			m["queryParams"] = []any{map[string]any{"name": s.any(fuzzNames), "value": s.any(fuzzValues)}}
		}
		if s.intn(3) == 0 && kind == "HTTPRoute" {
			m["method"] = pick(s, "GET", "get", "BREW")
		}
		if s.intn(2) == 0 && kind == "GRPCRoute" {
			m["method"] = map[string]any{"service": pick(s, "echo.Echo", "", "a b", "("), "method": pick(s, "Ping", "", ".*"), "type": pick(s, "Exact", "RegularExpression")}
		}
		matches = append(matches, m)
	}
	r["matches"] = matches
	var filters []any
	for i, n := 0, s.intn(3); i < n; i++ {
		typ := s.any(fuzzFilters).(string)
		f := map[string]any{"type": typ}
		hm := map[string]any{"set": []any{map[string]any{"name": s.any(fuzzNames), "value": s.any(fuzzValues)}}, "remove": []any{s.any(fuzzNames)}}
		pm := map[string]any{"type": pick(s, "ReplaceFullPath", "ReplacePrefixMatch", "Bogus"), "replaceFullPath": s.any(fuzzPaths), "replacePrefixMatch": s.any(fuzzPaths)}
		switch typ {
		case "RequestHeaderModifier":
			f["requestHeaderModifier"] = hm
		case "ResponseHeaderModifier":
			f["responseHeaderModifier"] = hm
		case "RequestRedirect":
			f["requestRedirect"] = map[string]any{"scheme": pick(s, "https", "ftp"), "hostname": s.any(fuzzHostnames), "port": s.any(fuzzPorts), "statusCode": pick(s, 301, 302, 200), "path": pm}
		case "URLRewrite":
			f["urlRewrite"] = map[string]any{"hostname": s.any(fuzzHostnames), "path": pm}
		case "CORS":
			f["cors"] = map[string]any{"allowOrigins": []any{pick(s, "https://www.foo.com", "*", "https://*.bar.com", "http://*:8080", "ftp://x", "https://a.com:70000", "HTTPS://A.COM:443")},
				"allowMethods": []any{pick(s, "GET", "*", "BREW")}, "allowHeaders": []any{pick(s, "x-a", "*", "bad header")}, "exposeHeaders": []any{pick(s, "x-b", "*", "")},
				"allowCredentials": pick(s, true, false), "maxAge": pick(s, 0, 5, -1, 86400)}
		}
		filters = append(filters, f)
	}
	r["filters"] = filters
	var refs []any
	for i, n := 0, s.intn(3); i < n; i++ {
		ref := map[string]any{"name": pick(s, "app", "app", "missing"), "namespace": pick(s, "ns", "ns", "other"),
			"port": s.any(fuzzPorts), "weight": pick(s, 1, 0, 5, -1, 2000000), "kind": pick(s, "Service", "Service", "Plugin")}
		if s.intn(3) == 0 {
			hm := map[string]any{"set": []any{map[string]any{"name": s.any(fuzzNames), "value": s.any(fuzzValues)}}}
			ref["filters"] = []any{map[string]any{"type": pick(s, "RequestHeaderModifier", "ResponseHeaderModifier", "RequestMirror"),
				"requestHeaderModifier": hm, "responseHeaderModifier": hm}}
		}
		refs = append(refs, ref)
	}
	r["backendRefs"] = refs
	if s.intn(4) == 0 {
		r["timeouts"] = map[string]any{"request": pick(s, "10s", "soon", "-1s", "0s")}
	}
	return r
}

// gatewayInput builds a random tenant of Gateways and routes of every kind.
func (s *bytesource) gatewayInput() translate.Input {
	in := translate.Input{Tenant: "tenant-fuzz", Addresses: map[string]v1alpha1.Addresses{
		"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}}}},
	}}
	app := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Port: 80, NodePort: 30080}, {Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP}, {Port: 443, NodePort: 30443}, {Port: 8080}}}}
	in.Secrets = []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{v1alpha1.LabelOriginNamespace: "ns", v1alpha1.LabelOriginName: "tls"}},
		Data: map[string][]byte{corev1.TLSCertKey: []byte("not a certificate"), corev1.TLSPrivateKeyKey: []byte("x")}}}
	kinds := []string{"Gateway", "Gateway", "HTTPRoute", "HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute", "ListenerSet"}
	for i, n := 0, s.intn(8)+1; i < n; i++ {
		kind := kinds[s.intn(len(kinds))]
		if i == 0 {
			kind = "Gateway"
		}
		name := fmt.Sprintf("r%d", i)
		obj := map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
			"metadata": map[string]any{"name": pick(s, "gw", "gw", "gw", "gw", "gw", "other"), "namespace": pick(s, "ns", "ns", "ns", "ns", "ns", "other")}}
		spec := map[string]any{}
		if kind == "Gateway" {
			var ls []any
			for j, m := 0, s.intn(5); j < m; j++ {
				ls = append(ls, s.fuzzListener(j))
			}
			spec["listeners"] = ls
			if s.intn(2) == 0 {
				spec["allowedListeners"] = map[string]any{"namespaces": map[string]any{"from": pick(s, "Same", "All", "Selector", "None", "Bogus"),
					"selector": map[string]any{"matchLabels": map[string]any{"team": pick(s, "a", "b")}}}}
			}
			svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "gateway-" + name, Labels: map[string]string{v1alpha1.LabelRouteName: name}}}
			for k, p := range []int32{80, 443, 8080, 53} {
				if s.intn(6) != 0 {
					target := pick[int32](s, int32(20000+10*i+k), int32(20000+10*i+k), int32(20000+10*i+k), 20000, 0, 70000)
					svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: p, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(target)})
				}
				if s.intn(4) == 0 {
					svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: p, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(int32(20100 + 10*i + k))})
				}
			}
			in.RouteServices = append(in.RouteServices, svc)
		} else if kind == "ListenerSet" {
			// Listeners of its own (up to 70, past the Gateway's bound of 64), to a Gateway
			// of the tenant or not.
			var ls []any
			for j, m := 0, pick(s, 0, 1, 2, 3, 70); j < m; j++ {
				ls = append(ls, s.fuzzListener(j))
			}
			spec["listeners"] = ls
			parent := map[string]any{"name": pick(s, "gw", "gw", "gw", "other")}
			if s.intn(3) == 0 {
				parent["namespace"] = pick(s, "ns", "other")
			}
			if s.intn(8) == 0 {
				parent["kind"] = "Service"
			}
			spec["parentRef"] = parent
		} else {
			ref := map[string]any{"name": pick(s, "gw", "gw", "gw", "gw", "gw", "other")}
			if s.intn(3) == 0 {
				ref["kind"], ref["group"] = "ListenerSet", "gateway.networking.k8s.io"
			}
			if s.intn(4) == 0 {
				ref["namespace"] = pick(s, "ns", "other")
			}
			if s.intn(3) == 0 {
				ref["sectionName"] = pick(s, "l0", "l1")
			}
			if s.intn(3) == 0 {
				ref["port"] = pick(s, 80, 53)
			}
			spec["parentRefs"] = []any{ref}
			if s.intn(2) == 0 {
				spec["hostnames"] = []any{s.any(fuzzHostnames), s.any(fuzzHostnames)}
			}
			var rules []any
			for j, m := 0, s.intn(3)+1; j < m; j++ {
				rules = append(rules, s.fuzzRule(kind))
			}
			spec["rules"] = rules
		}
		obj["spec"] = spec
		// Drop fields the typed structs cannot hold (a GRPC method map in an HTTPRoute and the
		// like) by a JSON round trip into unstructured: decode failures are a problem on the
		// Route, which is fine, but keep most objects readable.
		raw, _ := json.Marshal(obj)
		u := unstructured.Unstructured{}
		_ = u.UnmarshalJSON(raw)
		r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: pick(s, name, name, name, name, "Bad_Name"), CreationTimestamp: metav1.NewTime(time.Unix(int64(s.intn(3)), 0))}}
		r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: u, Services: []v1alpha1.UpstreamService{{Service: app}}}
		if s.intn(2) == 0 {
			r.Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{NamespaceLabels: map[string]string{"team": "a"},
				GrantedRefs: []v1alpha1.GrantedRef{{Kind: "Service", Namespace: "other", Name: "app"}}}
			if s.intn(2) == 0 {
				r.Spec.Source.Kubernetes.Context.ClientTraffic = s.fuzzClientTraffic()
			}
			s.fuzzPolicies(r.Spec.Source.Kubernetes.Context) // gateway_stream_policy_fuzz_test.go
		}
		in.Routes = append(in.Routes, r)
	}
	return in
}

// FuzzGatewayAPI checks that any tenant Gateway API input translates without panicking into
// an IR that validates and Envoy resources Envoy accepts, with nothing left out by the back
// end (a bad value would otherwise take down the whole route configuration), deterministically,
// and with a status for every readable Gateway.
func FuzzGatewayAPI(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte("gateways, listeners, routes, hostnames, filters and backends all at once, twice"))
	f.Add([]byte{7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240, 239, 238})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := (&bytesource{b: data}).gatewayInput()
		r, err := translate.Run(in)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := r.Config.Validate(); err != nil {
			t.Fatalf("invalid IR: %v", err)
		}
		_, all, res, err := translatetest.Pipeline(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(r.Problems) {
			t.Fatalf("the back end left out resources: %v", all[len(r.Problems):])
		}
		if err := translatetest.Check(res); err != nil {
			t.Fatal(err)
		}
		again, _ := translate.Run((&bytesource{b: data}).gatewayInput())
		if !r.Config.Equal(again.Config) {
			t.Fatal("Run is not deterministic")
		}
		for name, st := range r.Routes {
			if !json.Valid(st.Status) {
				t.Fatalf("status of %s is not JSON", name)
			}
		}
	})
}

// fuzzClientTraffic is a ClientTrafficPolicy with connection and protocol options (HTTP/3
// too), within the bounds and beyond them.
func (s *bytesource) fuzzClientTraffic() *v1alpha1.ClientTraffic {
	yes, no := true, false
	probes, streams := int64(pick(s, 0, 3, 200)), int64(pick(s, 0, 100, 1<<31))
	size := func() *intstr.IntOrString {
		v := intstr.FromString(pick(s, "64Ki", "1Mi", "2Gi", "1.5", "x"))
		return &v
	}
	return &v1alpha1.ClientTraffic{Namespace: "ns", Name: "clients",
		Timeout: &v1alpha1.ClientTrafficTimeout{TCP: &v1alpha1.ClientTrafficTCPTimeout{IdleTimeout: pick(s, "", "90s", "2h"), TLSHandshakeTimeout: pick(s, "", "3s", "2h")},
			HTTP: &v1alpha1.ClientTrafficHTTPTimeout{RequestHeadersReceivedTimeout: pick(s, "", "5s", "0s"), StreamIdleTimeout: pick(s, "", "1m", "10m", "2h")}},
		TCPKeepalive: &v1alpha1.ClientTrafficTCPKeepalive{Probes: &probes, IdleTime: pick(s, "", "1m", "1500ms"), Interval: pick(s, "", "10s", "3h")},
		Connection: &v1alpha1.ClientTrafficConnection{BufferLimit: size(), ConnectionLimit: pick(s, nil, &v1alpha1.ClientTrafficConnectionLimit{Value: &probes,
			MaxConnectionDuration: pick(s, "", "10m", "25h"), MaxRequestsPerConnection: &streams, MaxStreamDuration: pick(s, "", "30s", "0s")})},
		TLS: pick(s, nil, &v1alpha1.ClientTrafficTLS{ClientValidation: &v1alpha1.ClientTrafficClientValidation{Optional: pick(s, &yes, &no), Mode: pick(s, "", "VerifyIfGiven", "Request"),
			CACertificateRefs: []v1alpha1.ClientTrafficCARef{{Kind: pick(s, "", "ConfigMap", "Service"), Name: pick(s, "ca", "Bad Name")}}}}),
		HTTP1:         &v1alpha1.ClientTrafficHTTP1{EnableTrailers: &yes, PreserveHeaderCase: pick(s, &yes, &no), HTTP10: &v1alpha1.ClientTrafficHTTP10{UseDefaultHost: pick(s, &yes, &no)}},
		HTTP2:         &v1alpha1.ClientTrafficHTTP2{InitialStreamWindowSize: size(), MaxConcurrentStreams: &streams, OnInvalidMessage: pick(s, "", "TerminateStream", "x")},
		Path:          &v1alpha1.ClientTrafficPath{EscapedSlashesAction: pick(s, "", "RejectRequest", "UnescapeAndRedirect", "x"), DisableMergeSlashes: pick(s, &yes, &no)},
		ProxyProtocol: pick(s, nil, &v1alpha1.ClientTrafficProxyProtocol{}, &v1alpha1.ClientTrafficProxyProtocol{Optional: &yes}),
		Headers:       &v1alpha1.ClientTrafficHeaders{PreserveXRequestID: pick(s, &yes, &no)},
		HTTP3:         pick(s, nil, &v1alpha1.ClientTrafficHTTP3{}),
	}
}
