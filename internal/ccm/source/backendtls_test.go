package source

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// testCA is a CA certificate (PEM) of the translate goldens.
func testCA(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../translate/testdata/gw-backend-tls.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "-----BEGIN CERTIFICATE-----")
	j := strings.Index(s, "-----END CERTIFICATE-----")
	var out []string
	for _, l := range strings.Split(s[i:j+len("-----END CERTIFICATE-----")], "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	return strings.Join(out, "\n") + "\n"
}

func policy(name string, created time.Time, svc, section string, cms ...string) *gwapiv1.BackendTLSPolicy {
	p := &gwapiv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Generation: 3, CreationTimestamp: metav1.NewTime(created)}}
	t := gwapiv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{Kind: "Service", Name: gwapiv1.ObjectName(svc)}}
	if section != "" {
		t.SectionName = ptr.To(gwapiv1.SectionName(section))
	}
	p.Spec.TargetRefs = []gwapiv1.LocalPolicyTargetReferenceWithSectionName{t}
	p.Spec.Validation.Hostname = gwapiv1.PreciseHostname(name + ".example.com")
	for _, cm := range cms {
		p.Spec.Validation.CACertificateRefs = append(p.Spec.Validation.CACertificateRefs, gwapiv1.LocalObjectReference{Kind: "ConfigMap", Name: gwapiv1.ObjectName(cm)})
	}
	return p
}

func TestResolvePolicySaysWhichCACertificatesCanBeUsed(t *testing.T) {
	ca := testCA(t)
	cms := map[string]*corev1.ConfigMap{
		"good":  {ObjectMeta: metav1.ObjectMeta{Name: "good"}, Data: map[string]string{"ca.crt": ca}},
		"empty": {ObjectMeta: metav1.ObjectMeta{Name: "empty"}},
		"junk":  {ObjectMeta: metav1.ObjectMeta{Name: "junk"}, Data: map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}},
	}
	now := time.Now()
	for _, c := range []struct {
		name             string
		p                *gwapiv1.BackendTLSPolicy
		usable, resolved bool
		resolvedReason   string
		invalidReason    string
		ca, wellKnown    string
	}{
		{"a valid ConfigMap", policy("p", now, "s", "", "good"), true, true, "ResolvedRefs", "", ca, ""},
		{"a missing ConfigMap", policy("p", now, "s", "", "missing"), false, false, "InvalidCACertificateRef", "NoValidCACertificate", "", ""},
		{"a ConfigMap without ca.crt", policy("p", now, "s", "", "empty"), false, false, "InvalidCACertificateRef", "NoValidCACertificate", "", ""},
		{"a ConfigMap whose ca.crt is no certificate", policy("p", now, "s", "", "junk"), false, false, "InvalidCACertificateRef", "NoValidCACertificate", "", ""},
		{"one valid, one missing: the valid one is used", policy("p", now, "s", "", "missing", "good"), true, false, "InvalidCACertificateRef", "", ca, ""},
		{"another kind", func() *gwapiv1.BackendTLSPolicy {
			p := policy("p", now, "s", "")
			p.Spec.Validation.CACertificateRefs = []gwapiv1.LocalObjectReference{{Group: "invalid.io", Kind: "InvalidKind", Name: "x"}}
			return p
		}(), false, false, "InvalidKind", "NoValidCACertificate", "", ""},
		{"the system bundle", func() *gwapiv1.BackendTLSPolicy {
			p := policy("p", now, "s", "")
			p.Spec.Validation.WellKnownCACertificates = ptr.To(gwapiv1.WellKnownCACertificatesSystem)
			return p
		}(), true, true, "ResolvedRefs", "", "", "System"},
		{"an unknown well-known set", func() *gwapiv1.BackendTLSPolicy {
			p := policy("p", now, "s", "")
			p.Spec.Validation.WellKnownCACertificates = ptr.To(gwapiv1.WellKnownCACertificatesType("example.com/mine"))
			return p
		}(), false, true, "ResolvedRefs", "Invalid", "", ""},
		// kubelb knows no option: the policy is not usable (its backends fail), its references
		// still resolve.
		{"options with a valid ConfigMap", func() *gwapiv1.BackendTLSPolicy {
			p := policy("p", now, "s", "", "good")
			p.Spec.Options = map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue{"example.com/min-tls-version": "1.3"}
			return p
		}(), false, true, "ResolvedRefs", "Invalid", "", ""},
		{"options with the system bundle", func() *gwapiv1.BackendTLSPolicy {
			p := policy("p", now, "s", "")
			p.Spec.Validation.WellKnownCACertificates = ptr.To(gwapiv1.WellKnownCACertificatesSystem)
			p.Spec.Options = map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue{"cipher-suites": "x", "example.com/a": "b"}
			return p
		}(), false, true, "ResolvedRefs", "Invalid", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := ResolvePolicy(c.p, cms)
			for k := range c.p.Spec.Options {
				if !strings.Contains(v.InvalidMessage, string(k)) {
					t.Errorf("the Accepted message does not name option %q: %q", k, v.InvalidMessage)
				}
			}
			if v.Usable != c.usable || v.Resolved != c.resolved || v.ResolvedReason != c.resolvedReason || v.InvalidReason != c.invalidReason || v.CA != c.ca || v.WellKnown != c.wellKnown {
				t.Errorf("got %+v", v)
			}
			if !v.Resolved && !strings.Contains(v.ResolvedMessage, "x") && !strings.Contains(v.ResolvedMessage, "ConfigMap") {
				t.Errorf("the ResolvedRefs message does not name the reference: %q", v.ResolvedMessage)
			}
		})
	}
}

