package source

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// A Gateway's client certificate validation: the ConfigMaps of its default and perPort
// validations are read once each, other kinds are left to the hub (which refuses them), and
// its references, with the client certificate it presents to backends, are listed so that
// ReferenceGrants can permit them.
func TestFrontendCARefsAndGatewayRefs(t *testing.T) {
	other := gwapiv1.Namespace("other")
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "gw"}, Spec: gwapiv1.GatewaySpec{
		TLS: &gwapiv1.GatewayTLSConfig{
			Frontend: &gwapiv1.FrontendTLSConfig{
				Default: gwapiv1.TLSConfig{Validation: &gwapiv1.FrontendTLSValidation{CACertificateRefs: []gwapiv1.ObjectReference{
					{Kind: "ConfigMap", Name: "ca"}, {Kind: "Service", Name: "web"},
				}}},
				PerPort: []gwapiv1.TLSPortConfig{
					{Port: 8443, TLS: gwapiv1.TLSConfig{Validation: &gwapiv1.FrontendTLSValidation{CACertificateRefs: []gwapiv1.ObjectReference{
						{Kind: "ConfigMap", Name: "ca"}, {Kind: "ConfigMap", Name: "shared", Namespace: &other},
					}}}},
				},
			},
			Backend: &gwapiv1.GatewayBackendTLS{ClientCertificateRef: &gwapiv1.SecretObjectReference{Name: "client", Namespace: &other}},
		},
	}}
	u := toUnstructured(gw)
	if diff := cmp.Diff([]types.NamespacedName{{Namespace: "shop", Name: "ca"}, {Namespace: "other", Name: "shared"}}, FrontendCARefs(u, "shop")); diff != "" {
		t.Errorf("FrontendCARefs (-want +got):\n%s", diff)
	}
	want := []Ref{
		{Kind: "ConfigMap", Namespace: "shop", Name: "ca"}, {Kind: "Service", Namespace: "shop", Name: "web"},
		{Kind: "ConfigMap", Namespace: "other", Name: "shared"}, {Kind: "Secret", Namespace: "other", Name: "client"},
	}
	if diff := cmp.Diff(want, ObjectRefs(Gateway, u, "shop")); diff != "" {
		t.Errorf("ObjectRefs (-want +got):\n%s", diff)
	}
}

// The Route carries each ConfigMap's CA certificates once (shared with the bundles already
// there), or why it cannot be used; the first 16 ConfigMaps only, and a ninth different
// bundle is refused rather than dropped silently.
func TestDesiredFrontendCA(t *testing.T) {
	ca := testCA(t)
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "shop", Name: name} }
	cms := map[types.NamespacedName]*corev1.ConfigMap{
		key("good"):  {Data: map[string]string{"ca.crt": ca}},
		key("again"): {Data: map[string]string{"ca.crt": ca}},
		key("empty"): {},
		key("junk"):  {Data: map[string]string{"ca.crt": "not PEM"}},
	}
	entries, bundles := DesiredFrontendCA([]types.NamespacedName{key("good"), key("missing"), key("empty"), key("junk"), key("again")}, cms, []string{"backend bundle"})
	if diff := cmp.Diff([]string{"backend bundle", ca}, bundles); diff != "" {
		t.Errorf("bundles (-want +got):\n%s", diff)
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.Name] = e.Problem
		if e.CACertificates != nil {
			got[e.Name] = fmt.Sprintf("bundle %d", *e.CACertificates)
		}
	}
	if diff := cmp.Diff(map[string]string{
		"good": "bundle 1", "again": "bundle 1", "missing": "does not exist", "empty": "has no key ca.crt",
		"junk": got["junk"], // pki's words
	}, got); diff != "" || got["junk"] == "" || entries[3].CACertificates != nil {
		t.Errorf("entries (-want +got):\n%s", diff)
	}

	// 20 ConfigMaps: 16 reported; eight bundles fill up, the ninth different one is a problem.
	var refs []types.NamespacedName
	full := []string{"1", "2", "3", "4", "5", "6", "7", "8"}
	for i := range 20 {
		refs = append(refs, key(fmt.Sprintf("cm-%d", i)))
		cms[refs[i]] = &corev1.ConfigMap{Data: map[string]string{"ca.crt": ca}}
	}
	entries, bundles = DesiredFrontendCA(refs, cms, full)
	if len(entries) != maxFrontendCACertificates || len(bundles) != 8 {
		t.Fatalf("%d entries and %d bundles, want %d and 8", len(entries), len(bundles), maxFrontendCACertificates)
	}
	if entries[0].CACertificates != nil || entries[0].Problem == "" {
		t.Errorf("a ninth bundle: %+v, want a problem and no index", entries[0])
	}
}

