package tenant

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkEnvoyPolicy returns an error unless np is the Envoy fleet's policy of namespace ns as
// the options of TestTenantNetworkPolicyAndQuota make it.
func checkEnvoyPolicy(t *testing.T, np *networkingv1.NetworkPolicy, ns string) error {
	if got, want := np.Spec.PodSelector.MatchLabels, hubnames.EnvoyPodLabels(ns); jsonOf(t, got) != jsonOf(t, want) {
		return fmt.Errorf("podSelector %v, want the Envoy pods' labels %v", got, want)
	}
	if got := np.Spec.PolicyTypes; len(got) != 1 || got[0] != networkingv1.PolicyTypeEgress {
		return fmt.Errorf("policyTypes %v, want [Egress] (ingress stays as it is)", got)
	}
	if len(np.Spec.Ingress) > 0 {
		return fmt.Errorf("ingress rules %s", jsonOf(t, np.Spec.Ingress))
	}
	want := []string{
		// The tenant nodes: everything but the hub ranges, per address family.
		`{"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["169.254.0.0/16","10.96.0.0/12"]}},{"ipBlock":{"cidr":"::/0","except":["fe80::/10"]}}]}`,
		// The manager's pods, on the xDS port only.
		`{"ports":[{"protocol":"TCP","port":8001}],"to":[{"podSelector":{"matchLabels":{"app.kubernetes.io/name":"kubelb-manager"}},"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kubelb"}}}]}`,
		// The tenant's rate-limit pods, on their gRPC port only.
		`{"ports":[{"protocol":"TCP","port":8081}],"to":[{"podSelector":{"matchLabels":{"app.kubernetes.io/name":"ratelimit","kubelb.k8c.io/tenant":"` + strings.TrimPrefix(ns, "tenant-") + `"}}}]}`,
		// The cluster DNS.
		`{"ports":[{"protocol":"UDP","port":53},{"protocol":"TCP","port":53}],"to":[{"podSelector":{"matchLabels":{"k8s-app":"kube-dns"}},"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}}}]}`,
	}
	if len(np.Spec.Egress) != len(want) {
		return fmt.Errorf("%d egress rules, want %d (tenant nodes, xDS, rate-limit service, DNS): %s", len(np.Spec.Egress), len(want), jsonOf(t, np.Spec.Egress))
	}
	for i, w := range want {
		if got := jsonOf(t, np.Spec.Egress[i]); got != w {
			return fmt.Errorf("egress rule %d:\n got %s\nwant %s", i, got, w)
		}
	}
	return nil
}

// quotaOf returns the hard LoadBalancer and Route counts of the tenant's ResourceQuota.
func quotaOf(c client.Reader, tenant string) (lbs, routes int64, err error) {
	rq := &corev1.ResourceQuota{}
	if err := c.Get(bg, types.NamespacedName{Namespace: "tenant-" + tenant, Name: ResourceQuotaName}, rq); err != nil {
		return 0, 0, err
	}
	l, r := rq.Spec.Hard[QuotaLoadBalancers], rq.Spec.Hard[QuotaRoutes]
	return l.Value(), r.Value(), nil
}

func wantQuota(t *testing.T, c client.Reader, tenant string, lbs, routes int64) {
	t.Helper()
	testsupport.Eventually(t, 20*time.Second, fmt.Sprintf("the ResourceQuota of %s at %d LoadBalancers and %d Routes", tenant, lbs, routes), func() error {
		l, r, err := quotaOf(c, tenant)
		if err != nil {
			return err
		}
		if l != lbs || r != routes {
			return fmt.Errorf("hard counts: %d LoadBalancers, %d Routes", l, r)
		}
		return nil
	})
}