func TestPolicyPrecedence(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "https-1", Port: 443}, {Name: "https-2", Port: 8443}}}}
	older := policy("zz-older", t0, "web", "")
	newer := policy("aa-newer", t0.Add(time.Second), "web", "")
	sameTimeB := policy("b", t0.Add(time.Hour), "web", "https-1")
	sameTimeA := policy("a", t0.Add(time.Hour), "web", "https-1")
	all := []*gwapiv1.BackendTLSPolicy{newer, older, sameTimeB, sameTimeA}

	if got := PolicyForPort(all, svc, 443); got != sameTimeA {
		t.Errorf("port 443 (https-1): got %s, want a (a sectionName beats the whole Service; same age: first by name)", got.Name)
	}
	if got := PolicyForPort(all, svc, 8443); got != older {
		t.Errorf("port 8443: got %s, want the older whole-Service policy", got.Name)
	}
	for _, c := range []struct {
		p    *gwapiv1.BackendTLSPolicy
		want bool
	}{{older, false}, {newer, true}, {sameTimeA, false}, {sameTimeB, true}} {
		if got, by := PolicyConflicted(c.p, all); got != c.want {
			t.Errorf("%s conflicted = %v (by %s), want %v", c.p.Name, got, by, c.want)
		}
	}
	if got := PolicyForPort([]*gwapiv1.BackendTLSPolicy{policy("other", t0, "api", "")}, svc, 443); got != nil {
		t.Errorf("a policy of another Service applies: %s", got.Name)
	}
}

func TestDesiredBackendTLS(t *testing.T) {
	ca := testCA(t)
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	}
	services := map[types.NamespacedName]*corev1.Service{}
	for _, n := range []string{"a", "b", "broken", "plain"} {
		services[types.NamespacedName{Namespace: "app", Name: n}] = svc(n)
	}
	pa, pb, pbroken := policy("pa", t0, "a", ""), policy("pb", t0, "b", "https"), policy("pbroken", t0, "broken", "")
	pb.Spec.Validation.SubjectAltNames = []gwapiv1.SubjectAltName{{Type: gwapiv1.URISubjectAltNameType, URI: "spiffe://example.com/b"}}
	verdicts := map[types.NamespacedName]PolicyVerdict{
		{Namespace: "app", Name: "pa"}:      {CA: ca, Usable: true, Resolved: true},
		{Namespace: "app", Name: "pb"}:      {CA: ca, Usable: true, Resolved: true},
		{Namespace: "app", Name: "pbroken"}: {Usable: false},
	}
	ports := []PortRef{{"app", "a", 443}, {"app", "b", 443}, {"app", "broken", 443}, {"app", "plain", 443}, {"app", "missing", 443}}
	entries, bundles := DesiredBackendTLS(ports, services, []*gwapiv1.BackendTLSPolicy{pa, pb, pbroken}, verdicts)
	zero := int32(0)
	want := []v1alpha1.BackendTLS{
		{Namespace: "app", Name: "a", Port: 443, Policy: "pa", Hostname: "pa.example.com", CACertificates: &zero},
		{Namespace: "app", Name: "b", Port: 443, Policy: "pb", Hostname: "pb.example.com", CACertificates: &zero,
			SubjectAltNames: []v1alpha1.BackendTLSSubjectAltName{{Type: "URI", URI: "spiffe://example.com/b"}}},
		// no usable CA: carried without one, so the hub answers with an error, never plain text
		{Namespace: "app", Name: "broken", Port: 443, Policy: "pbroken", Hostname: "pbroken.example.com"},
	}
	if diff := cmp.Diff(want, entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if len(bundles) != 1 || bundles[0] != ca {
		t.Errorf("the shared CA bundle is carried once: got %d bundles", len(bundles))
	}
}

