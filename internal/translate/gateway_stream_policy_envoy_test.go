package translate_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestStreamAuthorizationThroughEnvoy: SecurityPolicies on a TCPRoute and a TLSRoute, through a
// real Envoy fed over xDS, with clients bound to different loopback addresses. The TCPRoute's
// own policy (deny 127.0.0.3, then allow 127.0.0.0/29, default Deny) overrides its Gateway's:
// 127.0.0.2 and 127.0.0.4 are echoed, 127.0.0.3 (denied before the range holding it) and
// 127.0.0.9 (no rule: the default) have their connections closed. The TLSRoute (TLS passed
// through to an HTTPS backend) has none of its own: its Gateway's (default Allow, deny
// 127.0.0.4) applies, so 127.0.0.4 is refused there and the others are served. No refused
// connection reaches a backend: Envoy closes it before connecting upstream (the backends
// count the connections they accept; health checks are off).
func TestStreamAuthorizationThroughEnvoy(t *testing.T) {
	const tenant = "tenant-stream-auth"
	tcpNode, tlsNode := testsupport.FreePort(t), testsupport.FreePort(t)
	tcpBackend := testsupport.StartTCPBackend(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(tcpNode)), testsupport.Identity{Node: "node-1", Pod: "pg"})
	tlsBackend := testsupport.StartTLSBackend(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsNode)), testsupport.Identity{Node: "node-1", Pod: "db"}, "db.example.com")
	tcpPort, tlsPort := testsupport.FreePort(t), testsupport.FreePort(t)
	in := streamGateway(t, tenant, tcpPort, tlsPort, tcpNode, tlsNode)
	in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{Security: &v1alpha1.Security{Namespace: "shop", Name: "gateway",
		Authorization: &v1alpha1.SecurityAuthorization{DefaultAction: "Allow",
			Rules: []v1alpha1.SecurityRule{{Action: "Deny", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{"127.0.0.4/32"}}}}}}}
	in.Routes[1].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{Security: &v1alpha1.Security{Namespace: "shop", Name: "pg",
		Authorization: &v1alpha1.SecurityAuthorization{Rules: []v1alpha1.SecurityRule{
			{Name: "kiosk", Action: "Deny", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{"127.0.0.3/32"}}},
			{Action: "Allow", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{"127.0.0.0/29"}}},
		}}}}
	tcpAddr := pushToEnvoy(t, tenant, in, tcpPort)
	tlsAddr := testsupport.Loopback(tlsPort)
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve both routes", func() error {
		if _, err := testsupport.TCPRoundTripFrom("127.0.0.2", tcpAddr, "ready"); err != nil {
			return err
		}
		return httpsFrom("127.0.0.2", tlsAddr, "db.example.com", tlsBackend.CA, "/ready")
	})

	tcpBefore, tlsBefore := tcpBackend.Connections(), tlsBackend.Connections()
	type verdict struct{ tcp, tls bool }
	clients := map[string]verdict{
		"127.0.0.2": {true, true}, "127.0.0.3": {false, true}, "127.0.0.4": {true, false}, "127.0.0.9": {false, true},
	}
	const tries = 3
	var tcpServed, tcpRefused, tlsServed, tlsRefused int
	for src, want := range clients {
		for i := range tries {
			msg := fmt.Sprintf("%s-%d", src, i)
			_, err := testsupport.TCPRoundTripFrom(src, tcpAddr, msg)
			if (err == nil) != want.tcp {
				t.Errorf("TCPRoute from %s: error %v, want served %v", src, err, want.tcp)
			}
			if err == nil {
				tcpServed++
			} else {
				tcpRefused++
			}
			err = httpsFrom(src, tlsAddr, "db.example.com", tlsBackend.CA, "/"+msg)
			if (err == nil) != want.tls {
				t.Errorf("TLSRoute from %s: error %v, want served %v", src, err, want.tls)
			}
			if err == nil {
				tlsServed++
			} else {
				tlsRefused++
			}
		}
	}
	t.Logf("TCPRoute: %d served, %d refused; TLSRoute: %d served, %d refused", tcpServed, tcpRefused, tlsServed, tlsRefused)
	if tcpServed != 2*tries || tcpRefused != 2*tries || tlsServed != 3*tries || tlsRefused != tries {
		t.Errorf("TCPRoute %d/%d and TLSRoute %d/%d served/refused, want %d/%d and %d/%d", tcpServed, tcpRefused, tlsServed, tlsRefused, 2*tries, 2*tries, 3*tries, tries)
	}
	// The backends accepted the served clients' connections only (one per TCP round trip; at
	// most one per HTTPS request, which closes its connection).
	if got := tcpBackend.Connections() - tcpBefore; got != int64(tcpServed) {
		t.Errorf("the TCP backend accepted %d connections, want %d (allowed clients only)", got, tcpServed)
	}
	if got := tlsBackend.Connections() - tlsBefore; got > int64(tlsServed) {
		t.Errorf("the TLS backend accepted %d connections, more than the %d served requests", got, tlsServed)
	}
}

