package source

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
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