func TestBackendPorts(t *testing.T) {
	u := map[string]any{"spec": map[string]any{"rules": []any{
		map[string]any{"backendRefs": []any{
			map[string]any{"name": "a", "port": int64(443)},
			map[string]any{"name": "a", "port": int64(443)},
			map[string]any{"name": "b", "namespace": "other", "port": int64(8443)},
			map[string]any{"name": "x", "kind": "Backend", "group": "example.com", "port": int64(1)},
			map[string]any{"name": "noport"},
		}, "filters": []any{map[string]any{"type": "RequestMirror", "requestMirror": map[string]any{"backendRef": map[string]any{"name": "m", "port": int64(80)}}}}},
	}}}
	want := []PortRef{{"app", "a", 443}, {"other", "b", 8443}, {"app", "m", 80}}
	if diff := cmp.Diff(want, BackendPorts(u, "app")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDesiredPolicyStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	p := policy("p", t0.Time, "web", "")
	other := gwapiv1.PolicyAncestorStatus{AncestorRef: GatewayAncestor("app", "theirs"), ControllerName: "example.com/other"}
	p.Status.Ancestors = []gwapiv1.PolicyAncestorStatus{other}
	gws := []gwapiv1.ParentReference{GatewayAncestor("app", "a"), GatewayAncestor("infra", "b")}
	ok := PolicyVerdict{CA: "x", Usable: true, Resolved: true, ResolvedReason: "ResolvedRefs", ResolvedMessage: "fine"}

	st := DesiredPolicyStatus(p, ok, false, "", gws, t0)
	if len(st.Ancestors) != 3 || st.Ancestors[0].ControllerName != "example.com/other" {
		t.Fatalf("another controller's ancestor is not kept first, or not one per Gateway: %+v", st.Ancestors)
	}
	for _, a := range st.Ancestors[1:] {
		if a.ControllerName != ControllerName || len(a.Conditions) != 2 {
			t.Fatalf("ancestor %+v", a)
		}
		for _, c := range a.Conditions {
			if c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 {
				t.Errorf("condition %+v", c)
			}
		}
	}
	// Later, with nothing changed: the transition times stay.
	p.Status = st
	again := DesiredPolicyStatus(p, ok, false, "", gws, t1)
	if diff := cmp.Diff(st, again); diff != "" {
		t.Errorf("an unchanged status changes (-before +after):\n%s", diff)
	}
	// Conflicted, then no valid CA: Accepted False with the spec's reasons.
	conflicted := DesiredPolicyStatus(p, ok, true, "older", gws, t1)
	if c := conflicted.Ancestors[1].Conditions[0]; c.Reason != "Conflicted" || c.Status != metav1.ConditionFalse || !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("conflicted: %+v", c)
	}
	bad := PolicyVerdict{Resolved: false, ResolvedReason: "InvalidCACertificateRef", ResolvedMessage: "ConfigMap x does not exist", InvalidReason: "NoValidCACertificate", InvalidMessage: "no CA"}
	invalid := DesiredPolicyStatus(p, bad, false, "", gws, t1)
	got := map[string]string{}
	for _, c := range invalid.Ancestors[2].Conditions {
		got[c.Type] = string(c.Status) + "/" + c.Reason
	}
	if got["Accepted"] != "False/NoValidCACertificate" || got["ResolvedRefs"] != "False/InvalidCACertificateRef" {
		t.Errorf("invalid CA: %v", got)
	}
	// No route uses the policy's targets: no ancestor of ours.
	if none := DesiredPolicyStatus(p, ok, false, "", nil, t1); len(none.Ancestors) != 1 {
		t.Errorf("without ancestors: %+v", none.Ancestors)
	}
}