// TestStreamAuthorizationServerFirstThroughEnvoy: a TCPRoute whose backend speaks first (a
// greeting on accept, as SMTP or MySQL servers do), under a SecurityPolicy allowing 127.0.0.2
// only, through a real Envoy: 127.0.0.2 reads the greeting; 127.0.0.3, which sends nothing,
// reads no greeting but the end of its connection, and the backend never accepted a
// connection for it (Envoy's network RBAC filter would have let the TCP proxy connect
// upstream before the client's first byte).
func TestStreamAuthorizationServerFirstThroughEnvoy(t *testing.T) {
	const tenant = "tenant-stream-first"
	nodePort := testsupport.FreePort(t)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(nodePort)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan struct{}, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			_, _ = io.WriteString(c, "220 greetings\n")
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	tcpPort := testsupport.FreePort(t)
	in := streamGateway(t, tenant, tcpPort, testsupport.FreePort(t), nodePort, testsupport.FreePort(t))
	in.Routes = in.Routes[:2] // the Gateway and the TCPRoute
	in.Routes[1].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{Security: &v1alpha1.Security{Namespace: "shop", Name: "pg",
		Authorization: &v1alpha1.SecurityAuthorization{DefaultAction: "Deny",
			Rules: []v1alpha1.SecurityRule{{Action: "Allow", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{"127.0.0.2/32"}}}}}}}
	addr := pushToEnvoy(t, tenant, in, tcpPort)
	greeting := func(src string) (string, error) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		return bufio.NewReader(c).ReadString('\n')
	}
	testsupport.Eventually(t, 30*time.Second, "the backend's greeting through Envoy", func() error {
		line, err := greeting("127.0.0.2")
		if err == nil && line != "220 greetings\n" {
			err = fmt.Errorf("greeting %q", line)
		}
		return err
	})
	for len(accepted) > 0 {
		<-accepted
	}
	for range 3 {
		if line, err := greeting("127.0.0.3"); err == nil || line != "" {
			t.Errorf("a refused client read %q (%v), want the end of its connection", line, err)
		}
	}
	// The allowed client connects once more: the backend's count then holds its connection
	// only, the refused ones made none.
	if line, err := greeting("127.0.0.2"); err != nil || line != "220 greetings\n" {
		t.Errorf("the allowed client: %q, %v", line, err)
	}
	<-accepted
	if n := len(accepted); n != 0 {
		t.Errorf("the backend accepted %d connections for the refused client, want 0", n)
	}
}

// TestStreamPassiveHealthCheckThroughEnvoy: a TCPRoute's BackendTrafficPolicy with a passive
// health check (consecutive5XxErrors 2, for 10 minutes, up to 50 % of the nodes; active
// health checks off), through a real Envoy, to a Service on two tenant nodes of which one
// refuses connections on the NodePort: its connection failures (local-origin errors, counted
// as 5xx) eject it, Envoy's outlier detection says so, and then every connection reaches the
// node that answers. The route's cluster is its own (the policy's), built like an HTTP
// backend's.
func TestStreamPassiveHealthCheckThroughEnvoy(t *testing.T) {
	const tenant = "tenant-stream-outlier"
	nodePort := testsupport.FreePort(t)
	backend := testsupport.StartTCPBackend(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(nodePort)), testsupport.Identity{Node: "node-1", Pod: "pg"})
	tcpPort := testsupport.FreePort(t)
	in := streamGateway(t, tenant, tcpPort, testsupport.FreePort(t), nodePort, testsupport.FreePort(t))
	in.Routes = in.Routes[:2] // the Gateway and the TCPRoute
	// Node 127.0.0.2 has nothing on the NodePort: connections to it are refused.
	nodes := in.Addresses["default"]
	nodes.Spec.Addresses = append(nodes.Spec.Addresses, v1alpha1.EndpointAddress{IP: "127.0.0.2"})
	in.Addresses["default"] = nodes
	in.Routes[1].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{BackendTraffic: &v1alpha1.BackendTraffic{Namespace: "shop", Name: "eject",
		HealthCheck: &v1alpha1.TrafficHealthCheck{Passive: &v1alpha1.TrafficPassiveHealthCheck{
			Consecutive5xxErrors: ptr.To[uint32](2), BaseEjectionTime: "10m", Interval: "1s", MaxEjectionPercent: ptr.To[int32](50)}}}}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil || len(problems) > 0 {
		t.Fatalf("translation: %v %v", problems, err)
	}
	envoy := xdsenvoy.Start(t, tenant, tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(tcpPort)
	ejected := func() bool { // the route's one cluster (its stats are named shop/pg/tcp-5432)
		st, err := envoy.Stats(`^cluster\.shop/pg/tcp-5432\.outlier_detection\.ejections_enforced_total$`)
		for _, n := range st {
			if n > 0 && err == nil {
				return true
			}
		}
		return false
	}
	// Connections until the refusing node is ejected (each tries one node, round robin).
	failed := 0
	testsupport.Eventually(t, 30*time.Second, "the refusing node to be ejected", func() error {
		if _, err := testsupport.TCPRoundTripFrom("127.0.0.1", addr, "try"); err != nil {
			failed++
		}
		if !ejected() {
			return errNotYet
		}
		return nil
	})
	before := backend.Requests()
	for i := range 10 {
		if _, err := testsupport.TCPRoundTripFrom("127.0.0.1", addr, fmt.Sprint("after-", i)); err != nil {
			t.Errorf("connection %d after the ejection: %v", i, err)
		}
	}
	t.Logf("%d connections failed before the ejection; %d of 10 served after it", failed, backend.Requests()-before)
	if failed < 2 {
		t.Errorf("%d connections failed before the ejection, want at least the 2 that eject", failed)
	}
}

