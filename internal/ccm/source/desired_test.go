package source

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"kubelb.dev/kubelb/api/v1alpha1"
)

func TestIngressServed(t *testing.T) {
	for _, c := range []struct {
		class, annotation string
		useClass, want    bool
	}{
		{"kubelb", "", true, true},
		{"nginx", "", true, false},
		{"", "kubelb", true, true}, // the older annotation
		{"", "", true, false},
		{"nginx", "", false, true},
		{"", "", false, true},
	} {
		ing := &networkingv1.Ingress{}
		if c.class != "" {
			ing.Spec.IngressClassName = ptr.To(c.class)
		}
		if c.annotation != "" {
			ing.Annotations = map[string]string{ingressClassAnnotation: c.annotation}
		}
		if got := IngressServed(ing, c.useClass); got != c.want {
			t.Errorf("class %q annotation %q useClass %v: %v, want %v", c.class, c.annotation, c.useClass, got, c.want)
		}
	}
}

func TestObjectRefsAndParents(t *testing.T) {
	u := map[string]any{"spec": map[string]any{
		"parentRefs": []any{
			map[string]any{"name": "edge", "sectionName": "http"},
			map[string]any{"name": "edge", "port": int64(443)}, // same Gateway: once
			map[string]any{"name": "shared", "namespace": "gw"},
			map[string]any{"name": "svc", "kind": "Service", "group": ""}, // GAMMA: not a Gateway
		},
		"rules": []any{
			map[string]any{"backendRefs": []any{
				map[string]any{"name": "web", "port": int64(80)},
				map[string]any{"name": "remote", "namespace": "other", "group": "", "kind": "Service"},
				map[string]any{"name": "bucket", "group": "example.com", "kind": "Bucket"},
			}},
			map[string]any{"backendRefs": []any{map[string]any{"name": "web", "port": int64(80)}},
				"filters": []any{
					map[string]any{"type": "RequestMirror", "requestMirror": map[string]any{"backendRef": map[string]any{"name": "shadow", "port": int64(80)}}},
					map[string]any{"type": "RequestHeaderModifier", "requestHeaderModifier": map[string]any{}},
				}},
		},
	}}
	wantRefs := []Ref{{Kind: "Service", Namespace: "ns", Name: "web"}, {Kind: "Service", Namespace: "other", Name: "remote"},
		{Group: "example.com", Kind: "Bucket", Namespace: "ns", Name: "bucket"}, {Kind: "Service", Namespace: "ns", Name: "shadow"}}
	if d := cmp.Diff(wantRefs, ObjectRefs(HTTPRoute, u, "ns")); d != "" {
		t.Errorf("refs (-want +got):\n%s", d)
	}
	wantParents := []ParentRef{{Namespace: "gw", Name: "shared"}, {Namespace: "ns", Name: "edge"}}
	if d := cmp.Diff(wantParents, ParentRefs(u, "ns")); d != "" {
		t.Errorf("parents (-want +got):\n%s", d)
	}

	gw := map[string]any{"spec": map[string]any{"listeners": []any{
		map[string]any{"name": "https", "tls": map[string]any{"certificateRefs": []any{
			map[string]any{"name": "cert"}, map[string]any{"name": "shared", "namespace": "certs", "group": "", "kind": "Secret"}}}},
	}}}
	wantCerts := []Ref{{Kind: "Secret", Namespace: "ns", Name: "cert"}, {Kind: "Secret", Namespace: "certs", Name: "shared"}}
	if d := cmp.Diff(wantCerts, ObjectRefs(Gateway, gw, "ns")); d != "" {
		t.Errorf("Gateway refs (-want +got):\n%s", d)
	}

	ing := map[string]any{"spec": map[string]any{
		"defaultBackend": map[string]any{"service": map[string]any{"name": "fallback"}},
		"rules": []any{map[string]any{"http": map[string]any{"paths": []any{
			map[string]any{"backend": map[string]any{"service": map[string]any{"name": "web"}}},
			map[string]any{"backend": map[string]any{"resource": map[string]any{"kind": "Bucket", "name": "b"}}},
		}}}},
	}}
	wantIng := []Ref{{Kind: "Service", Namespace: "ns", Name: "fallback"}, {Kind: "Service", Namespace: "ns", Name: "web"}}
	if d := cmp.Diff(wantIng, ObjectRefs(Ingress, ing, "ns")); d != "" {
		t.Errorf("Ingress refs (-want +got):\n%s", d)
	}
	// The Service an ingress-nginx mirror-target (or auth-url) names is carried too (the hub
	// copies requests to it, asks it); one of another namespace, or a URL kubelb does not
	// read, is not.
	for target, want := range map[string][]Ref{
		"http://copy.ns.svc:8080/$request_uri": append(slices.Clone(wantIng), Ref{Kind: "Service", Namespace: "ns", Name: "copy"}),
		"http://web/$request_uri":              wantIng,
		"http://copy.other/$request_uri":       wantIng,
		"https://example.com/$request_uri":     wantIng,
	} {
		ing["metadata"] = map[string]any{"annotations": map[string]any{"nginx.ingress.kubernetes.io/mirror-target": target}}
		if d := cmp.Diff(want, ObjectRefs(Ingress, ing, "ns")); d != "" {
			t.Errorf("Ingress refs with mirror-target %s (-want +got):\n%s", target, d)
		}
		// auth-url's Service likewise (at the URL's path: no $request_uri).
		ing["metadata"] = map[string]any{"annotations": map[string]any{"nginx.ingress.kubernetes.io/auth-url": strings.TrimSuffix(target, "$request_uri")}}
		if d := cmp.Diff(want, ObjectRefs(Ingress, ing, "ns")); d != "" {
			t.Errorf("Ingress refs with auth-url %s (-want +got):\n%s", target, d)
		}
	}
}

