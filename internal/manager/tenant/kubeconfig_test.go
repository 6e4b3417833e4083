package tenant

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
)

func TestRenderKubeconfig(t *testing.T) {
	t.Parallel()
	hub := HubEndpoint{Server: "https://hub.example:6443", CAData: []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")}
	raw, err := RenderKubeconfig(hub, "tenant-a", "tok")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := RenderKubeconfig(hub, "tenant-a", "tok")
	if string(raw) != string(again) {
		t.Fatal("rendering is not deterministic: the Secret would be rewritten on every reconcile")
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || ctx.Namespace != "tenant-a" {
		t.Fatalf("context %+v", ctx)
	}
	cl := cfg.Clusters[ctx.Cluster]
	if cl.Server != hub.Server || string(cl.CertificateAuthorityData) != string(hub.CAData) {
		t.Errorf("cluster %+v", cl)
	}
	if kubeconfigToken(raw) != "tok" {
		t.Errorf("token %q", kubeconfigToken(raw))
	}
	// The client config it gives is what the ccm uses.
	rc, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil || rc.Host != hub.Server || rc.BearerToken != "tok" {
		t.Fatalf("rest config %+v, %v", rc, err)
	}
	if kubeconfigToken([]byte("not: [a kubeconfig")) != "" || kubeconfigToken(nil) != "" {
		t.Error("a broken kubeconfig yields a token")
	}
}

func TestHubEndpointFromClusterInfo(t *testing.T) {
	t.Parallel()
	// As kubeadm publishes it: one unnamed cluster, no contexts.
	kubeadm := `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: Y2E=
    server: https://10.0.0.1:6443
  name: ""
contexts: null
current-context: ""
users: null
`
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ClusterInfoNamespace, Name: ClusterInfoName}, Data: data}
	}
	ep, err := HubEndpointFromClusterInfo(cm(map[string]string{"kubeconfig": kubeadm}))
	if err != nil || ep.Server != "https://10.0.0.1:6443" || string(ep.CAData) != "ca" {
		t.Fatalf("%+v %v", ep, err)
	}
	two := `apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a"}}
- {name: b, cluster: {server: "https://b"}}
contexts:
- {name: b, context: {cluster: b}}
current-context: b
`
	if ep, err := HubEndpointFromClusterInfo(cm(map[string]string{"kubeconfig": two})); err != nil || ep.Server != "https://b" {
		t.Errorf("current context not used: %+v %v", ep, err)
	}
	for name, data := range map[string]map[string]string{
		"no key":       {},
		"garbage":      {"kubeconfig": "{{{"},
		"no server":    {"kubeconfig": "apiVersion: v1\nkind: Config\nclusters:\n- {name: x, cluster: {}}\n"},
		"two, no ctx":  {"kubeconfig": "apiVersion: v1\nkind: Config\nclusters:\n- {name: a, cluster: {server: a}}\n- {name: b, cluster: {server: b}}\n"},
		"no clusters ": {"kubeconfig": "apiVersion: v1\nkind: Config\n"},
	} {
		if _, err := HubEndpointFromClusterInfo(cm(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRefreshTiming(t *testing.T) {
	t.Parallel()
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		life    time.Duration
		elapsed time.Duration
		want    time.Duration
	}{
		{"fresh 24h token", 24 * time.Hour, 0, 19*time.Hour + 12*time.Minute},
		{"half way", 24 * time.Hour, 12 * time.Hour, 7*time.Hour + 12*time.Minute},
		{"at 80%", 24 * time.Hour, 19*time.Hour + 12*time.Minute, 0},
		{"past 80%", 24 * time.Hour, 20 * time.Hour, -48 * time.Minute},
		{"expired", 24 * time.Hour, 30 * time.Hour, -(10*time.Hour + 48*time.Minute)},
		{"minimum 10m token", 10 * time.Minute, 0, 8 * time.Minute},
		{"capped by the API server to 1h", time.Hour, 0, 48 * time.Minute},
	} {
		got := RefreshIn(issued.Add(tc.elapsed), issued, issued.Add(tc.life))
		if got != tc.want {
			t.Errorf("%s: refresh in %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestLifetimeAnnotations(t *testing.T) {
	t.Parallel()
	l := tokenLifetime{IssuedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ExpiresAt: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
	got, ok := lifetimeFromAnnotations(l.annotations())
	if !ok || !got.IssuedAt.Equal(l.IssuedAt) || !got.ExpiresAt.Equal(l.ExpiresAt) {
		t.Fatalf("round trip: %+v %v", got, ok)
	}
	for _, bad := range []map[string]string{
		nil,
		{AnnotationTokenIssuedAt: "2026-01-01T00:00:00Z"},
		{AnnotationTokenIssuedAt: "2026-01-02T00:00:00Z", AnnotationTokenExpiresAt: "2026-01-01T00:00:00Z"},
		{AnnotationTokenIssuedAt: "yesterday", AnnotationTokenExpiresAt: "2026-01-01T00:00:00Z"},
	} {
		if _, ok := lifetimeFromAnnotations(bad); ok {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestTenantStateStatusDoesNotChurn(t *testing.T) {
	t.Parallel()
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	v := kubelbv1alpha1.Version{GitVersion: "v1"}
	first := desiredTenantStateStatus(kubelbv1alpha1.TenantStateStatus{}, 1, v, settings.Tenant{}, true, ReasonProvisioned, "ok", t0)
	if !first.LastUpdated.Equal(&t0) || len(first.Conditions) != 3 {
		t.Fatalf("first %+v", first)
	}
	same := desiredTenantStateStatus(first, 1, v, settings.Tenant{}, true, ReasonProvisioned, "ok", t1)
	if !same.LastUpdated.Equal(&t0) || tenantStateChanged(first, same) {
		t.Errorf("an unchanged state moved lastUpdated: %+v", same)
	}
	disabled := desiredTenantStateStatus(first, 1, v, settings.Tenant{DisableLoadBalancer: true}, true, ReasonProvisioned, "ok", t1)
	if !disabled.LastUpdated.Equal(&t1) || !disabled.LoadBalancer.Disable {
		t.Errorf("a change did not move lastUpdated: %+v", disabled)
	}
	if c := disabled.Conditions[0]; !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("the condition did not transition but its time moved: %+v", c)
	}
	// Layer 7 disabled on the Tenant: the ccm is told, kind by kind.
	l7 := desiredTenantStateStatus(first, 1, v, settings.Tenant{DisableGatewayAPI: true}, true, ReasonProvisioned, "ok", t1)
	gw := meta.FindStatusCondition(l7.Conditions, kubelbv1alpha1.TenantStateConditionGatewayAPI)
	ing := meta.FindStatusCondition(l7.Conditions, kubelbv1alpha1.TenantStateConditionIngress)
	if gw == nil || gw.Status != metav1.ConditionFalse || gw.Reason != kubelbv1alpha1.TenantStateReasonDisabled ||
		!strings.Contains(gw.Message, "gatewayAPI.disable") || !gw.LastTransitionTime.Equal(&t1) ||
		ing == nil || ing.Status != metav1.ConditionTrue || !ing.LastTransitionTime.Equal(&t0) || !l7.LastUpdated.Equal(&t1) {
		t.Errorf("Layer 7 conditions %+v", l7.Conditions)
	}
	// Bounds on the tenant's traffic policies: the ccm is told them, and where each is set;
	// unset again, they go.
	bounds := &kubelbv1alpha1.TenantTrafficPolicyBounds{TrafficPolicyBounds: kubelbv1alpha1.TrafficPolicyBounds{MaxRetries: ptr.To[int32](1)},
		SetBy: map[string]string{"maxRetries": "Tenant t"}}
	bounded := desiredTenantStateStatus(first, 1, v, settings.Tenant{TrafficPolicies: bounds}, true, ReasonProvisioned, "ok", t1)
	if !equality.Semantic.DeepEqual(bounded.TrafficPolicies, bounds) || !bounded.LastUpdated.Equal(&t1) {
		t.Errorf("bounds %+v, lastUpdated %v", bounded.TrafficPolicies, bounded.LastUpdated)
	}
	if unbounded := desiredTenantStateStatus(bounded, 1, v, settings.Tenant{}, true, ReasonProvisioned, "ok", t1); unbounded.TrafficPolicies != nil {
		t.Errorf("bounds unset stay: %+v", unbounded.TrafficPolicies)
	}
}

func TestCCMRulesAreNamespacedAndNarrow(t *testing.T) {
	t.Parallel()
	for _, r := range CCMRules() {
		if slices.Contains(r.APIGroups, corev1.GroupName) {
			// The one core rule: a token for its own ServiceAccount, nothing else.
			if len(r.APIGroups) != 1 || !slices.Equal(r.Resources, []string{"serviceaccounts/token"}) ||
				!slices.Equal(r.ResourceNames, []string{ServiceAccountName}) || !slices.Equal(r.Verbs, []string{"create"}) {
				t.Errorf("core rule %+v, want exactly create serviceaccounts/token of %s", r, ServiceAccountName)
			}
			continue
		}
		for _, g := range r.APIGroups {
			if g != kubelbv1alpha1.GroupVersion.Group {
				t.Errorf("rule grants API group %q", g)
			}
		}
		for _, res := range r.Resources {
			if res == "*" || res == "tenants" || res == "configs" {
				t.Errorf("rule grants %q", res)
			}
		}
		for _, v := range r.Verbs {
			if v == "*" || v == "escalate" || v == "bind" || v == "impersonate" || v == "deletecollection" {
				t.Errorf("rule grants verb %q", v)
			}
		}
	}
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"shop": true, "a-1": true, strings.Repeat("a", 56): true,
		strings.Repeat("a", 57): false, "a.b": false, "Shop": false,
	} {
		if got := checkName(name) == nil; got != ok {
			t.Errorf("%q: valid=%v, want %v", name, got, ok)
		}
	}
}
