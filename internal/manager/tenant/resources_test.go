package tenant

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/settings"
)

// TestDesiredNetworkPolicyExcepts: each hub range is carved out of the egress CIDRs of its
// address family that strictly contain it, and only those (the API server refuses an except
// outside its cidr); an unnarrowed manager pod selector selects every pod of the manager's
// namespace; the Envoy pods reach their tenant's rate-limit pods (and only those: same
// namespace, their labels) on its gRPC port, whatever exceptCIDRs holds; no DNS namespace, no
// DNS rule.
func TestDesiredNetworkPolicyExcepts(t *testing.T) {
	o := Options{NetworkPolicy: NetworkPolicyOptions{
		EgressCIDRs: []string{"10.0.0.0/8", "192.0.2.0/24", "2001:db8::/32"},
		ExceptCIDRs: []string{"10.96.0.0/12", "169.254.0.0/16", "10.0.0.0/8", "192.0.2.128/25", "2001:db8:1::/48", "fe80::/10"},
	}}.withDefaults()
	np := DesiredNetworkPolicy("shop", "kubelb", o.NetworkPolicy)
	if np.Namespace != hubnames.TenantNamespace("shop") || np.Name != NetworkPolicyName {
		t.Errorf("policy %s/%s", np.Namespace, np.Name)
	}
	if len(np.Spec.Egress) != 3 {
		t.Fatalf("%d egress rules, want 3 (tenant nodes, xDS, rate-limit service): no DNS namespace, no DNS rule", len(np.Spec.Egress))
	}
	got := map[string][]string{}
	for _, p := range np.Spec.Egress[0].To {
		got[p.IPBlock.CIDR] = p.IPBlock.Except
	}
	want := map[string][]string{
		"10.0.0.0/8":    {"10.96.0.0/12"},   // not itself, not another family's, not outside
		"192.0.2.0/24":  {"192.0.2.128/25"}, // 169.254.0.0/16 is outside it
		"2001:db8::/32": {"2001:db8:1::/48"},
	}
	for cidr, ex := range want {
		if !slices.Equal(got[cidr], ex) {
			t.Errorf("%s except %v, want %v", cidr, got[cidr], ex)
		}
	}
	xds, _ := json.Marshal(np.Spec.Egress[1])
	if string(xds) != `{"ports":[{"protocol":"TCP","port":8001}],"to":[{"podSelector":{},"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kubelb"}}}]}` {
		t.Errorf("xDS rule %s, want every pod of the manager's namespace on the default xDS port", xds)
	}
	rl, _ := json.Marshal(np.Spec.Egress[2])
	if string(rl) != `{"ports":[{"protocol":"TCP","port":8081}],"to":[{"podSelector":{"matchLabels":{"app.kubernetes.io/name":"ratelimit","kubelb.k8c.io/tenant":"shop"}}}]}` {
		t.Errorf("rate-limit rule %s, want the tenant's rate-limit pods of its own namespace on 8081", rl)
	}
}