// TestTenantNetworkPolicyAndQuota: a Tenant created after the manager started gets, in its
// namespace, the Envoy fleet's NetworkPolicy (egress only to the tenant node CIDRs minus the
// hub ranges, the manager's xDS port and the DNS, as the manager's options say) and a
// ResourceQuota at its limits. An edit or a deletion of either is undone; the quota follows
// the Tenant's and the Config's limits.
func TestTenantNetworkPolicyAndQuota(t *testing.T) {
	s := startHubWith(t, func(o *Options, hub *testenv.Cluster) {
		o.HubAPIServerURL = hub.Config.Host
		o.NetworkPolicy = NetworkPolicyOptions{
			ExceptCIDRs:      []string{"169.254.0.0/16", "fe80::/10", "10.96.0.0/12"},
			ManagerPodLabels: map[string]string{hubnames.LabelAppName: "kubelb-manager"},
			DNSNamespace:     "kube-system",
			DNSPodLabels:     map[string]string{"k8s-app": "kube-dns"},
		}
	})
	c := s.hub.Client
	create(t, c, tenantObj("late"))
	waitReady(t, c, "late")
	ns := "tenant-late"
	key := types.NamespacedName{Namespace: ns, Name: NetworkPolicyName}

	np := &networkingv1.NetworkPolicy{}
	if err := c.Get(bg, key, np); err != nil {
		t.Fatalf("the NetworkPolicy of a Tenant onboarded after start: %v", err)
	}
	if err := checkEnvoyPolicy(t, np, ns); err != nil {
		t.Fatal(err)
	}

	// Someone opens the policy: the manager restores it.
	update(t, c, np, func(np *networkingv1.NetworkPolicy) {
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	})
	testsupport.Eventually(t, 20*time.Second, "the opened NetworkPolicy to be restored", func() error {
		np := &networkingv1.NetworkPolicy{}
		if err := c.Get(bg, key, np); err != nil {
			return err
		}
		return checkEnvoyPolicy(t, np, ns)
	})
	// Someone deletes it: the manager re-creates it.
	if err := c.Delete(bg, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: NetworkPolicyName}}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 20*time.Second, "the deleted NetworkPolicy to be re-created", func() error {
		np := &networkingv1.NetworkPolicy{}
		if err := c.Get(bg, key, np); err != nil {
			return err
		}
		return checkEnvoyPolicy(t, np, ns)
	})

	// The quota: the default limits, then the Tenant's, then the Config's for what the Tenant
	// does not set.
	wantQuota(t, c, "late", int64(settings.DefaultLimitLoadBalancers), int64(settings.DefaultLimitRoutes))
	tn := tenantObj("late")
	if err := c.Get(bg, client.ObjectKeyFromObject(tn), tn); err != nil {
		t.Fatal(err)
	}
	update(t, c, tn, func(tn *kubelbv1alpha1.Tenant) { tn.Spec.Limits.LoadBalancers = ptr.To[int32](2) })
	wantQuota(t, c, "late", 2, int64(settings.DefaultLimitRoutes))
	create(t, c, &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: kubelbv1alpha1.DefaultConfigName},
		Spec: kubelbv1alpha1.ConfigSpec{Limits: kubelbv1alpha1.Limits{LoadBalancers: ptr.To[int32](50), Routes: ptr.To[int32](7)}}})
	wantQuota(t, c, "late", 2, 7)
	// Someone raises it: the manager puts it back.
	rq := &corev1.ResourceQuota{}
	if err := c.Get(bg, types.NamespacedName{Namespace: ns, Name: ResourceQuotaName}, rq); err != nil {
		t.Fatal(err)
	}
	update(t, c, rq, func(rq *corev1.ResourceQuota) { rq.Spec.Hard[QuotaLoadBalancers] = resource.MustParse("100") })
	wantQuota(t, c, "late", 2, 7)
}

// TestTenantNetworkPolicyDisabled: with the policy turned off the manager makes none, and
// deletes one it made.
func TestTenantNetworkPolicyDisabled(t *testing.T) {
	s := startHubWith(t, func(o *Options, hub *testenv.Cluster) {
		o.HubAPIServerURL = hub.Config.Host
		o.NetworkPolicy.Disabled = true
	})
	c := s.hub.Client
	create(t, c, tenantObj("open"))
	waitReady(t, c, "open")
	key := types.NamespacedName{Namespace: "tenant-open", Name: NetworkPolicyName}
	if err := c.Get(bg, key, &networkingv1.NetworkPolicy{}); err == nil {
		t.Fatal("a NetworkPolicy was made although it is disabled")
	}
	// One left from when it was enabled (kubelb's labels) is deleted.
	create(t, c, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: hubnames.TenantLabels("open")},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
	})
	testsupport.Eventually(t, 20*time.Second, "the disabled NetworkPolicy to be deleted", func() error {
		return gone(c, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	})
	if _, _, err := quotaOf(c, "open"); err != nil {
		t.Errorf("the ResourceQuota does not depend on the NetworkPolicy: %v", err)
	}
}