// streamGateway is a tenant with one Gateway (shop/gw) of a TCP listener pg (port 5432,
// served by Envoy on tcpPort) and a TLS listener db in mode Passthrough (db.example.com,
// port 8443, on tlsPort), a TCPRoute pg to Service pg (port 5432, NodePort tcpNode) and a
// TLSRoute db to Service db (port 8443, NodePort tlsNode), on 127.0.0.1. The Gateway's hub
// Service keeps the clients' addresses; active health checks are off.
func streamGateway(t *testing.T, tenant string, tcpPort, tlsPort, tcpNode, tlsNode int) translate.Input {
	t.Helper()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	mode, host := gwv1.TLSModePassthrough, gwv1.Hostname("db.example.com")
	route := func(uid string, age time.Duration, obj any, svc string, port int32, nodePort int) v1alpha1.Route {
		r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: tenant, CreationTimestamp: metav1.NewTime(t0.Add(age))}}
		r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{}
		if svc != "" {
			r.Spec.Source.Kubernetes.Services = []v1alpha1.UpstreamService{{Service: corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: svc + "-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: svc, v1alpha1.LabelOriginNamespace: "shop"}},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "p", Port: port, NodePort: int32(nodePort)}}},
			}}}
		}
		r.Spec.Source.Kubernetes.Route.Object = toObject(t, obj)
		return r
	}
	ref := func(name string, port gwv1.PortNumber) []gwv1.BackendRef {
		return []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: &port}}}
	}
	parents := gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}}
	gateway := route("00000000-0000-0000-0000-0000000000c1", 0, &gwv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "shop"},
		Spec: gwv1.GatewaySpec{GatewayClassName: "kubelb", Listeners: []gwv1.Listener{
			{Name: "pg", Port: 5432, Protocol: gwv1.TCPProtocolType},
			{Name: "db", Port: 8443, Protocol: gwv1.TLSProtocolType, Hostname: &host, TLS: &gwv1.ListenerTLSConfig{Mode: &mode}},
		}},
	}, "", 0, 0)
	pg := route("00000000-0000-0000-0000-0000000000c2", time.Hour, &gwv1.TCPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "TCPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "shop"},
		Spec:       gwv1.TCPRouteSpec{CommonRouteSpec: parents, Rules: []gwv1.TCPRouteRule{{BackendRefs: ref("pg", 5432)}}},
	}, "pg", 5432, tcpNode)
	db := route("00000000-0000-0000-0000-0000000000c3", 2*time.Hour, &gwv1.TLSRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "TLSRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop"},
		Spec:       gwv1.TLSRouteSpec{CommonRouteSpec: parents, Hostnames: []gwv1.Hostname{host}, Rules: []gwv1.TLSRouteRule{{BackendRefs: ref("db", 8443)}}},
	}, "db", 8443, tlsNode)
	return translate.Input{
		Tenant:    tenant,
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}},
		Options:   translate.Options{ListenerAddress: "127.0.0.1", HealthCheck: translate.HealthCheck{Disabled: true}},
		Policy:    translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
		Routes:    []v1alpha1.Route{gateway, pg, db},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: "gateway-" + gateway.Name, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelRouteName: gateway.Name}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Ports: []corev1.ServicePort{
				{Name: "tcp-5432", Port: 5432, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(tcpPort)},
				{Name: "tcp-8443", Port: 8443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(tlsPort)},
			}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "127.0.0.1"}}}},
		}},
	}
}