// TestDesiredPolicyCA: the ConfigMaps and Secrets a Gateway's ClientTrafficPolicies name in
// tls.clientValidation are carried after the Gateway's own (Secrets with kind Secret; the
// CRD's default kind is Secret), each once, only of the policy's namespace and of kinds the
// hub can use; one missing is reported so, and the 16 entries are not exceeded.
func TestDesiredPolicyCA(t *testing.T) {
	ca := testCA(t)
	sc := &v1alpha1.SourceContext{
		ClientTraffic: &v1alpha1.ClientTraffic{Namespace: "shop", Name: "gw", TLS: &v1alpha1.ClientTrafficTLS{ClientValidation: &v1alpha1.ClientTrafficClientValidation{
			CACertificateRefs: []v1alpha1.ClientTrafficCARef{{Kind: "ConfigMap", Name: "good"}, {Name: "secret-ca"}, {Kind: "Service", Name: "web"},
				{Kind: "ConfigMap", Name: "other", Namespace: "elsewhere"}, {Group: "example.com", Kind: "ConfigMap", Name: "x"}}}}},
		PolicySections: []v1alpha1.PolicySection{{Name: "https", ClientTraffic: &v1alpha1.ClientTraffic{Namespace: "shop", Name: "l",
			TLS: &v1alpha1.ClientTrafficTLS{ClientValidation: &v1alpha1.ClientTrafficClientValidation{
				CACertificateRefs: []v1alpha1.ClientTrafficCARef{{Kind: "Secret", Name: "secret-ca"}, {Kind: "ConfigMap", Name: "missing"}}}}}}},
	}
	refs := ClientTrafficCARefs(sc)
	key := func(kind, name string) PolicyCARef {
		return PolicyCARef{Kind: kind, NamespacedName: types.NamespacedName{Namespace: "shop", Name: name}}
	}
	if diff := cmp.Diff([]PolicyCARef{key("ConfigMap", "good"), key("Secret", "secret-ca"), key("ConfigMap", "missing")}, refs); diff != "" {
		t.Fatalf("refs (-want +got):\n%s", diff)
	}
	// The Gateway's own validation already carries ConfigMap good: not repeated.
	own, bundles := DesiredFrontendCA([]types.NamespacedName{{Namespace: "shop", Name: "good"}},
		map[types.NamespacedName]*corev1.ConfigMap{{Namespace: "shop", Name: "good"}: {Data: map[string]string{"ca.crt": ca}}}, nil)
	entries, bundles := DesiredPolicyCA(own, bundles, refs, map[PolicyCARef]string{key("ConfigMap", "good"): ca, key("Secret", "secret-ca"): ca})
	zero := int32(0)
	want := []v1alpha1.FrontendCACertificate{{Namespace: "shop", Name: "good", CACertificates: &zero},
		{Namespace: "shop", Name: "secret-ca", Kind: "Secret", CACertificates: &zero}, {Namespace: "shop", Name: "missing", Problem: "does not exist"}}
	if diff := cmp.Diff(want, entries); diff != "" || len(bundles) != 1 {
		t.Errorf("entries (-want +got):\n%s\nbundles %d", diff, len(bundles))
	}
	// Full: nothing more is added.
	full := make([]v1alpha1.FrontendCACertificate, maxFrontendCACertificates)
	if entries, _ := DesiredPolicyCA(full, nil, refs, nil); len(entries) != maxFrontendCACertificates {
		t.Errorf("%d entries, at most %d", len(entries), maxFrontendCACertificates)
	}
	if ClientTrafficCARefs(nil) != nil || ClientTrafficCARefs(&v1alpha1.SourceContext{}) != nil {
		t.Error("refs without policies")
	}
}