func TestCACertOnly(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{"ca.crt": "pem", "big": strings.Repeat("x", 1<<20)}, BinaryData: map[string][]byte{"b": {1}}}
	out, err := CACertOnly(cm)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.ConfigMap)
	if diff := cmp.Diff(map[string]string{"ca.crt": "pem"}, got.Data); diff != "" || got.BinaryData != nil {
		t.Errorf("the cache keeps more than ca.crt: %s %v", diff, got.BinaryData)
	}
}

func TestPolicyWarning(t *testing.T) {
	for _, c := range []struct {
		name       string
		v          PolicyVerdict
		conflicted bool
		reason     string
	}{
		{"usable and resolved", PolicyVerdict{Usable: true, Resolved: true}, false, ""},
		{"conflicted", PolicyVerdict{Usable: true, Resolved: true}, true, "Conflicted"},
		{"no valid CA", PolicyVerdict{InvalidReason: "NoValidCACertificate", InvalidMessage: "no CA"}, false, "NoValidCACertificate"},
		{"one reference of two invalid", PolicyVerdict{Usable: true, ResolvedReason: "InvalidKind", ResolvedMessage: "Secret x: only ConfigMaps"}, false, "InvalidKind"},
	} {
		if reason, note := PolicyWarning(c.v, c.conflicted, "older"); reason != c.reason || (reason != "" && note == "") {
			t.Errorf("%s: got %q %q, want reason %q", c.name, reason, note, c.reason)
		}
	}
	t0 := metav1.NewTime(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	p := policy("p", t0.Time, "web", "")
	gws := []gwapiv1.ParentReference{GatewayAncestor("app", "gw")}
	bad := PolicyVerdict{InvalidReason: "NoValidCACertificate", ResolvedReason: "InvalidCACertificateRef"}
	first := DesiredPolicyStatus(p, bad, false, "", gws, t0)
	if !policyWarningChanged(p.Status, first) {
		t.Error("the first verdict is not a change: no Warning would be recorded")
	}
	p.Status = first
	p.Generation++
	if policyWarningChanged(first, DesiredPolicyStatus(p, bad, false, "", gws, t0)) {
		t.Error("a new generation with the same verdict records the Warning again")
	}
}

func TestWithoutTLSBackendsFailsClosed(t *testing.T) {
	svc := func(name, origin string) v1alpha1.UpstreamService {
		s := v1alpha1.UpstreamService{}
		s.Namespace, s.Name = "app", name
		if origin != "" {
			s.Labels = map[string]string{v1alpha1.LabelOriginName: origin}
		}
		return s
	}
	rt := &v1alpha1.Route{}
	rt.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Services: []v1alpha1.UpstreamService{
		svc("secure-nodeport", "secure"), svc("plain-nodeport", "plain"), svc("np", "")}}
	WithoutTLSBackends(rt, []v1alpha1.BackendTLS{{Namespace: "app", Name: "secure", Port: 443}, {Namespace: "app", Name: "np", Port: 443}})
	var got []string
	for _, s := range rt.Spec.Source.Kubernetes.Services {
		got = append(got, s.Name)
	}
	if diff := cmp.Diff([]string{"plain-nodeport"}, got); diff != "" {
		t.Errorf("the Services a policy targets must be left out (-want +got):\n%s", diff)
	}
}

// The backends of HTTPRoutes, GRPCRoutes and TLSRoutes (re-encrypted behind listeners that
// terminate TLS) get the TLS of BackendTLSPolicies; TCPRoutes and UDPRoutes carry no TLS a
// Gateway could terminate, and Ingresses are not Gateway API.
func TestBackendTLSAppliesToRoutesThatTerminate(t *testing.T) {
	for _, k := range Kinds {
		want := k.Name == HTTPRoute.Name || k.Name == GRPCRoute.Name || k.Name == TLSRoute.Name
		if got := appliesBackendTLS(k); got != want {
			t.Errorf("%s: BackendTLSPolicies apply: %v, want %v", k.String(), got, want)
		}
	}
}