func TestPermittedAndContext(t *testing.T) {
	grant := func(ns, fromKind, fromNS, toKind string, name *string) gwapiv1beta1.ReferenceGrant {
		g := gwapiv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}
		g.Spec.From = []gwapiv1beta1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: gwapiv1.Kind(fromKind), Namespace: gwapiv1.Namespace(fromNS)}}
		g.Spec.To = []gwapiv1beta1.ReferenceGrantTo{{Group: "", Kind: gwapiv1.Kind(toKind)}}
		if name != nil {
			g.Spec.To[0].Name = ptr.To(gwapiv1.ObjectName(*name))
		}
		return g
	}
	remote := Ref{Kind: "Service", Namespace: "be", Name: "api"}
	for _, c := range []struct {
		name   string
		grants []gwapiv1beta1.ReferenceGrant
		want   bool
	}{
		{"none", nil, false},
		{"all Services", []gwapiv1beta1.ReferenceGrant{grant("be", "HTTPRoute", "app", "Service", nil)}, true},
		{"that Service", []gwapiv1beta1.ReferenceGrant{grant("be", "HTTPRoute", "app", "Service", ptr.To("api"))}, true},
		{"another Service", []gwapiv1beta1.ReferenceGrant{grant("be", "HTTPRoute", "app", "Service", ptr.To("db"))}, false},
		{"another kind from", []gwapiv1beta1.ReferenceGrant{grant("be", "GRPCRoute", "app", "Service", nil)}, false},
		{"another namespace from", []gwapiv1beta1.ReferenceGrant{grant("be", "HTTPRoute", "x", "Service", nil)}, false},
		{"grant in the wrong namespace", []gwapiv1beta1.ReferenceGrant{grant("app", "HTTPRoute", "app", "Service", nil)}, false},
		{"Secrets only", []gwapiv1beta1.ReferenceGrant{grant("be", "HTTPRoute", "app", "Secret", nil)}, false},
	} {
		if got := Permitted(remote, "HTTPRoute", "app", c.grants); got != c.want {
			t.Errorf("%s: permitted %v, want %v", c.name, got, c.want)
		}
	}
	if !Permitted(Ref{Kind: "Service", Namespace: "app", Name: "local"}, "HTTPRoute", "app", nil) {
		t.Error("a reference within the namespace needs no grant")
	}

	labels := map[string]string{}
	for i := range 70 {
		labels[fmt.Sprintf("l%02d", i)] = "v"
	}
	var refs []Ref
	for i := range 140 {
		refs = append(refs, Ref{Kind: "Service", Namespace: "be", Name: fmt.Sprintf("s%03d", i)})
	}
	refs = append(refs, Ref{Kind: "Service", Namespace: "app", Name: "local"})
	sc := DesiredContext("HTTPRoute", "app", labels, refs, []gwapiv1beta1.ReferenceGrant{grant("be", "HTTPRoute", "app", "Service", nil)})
	if len(sc.NamespaceLabels) != maxNamespaceLabels || sc.NamespaceLabels["l00"] != "v" || len(sc.GrantedRefs) != maxGrantedRefs ||
		sc.GrantedRefs[0] != (v1alpha1.GrantedRef{Kind: "Service", Namespace: "be", Name: "s000"}) {
		t.Errorf("context: %d labels, %d granted refs (first %+v); want the limits 64 and 128", len(sc.NamespaceLabels), len(sc.GrantedRefs), sc.GrantedRefs[0])
	}
}