func TestCheckNetworkPolicyOptions(t *testing.T) {
	for _, o := range []NetworkPolicyOptions{
		{EgressCIDRs: []string{"10.0.0.0/33"}, XDSPort: 8001},
		{EgressCIDRs: []string{"0.0.0.0/0"}, ExceptCIDRs: []string{"nope"}, XDSPort: 8001},
		{EgressCIDRs: []string{}, XDSPort: 8001},
		{EgressCIDRs: []string{"0.0.0.0/0"}, XDSPort: 70000},
	} {
		if err := checkNetworkPolicyOptions(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := checkNetworkPolicyOptions(Options{}.withDefaults().NetworkPolicy); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// TestDesiredResourceQuota: the quota counts LoadBalancers, Routes, SyncSecrets and Addresses
// at the resolved limits, a limit of 0 included, and nothing else.
func TestDesiredResourceQuota(t *testing.T) {
	rq := desiredResourceQuota("shop", settings.Limits{LoadBalancers: 0, Routes: 7, ListenerPorts: 3, EndpointsPerCluster: 9, SyncSecrets: 11, Addresses: 1, ObjectBytes: 5, SyncSecretBytes: 6})
	if len(rq.Spec.Hard) != 4 {
		t.Errorf("hard %v, want LoadBalancers, Routes, SyncSecrets and Addresses only", rq.Spec.Hard)
	}
	lbs, routes := rq.Spec.Hard[QuotaLoadBalancers], rq.Spec.Hard[QuotaRoutes]
	if lbs.Value() != 0 || routes.Value() != 7 || string(QuotaLoadBalancers) != "count/loadbalancers.kubelb.k8c.io" {
		t.Errorf("hard %v", rq.Spec.Hard)
	}
	ss, addrs := rq.Spec.Hard[QuotaSyncSecrets], rq.Spec.Hard[QuotaAddresses]
	if ss.Value() != 11 || addrs.Value() != 1 || string(QuotaSyncSecrets) != "count/syncsecrets.kubelb.k8c.io" || string(QuotaAddresses) != "count/addresses.kubelb.k8c.io" {
		t.Errorf("hard %v", rq.Spec.Hard)
	}
	if rq.Namespace != "tenant-shop" || rq.Name != ResourceQuotaName || rq.Labels["kubelb.k8c.io/tenant"] != "shop" {
		t.Errorf("quota %s/%s labels %v", rq.Namespace, rq.Name, rq.Labels)
	}
}

// TestForeignFinalizers: kubelb's own and Kubernetes' own finalizers are not named; others
// are, per object, capped.
func TestForeignFinalizers(t *testing.T) {
	for f, want := range map[string]bool{
		"kubelb.k8c.io/cleanup": false, "foregroundDeletion": false, "orphan": false,
		"service.kubernetes.io/load-balancer-cleanup": false, "kubernetes.io/pvc-protection": false,
		"example.com/foo": true, "kubernetes.io.example.com/x": true, "custom": true,
	} {
		if got := foreign(f); got != want {
			t.Errorf("foreign(%q) = %v, want %v", f, got, want)
		}
	}
	if o := foreignFinalizers([]held{{kind: "LoadBalancer", namespace: "tenant-a", name: "x", finalizers: []string{"kubelb.k8c.io/cleanup"}}},
		[]string{"namespace tenant-a: content remains"}); o != nil {
		t.Errorf("only kubelb's finalizer and a namespace report: %+v, want no alarm", o)
	}
	var objs []held
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		objs = append(objs, held{kind: "Route", namespace: "tenant-a", name: n, finalizers: []string{"kubelb.k8c.io/cleanup", "example.com/x", "example.com/y"}})
	}
	o := foreignFinalizers(objs, nil)
	if o == nil || o.reason != ReasonForeignFinalizers || !o.warn {
		t.Fatalf("outcome %+v", o)
	}
	for _, want := range []string{"Route tenant-a/a holds finalizers example.com/x, example.com/y", "Route tenant-a/e holds", "2 more"} {
		if !strings.Contains(o.message, want) {
			t.Errorf("message %q lacks %q", o.message, want)
		}
	}
	if strings.Contains(o.message, "tenant-a/f") || strings.Contains(o.message, "kubelb.k8c.io/cleanup") {
		t.Errorf("message %q names more than 5 objects or kubelb's finalizer", o.message)
	}
}

func TestQuotaUncounted(t *testing.T) {
	zero := resource.MustParse("0")
	hard := corev1.ResourceList{QuotaLoadBalancers: resource.MustParse("5"), QuotaRoutes: resource.MustParse("5")}
	for _, tc := range []struct {
		name   string
		status corev1.ResourceQuotaStatus
		want   []corev1.ResourceName
	}{
		{name: "not synced yet", status: corev1.ResourceQuotaStatus{}},
		{name: "everything counted", status: corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{QuotaLoadBalancers: zero, QuotaRoutes: zero}}},
		{name: "LoadBalancers uncounted", status: corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{QuotaRoutes: zero}},
			want: []corev1.ResourceName{QuotaLoadBalancers}},
		{name: "nothing counted, sorted", status: corev1.ResourceQuotaStatus{Hard: hard},
			want: []corev1.ResourceName{QuotaLoadBalancers, QuotaRoutes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := QuotaUncounted(&corev1.ResourceQuota{Status: tc.status})
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("QuotaUncounted = %v, want %v", got, tc.want)
			}
		})
	}
}