// hasEvent reports whether a Warning Event of reason about Tenant name exists whose note
// contains every one of want.
func hasEvent(c client.Reader, name, reason string, want ...string) error {
	var evs eventsv1.EventList
	if err := c.List(bg, &evs); err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.Regarding.Kind != "Tenant" || e.Regarding.Name != name || e.Reason != reason || e.Type != corev1.EventTypeWarning {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(e.Note, w)
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("no Warning Event %s for Tenant %s naming %q among %d", reason, name, want, len(evs.Items))
}

// removeFinalizers empties the finalizers of obj.
func removeFinalizers[T client.Object](t *testing.T, c client.Client, obj T) {
	t.Helper()
	if err := c.Get(bg, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	update(t, c, obj, func(o T) { o.SetFinalizers(nil) })
}

// TestTenantDeletionNamesForeignFinalizers: when finalizers that are not kubelb's hold a
// deleted Tenant — on one of its LoadBalancers, then on other objects of its namespace and
// on the namespace itself — the Tenant's condition (and a Warning Event) names each object
// and finalizer, so an admin can act; once they are removed the Tenant goes.
func TestTenantDeletionNamesForeignFinalizers(t *testing.T) {
	s := startHub(t, true)
	s.lbs.release.Store(true) // kubelb's own finalizer goes as soon as asked
	c := s.hub.Client
	create(t, c, tenantObj("fin"))
	waitReady(t, c, "fin")
	ns := "tenant-fin"

	lb := loadBalancer(ns, "held", kubelbv1alpha1.CleanupFinalizer, "example.com/lb")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin-notes", Finalizers: []string{"example.com/cm"}}}
	create(t, c, lb, cm)
	nsObj := &corev1.Namespace{}
	if err := c.Get(bg, types.NamespacedName{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	update(t, c, nsObj, func(n *corev1.Namespace) { n.Finalizers = append(n.Finalizers, "example.com/ns") })

	if err := c.Delete(bg, tenantObj("fin")); err != nil {
		t.Fatal(err)
	}
	lbHeld := "LoadBalancer tenant-fin/held holds finalizer example.com/lb"
	waitTerminating(t, c, "fin", ReasonForeignFinalizers, func(message string) error {
		if !strings.Contains(message, lbHeld) {
			return fmt.Errorf("message %q does not name %q", message, lbHeld)
		}
		if strings.Contains(message, kubelbv1alpha1.CleanupFinalizer) {
			return fmt.Errorf("message %q names kubelb's own finalizer", message)
		}
		return nil
	})
	testsupport.Eventually(t, 10*time.Second, "a Warning Event naming the LoadBalancer", func() error {
		return hasEvent(c, "fin", ReasonForeignFinalizers, lbHeld)
	})

	// The LoadBalancer is released: the namespace is deleted, and its content and itself
	// hold it.
	removeFinalizers(t, c, &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"}})
	cmHeld, nsHeld := "ConfigMap tenant-fin/admin-notes holds finalizer example.com/cm", "namespace tenant-fin holds finalizer example.com/ns"
	waitTerminating(t, c, "fin", ReasonForeignFinalizers, func(message string) error {
		for _, want := range []string{cmHeld, nsHeld} {
			if !strings.Contains(message, want) {
				return fmt.Errorf("message %q does not name %q", message, want)
			}
		}
		if strings.Contains(message, "LoadBalancer") {
			return fmt.Errorf("message %q still names the released LoadBalancer", message)
		}
		return nil
	})

	testsupport.Eventually(t, 10*time.Second, "a Warning Event naming the new holders", func() error {
		return hasEvent(c, "fin", ReasonForeignFinalizers, cmHeld, nsHeld)
	})

	removeFinalizers(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin-notes"}})
	waitTerminating(t, c, "fin", ReasonForeignFinalizers, func(message string) error {
		if !strings.Contains(message, nsHeld) || strings.Contains(message, "ConfigMap") {
			return fmt.Errorf("message %q, want only the namespace named", message)
		}
		return nil
	})
	removeFinalizers(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	testsupport.Eventually(t, 30*time.Second, "Tenant fin to be gone", func() error { return gone(c, tenantObj("fin")) })
}

// managerSeries counts the series of the manager's metrics with a "tenant" or "namespace"
// label equal to one of values.
func managerSeries(t *testing.T, values ...string) (int, []string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	for _, d := range metrics.All() {
		if d.Binary == metrics.BinaryManager {
			reg.MustRegister(d.Collector)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := metrics.TenantSeries(families, values...)
	return len(names), names
}

// TestTenantMetricsOnlyForExistingTenants: the Envoy fleet controller records series for a
// tenant's namespace while its Tenant exists; a namespace without a Tenant gets none, and
// once a Tenant is deleted no series with its label remains.
func TestTenantMetricsOnlyForExistingTenants(t *testing.T) {
	s := startHub(t, true)
	s.lbs.release.Store(true)
	c := s.hub.Client

	// A namespace that looks like a tenant's, without a Tenant, with a LoadBalancer: the
	// Envoy fleet controller makes it a fleet (reconciles, desired proxies)...
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-ghost", Labels: hubnames.TenantLabels("ghost")}})
	create(t, c, loadBalancer("tenant-ghost", "lb"))
	testsupport.Eventually(t, 20*time.Second, "the Envoy fleet of tenant-ghost", func() error {
		return c.Get(bg, types.NamespacedName{Namespace: "tenant-ghost", Name: envoyfleet.WorkloadName}, &appsv1.Deployment{})
	})

	// ... and of a real tenant, whose series it records.
	create(t, c, tenantObj("metered"))
	waitReady(t, c, "metered")
	create(t, c, loadBalancer("tenant-metered", "lb", kubelbv1alpha1.CleanupFinalizer))
	testsupport.Eventually(t, 20*time.Second, "series of tenant metered", func() error {
		if n, names := managerSeries(t, "metered", "tenant-metered"); n < 2 {
			return fmt.Errorf("series %v, want the fleet's reconciles and desired proxies", names)
		}
		return nil
	})
	if n, names := managerSeries(t, "ghost", "tenant-ghost"); n != 0 {
		t.Errorf("series for a namespace without a Tenant: %v", names)
	}

	if err := c.Delete(bg, tenantObj("metered")); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 30*time.Second, "Tenant metered to be gone", func() error { return gone(c, tenantObj("metered")) })
	testsupport.Eventually(t, 10*time.Second, "no series of deleted tenant metered", func() error {
		if n, names := managerSeries(t, "metered", "tenant-metered"); n != 0 {
			return fmt.Errorf("series left: %v", names)
		}
		return nil
	})
}

// TestTenantQuotaRecountedWhenStuck: a ResourceQuota the quota controller synced without
// counting LoadBalancers (status.hard set, status.used without it, as kube-controller-manager
// leaves a quota made before its discovery saw kubelb's CRDs, and the API server then refuses
// every LoadBalancer) is re-created by the manager, so that the controller counts it anew.
// The envtest hub runs no quota controller: the test writes the stuck status itself.
func TestTenantQuotaRecountedWhenStuck(t *testing.T) {
	s := startHub(t, true)
	c := s.hub.Client
	create(t, c, tenantObj("recount"))
	waitReady(t, c, "recount")
	key := types.NamespacedName{Namespace: "tenant-recount", Name: ResourceQuotaName}
	rq := &corev1.ResourceQuota{}
	if err := c.Get(bg, key, rq); err != nil {
		t.Fatal(err)
	}
	stuck := rq.UID
	rq.Status.Hard = rq.Spec.Hard.DeepCopy()
	rq.Status.Used = corev1.ResourceList{QuotaRoutes: resource.MustParse("0")}
	if err := c.Status().Update(bg, rq); err != nil {
		t.Fatalf("writing the stuck quota status: %v", err)
	}
	testsupport.Eventually(t, 30*time.Second, "the uncounted ResourceQuota to be re-created", func() error {
		rq := &corev1.ResourceQuota{}
		if err := c.Get(bg, key, rq); err != nil {
			return err
		}
		if rq.UID == stuck {
			return fmt.Errorf("still the quota %s, uncounted %v", rq.UID, QuotaUncounted(rq))
		}
		if l := rq.Spec.Hard[QuotaLoadBalancers]; l.Value() != int64(settings.DefaultLimitLoadBalancers) {
			return fmt.Errorf("the new quota allows %d LoadBalancers", l.Value())
		}
		return nil
	})
}