func TestDesiredTwin(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "grpc", UID: "u1", Labels: map[string]string{"team": "x"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.5", Selector: map[string]string{"app": "grpc"},
			Ports: []corev1.ServicePort{{Name: "grpc", Port: 9000, TargetPort: intstr.FromInt(9000), AppProtocol: ptr.To("kubernetes.io/h2c"), Protocol: corev1.ProtocolTCP}}},
	}
	twin := DesiredTwin(svc)
	want := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "grpc-nodeport", Labels: map[string]string{
			v1alpha1.LabelOriginName: "grpc", v1alpha1.LabelOriginNamespace: "shop", v1alpha1.LabelManagedBy: "kubelb"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "grpc", UID: "u1"}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "grpc"},
			Ports: []corev1.ServicePort{{Name: "grpc", Port: 9000, TargetPort: intstr.FromInt(9000), AppProtocol: ptr.To("kubernetes.io/h2c"), Protocol: corev1.ProtocolTCP}}},
	}
	if d := cmp.Diff(want, twin); d != "" {
		t.Errorf("twin (-want +got):\n%s", d)
	}
	// As the API server has it (NodePorts allocated): not drifted; a port change: drifted.
	cur := twin.DeepCopy()
	cur.Spec.Ports[0].NodePort = 31000
	cur.Spec.ClusterIP = "10.0.0.9"
	if twinDrifted(cur, twin) {
		t.Error("a twin with its NodePorts counts as drifted")
	}
	svc.Spec.Ports[0].Port = 9001
	if !twinDrifted(cur, DesiredTwin(svc)) {
		t.Error("a changed port is not seen")
	}
	if !isTwin(cur) {
		t.Error("isTwin: false for a twin")
	}
	if _, ok := TwinName("a-name-that-is-fifty-six-characters-long-xxxxxxxxxxxxxx"); ok {
		t.Error("a twin name over 63 characters is accepted")
	}
}

// TestTrimResourceKeepsKubeLBAnnotations: a Route embeds the tenant object's kubelb.k8c.io/
// annotations (the hub reads e.g. kubelb.k8c.io/request-timeout from them), not the others,
// none with a value above 256 bytes, and at most 16 (the first by key); an Ingress's Route
// also embeds its ingress-nginx annotations (a value above 1024 bytes empty, so the hub can
// still name it), at most 64, and an HTTPRoute's does not.
func TestTrimResourceKeepsKubeLBAnnotations(t *testing.T) {
	annotations := map[string]any{
		v1alpha1.AnnotationRequestTimeout:                   "0s",
		"kubectl.kubernetes.io/last-applied-configuration":  "{}",
		"nginx.ingress.kubernetes.io/rewrite-target":        "/",
		"nginx.ingress.kubernetes.io/configuration-snippet": strings.Repeat("x", 1025),
		"kubelb.k8c.io/huge":                                strings.Repeat("x", 257),
	}
	u := map[string]any{"metadata": map[string]any{"name": "web", "namespace": "shop", "annotations": annotations}, "spec": map[string]any{}}
	trimmed := TrimResource(Ingress, u)
	got := trimmed.GetAnnotations()
	if want := map[string]string{v1alpha1.AnnotationRequestTimeout: "0s", "nginx.ingress.kubernetes.io/rewrite-target": "/",
		"nginx.ingress.kubernetes.io/configuration-snippet": ""}; !maps.Equal(got, want) {
		t.Errorf("embedded annotations %v, want %v", got, want)
	}
	route := TrimResource(HTTPRoute, u)
	if got, want := route.GetAnnotations(), map[string]string{v1alpha1.AnnotationRequestTimeout: "0s"}; !maps.Equal(got, want) {
		t.Errorf("an HTTPRoute embeds annotations %v, want %v", got, want)
	}
	nginx := map[string]any{}
	for i := range 70 {
		nginx[fmt.Sprintf("nginx.ingress.kubernetes.io/a%02d", i)] = "v"
	}
	lots := TrimResource(Ingress, map[string]any{"metadata": map[string]any{"name": "web", "annotations": nginx}})
	if got := lots.GetAnnotations(); len(got) != 64 || got["nginx.ingress.kubernetes.io/a63"] != "v" {
		t.Errorf("of 70 ingress-nginx annotations an Ingress embeds %d, want the first 64 by key", len(got))
	}
	bare := TrimResource(Ingress, map[string]any{"metadata": map[string]any{"name": "web"}})
	if got := bare.GetAnnotations(); got != nil {
		t.Errorf("an object without annotations embeds %v", got)
	}
	many := map[string]string{}
	for i := range 20 {
		many[fmt.Sprintf("kubelb.k8c.io/a%02d", i)] = "v"
	}
	kept := KeptAnnotations(many)
	if len(kept) != 16 || kept["kubelb.k8c.io/a00"] == "" || kept["kubelb.k8c.io/a15"] == "" || kept["kubelb.k8c.io/a16"] != "" {
		t.Errorf("of 20 annotations kept %d: %v; want the first 16 by key", len(kept), kept)
	}
}
