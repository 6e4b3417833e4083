package envoycp

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds"
)

// recorder is a Snapshots that remembers what it was given.
type recorder struct {
	set     map[string]xds.Resources
	sets    int
	removed []string
}

func (r *recorder) SetTenant(_ context.Context, tenant string, res xds.Resources) (bool, error) {
	r.set[tenant] = res
	r.sets++
	return true, nil
}

func (r *recorder) RemoveTenant(tenant string) { r.removed = append(r.removed, tenant) }

func (r *recorder) TypeVersion(tenant, typeURL string) string {
	if _, ok := r.set[tenant]; !ok {
		return ""
	}
	return "v-" + tenant
}

func namespace(name string, managed bool) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if managed {
		ns.Labels = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}
	}
	return ns
}

func loadBalancer(ns, name string, listenerPort int32) *v1alpha1.LoadBalancer {
	lb := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.LoadBalancerSpec{
			Endpoints: []v1alpha1.LoadBalancerEndpoints{{
				AddressesReference: &corev1.ObjectReference{Name: v1alpha1.DefaultAddressesName},
				Ports:              []v1alpha1.EndpointPort{{Port: 31080}},
			}},
			Ports: []v1alpha1.LoadBalancerPort{{Port: 80}},
		},
	}
	sp := v1alpha1.ServicePort{UpstreamTargetPort: listenerPort}
	sp.Port = 80
	lb.Status.Service.Ports = []v1alpha1.ServicePort{sp}
	return lb
}

// hubService is the hub Service the LoadBalancer controller makes for the allocation lb's
// status records (the test plays the port allocator there): translation reads the listener
// ports from it.
func hubService(lb *v1alpha1.LoadBalancer) *corev1.Service {
	return translatetest.HubServicesFromStatus([]v1alpha1.LoadBalancer{*lb})[lb.Name]
}

// newClient is a fake client holding objs and, for every LoadBalancer among them, its hub
// Service (hubService).
func newClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	for _, o := range objs {
		if lb, ok := o.(*v1alpha1.LoadBalancer); ok {
			if svc := hubService(lb); svc != nil {
				objs = append(objs, svc)
			}
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func TestTenantOf(t *testing.T) {
	t.Parallel()
	got := TenantOf(context.Background(), loadBalancer("tenant-a", "x", 1))
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "tenant-a"}}}
	if !slices.Equal(got, want) {
		t.Errorf("TenantOf(LoadBalancer) = %v, want %v", got, want)
	}
	got = TenantOf(context.Background(), &v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "default"}})
	if len(got) != 1 || got[0].Name != "tenant-b" || got[0].Namespace != "" {
		t.Errorf("TenantOf(Addresses) = %v", got)
	}
	if got := TenantOf(context.Background(), namespace("tenant-c", true)); got != nil {
		t.Errorf("TenantOf(cluster-scoped) = %v, want nothing", got)
	}
}

func TestManagedNamespaceChanged(t *testing.T) {
	t.Parallel()
	p := managedNamespaceChanged()
	on, off := namespace("n", true), namespace("n", false)
	for name, tc := range map[string]struct {
		got, want bool
	}{
		"create managed":   {p.Create(event.CreateEvent{Object: on}), true},
		"create unmanaged": {p.Create(event.CreateEvent{Object: off}), false},
		"label added":      {p.Update(event.UpdateEvent{ObjectOld: off, ObjectNew: on}), true},
		"label removed":    {p.Update(event.UpdateEvent{ObjectOld: on, ObjectNew: off}), true},
		"other update":     {p.Update(event.UpdateEvent{ObjectOld: on, ObjectNew: on}), false},
		"delete managed":   {p.Delete(event.DeleteEvent{Object: on}), true},
		"delete unmanaged": {p.Delete(event.DeleteEvent{Object: off}), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", name, tc.got, tc.want)
		}
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	deleting := loadBalancer("tenant-a", "going", 20002)
	deleting.Finalizers = []string{v1alpha1.CleanupFinalizer}
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	c := newClient(t,
		namespace("tenant-a", true),
		namespace("tenant-empty", true),
		namespace("plain", false),
		loadBalancer("tenant-a", "web", 20001),
		deleting,
		loadBalancer("tenant-other", "elsewhere", 20003),
		loadBalancer("plain", "ignored", 20004),
		&v1alpha1.Addresses{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: v1alpha1.DefaultAddressesName},
			Spec:       v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}}},
		},
	)
	rec := &recorder{set: map[string]xds.Resources{}}
	store := status.NewStore()
	r := NewReconciler(c, rec, store, "kubelb", translate.Options{ListenerAddress: "127.0.0.1"})
	reconcileTenant := func(name string) {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatalf("Reconcile(%s): %v", name, err)
		}
	}

	reconcileTenant("tenant-a")
	out, ok := rec.set["tenant-a"]
	if !ok {
		t.Fatal("no snapshot set for tenant-a")
	}
	var names []string
	for _, l := range out[resource.ListenerType] {
		names = append(names, cache.GetResourceName(l))
	}
	if !slices.Equal(names, []string{"web-tcp-80"}) {
		t.Errorf("listeners %v, want only web-tcp-80 (deleting and other tenants' LoadBalancers left out)", names)
	}
	rep := store.Get("tenant-a")
	if len(out[resource.EndpointType]) != 1 || rep == nil || len(rep.Problems) != 0 {
		t.Fatalf("endpoints %d, report %+v", len(out[resource.EndpointType]), rep)
	}
	// The report says which objects were translated at which generation, who owns which
	// resource, and at which version, for the status writer.
	web := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: "tenant-a", Name: "web"}
	if _, ok := rep.Objects[web]; !ok || len(rep.Objects) != 1 {
		t.Errorf("report objects %v, want only %v", rep.Objects, web)
	}
	if owners := rep.Owners[resource.ListenerType]["web-tcp-80"]; len(owners) != 1 || owners[0].Object() != web || owners[0].Section != "TCP/80" {
		t.Errorf("owners of web-tcp-80: %v", owners)
	}
	if rep.Versions[resource.ListenerType] != "v-tenant-a" {
		t.Errorf("report versions %v", rep.Versions)
	}

	// An unchanged tenant is neither translated by the back end nor pushed again.
	sets := rec.sets
	reconcileTenant("tenant-a")
	if rec.sets != sets {
		t.Error("an unchanged IR was pushed again")
	}

	// A managed tenant without LoadBalancers gets an empty snapshot, not a removal: its
	// proxies must drop their listeners.
	reconcileTenant("tenant-empty")
	if out, ok := rec.set["tenant-empty"]; !ok || len(out[resource.ListenerType]) != 0 {
		t.Errorf("tenant-empty: set=%v listeners=%d", ok, len(out[resource.ListenerType]))
	}

	// Unmanaged and missing namespaces are removed.
	reconcileTenant("plain")
	reconcileTenant("tenant-other")
	if _, ok := rec.set["plain"]; ok {
		t.Error("snapshot set for an unmanaged namespace")
	}
	if !slices.Equal(rec.removed, []string{"plain", "tenant-other"}) {
		t.Errorf("removed %v, want [plain tenant-other]", rec.removed)
	}
	if store.Get("plain") != nil {
		t.Error("a report kept for an unmanaged namespace")
	}
}

func TestSetupRejectsBadOptions(t *testing.T) {
	t.Parallel()
	if err := SetupWithManager(nil, nil, nil, nil, "kubelb", translate.Options{ListenerAddress: "not-an-ip"}); err == nil {
		t.Fatal("no error for an invalid listener address")
	}
}

func TestHubRangesChanged(t *testing.T) {
	t.Parallel()
	p := hubRangesChanged()
	n := &corev1.Node{Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.10"}}}}
	heartbeat := n.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	moved := n.DeepCopy()
	moved.Status.Addresses[0].Address = "192.168.0.11"
	cidr := n.DeepCopy()
	cidr.Spec.PodCIDRs = nil
	if p.Update(event.UpdateEvent{ObjectOld: n, ObjectNew: heartbeat}) {
		t.Error("a heartbeat rebuilds every tenant")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: n, ObjectNew: moved}) || !p.Update(event.UpdateEvent{ObjectOld: n, ObjectNew: cidr}) {
		t.Error("a change of addresses or Pod CIDRs rebuilds nothing")
	}
}

// TestReconcileEndpointPolicy: the tenant's endpoints are checked against the defaults, the
// hub ranges (ServiceCIDRs, Nodes) and the Config's and Tenant's entries.
func TestReconcileEndpointPolicy(t *testing.T) {
	t.Parallel()
	addrs := &v1alpha1.Addresses{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-p", Name: v1alpha1.DefaultAddressesName},
		Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{
			{IP: "127.0.0.5"}, {IP: "10.96.0.1"}, {IP: "10.244.1.9"}, {IP: "192.168.0.10"}, {IP: "203.0.113.1"},
		}},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hub-1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.10"}}}}
	svcCIDR := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16"}}}
	config := &v1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: "kubelb", Name: v1alpha1.DefaultConfigName},
		Spec: v1alpha1.ConfigSpec{EndpointPolicy: &v1alpha1.EndpointPolicy{Allow: []string{"127.0.0.0/8"}}}}
	tenant := &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: v1alpha1.TenantSpec{EndpointPolicy: &v1alpha1.EndpointPolicy{Deny: []string{"203.0.113.0/24"}}}}

	for _, tc := range []struct {
		name    string
		objs    []client.Object
		served  []string
		reasons map[string]string // denied address → rule in the message
	}{
		{name: "defaults and hub ranges", objs: []client.Object{node, svcCIDR}, served: []string{"203.0.113.1"},
			reasons: map[string]string{"127.0.0.5": "127.0.0.0/8 (default)", "10.96.0.1": "10.96.0.0/16 (hub Service CIDR)",
				"10.244.1.9": "10.244.1.0/24 (hub Pod CIDR)", "192.168.0.10": "192.168.0.10/32 (hub node address)"}},
		{name: "Config allow and Tenant deny", objs: []client.Object{node, svcCIDR, config, tenant}, served: []string{"127.0.0.5"},
			reasons: map[string]string{"10.96.0.1": "hub Service CIDR", "10.244.1.9": "hub Pod CIDR",
				"192.168.0.10": "hub node address", "203.0.113.1": "203.0.113.0/24 (Tenant deny)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := append([]client.Object{namespace("tenant-p", true), loadBalancer("tenant-p", "web", 20001), addrs.DeepCopy()}, tc.objs...)
			rec := &recorder{set: map[string]xds.Resources{}}
			store := status.NewStore()
			r := NewReconciler(newClient(t, objs...), rec, store, "kubelb", translate.Options{})
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "tenant-p"}}); err != nil {
				t.Fatal(err)
			}
			var served []string
			for _, res := range rec.set["tenant-p"][resource.EndpointType] {
				for _, le := range res.(*endpointv3.ClusterLoadAssignment).Endpoints {
					for _, e := range le.LbEndpoints {
						served = append(served, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
					}
				}
			}
			if !slices.Equal(served, tc.served) {
				t.Errorf("served %v, want %v", served, tc.served)
			}
			denied := 0
			for _, p := range store.Get("tenant-p").Problems {
				if p.Reason != translate.ReasonEndpointDenied {
					t.Errorf("unexpected problem %+v", p)
					continue
				}
				denied++
				found := false
				for addr, rule := range tc.reasons {
					// The tenant reads the message: its own address and no rule; the rule is
					// in the detail, for the manager's log.
					if strings.Contains(p.Message, "address "+addr+" is "+translate.DeniedByPolicy) && strings.Contains(p.Detail, rule) {
						found = true
					}
				}
				if !found {
					t.Errorf("problem %q (detail %q) names none of %v", p.Message, p.Detail, tc.reasons)
				}
				for _, hub := range []string{"10.96.0.0", "10.244.1.0", "192.168.0.10/32", "hub ", "/"} {
					if strings.Contains(p.Message, hub) {
						t.Errorf("the tenant's message %q reveals %q", p.Message, hub)
					}
				}
			}
			if denied != len(tc.reasons) {
				t.Errorf("%d EndpointDenied problems, want %d", denied, len(tc.reasons))
			}
		})
	}
}

// TestHubServiceEvents: the listener ports come from the LoadBalancers' hub Services, so a
// new, deleted or re-ported hub Service rebuilds the tenant, while the LoadBalancer
// controller's other writes to it, and every LoadBalancer status write, do not. A Service
// that is not a LoadBalancer's hub Service (wrong name, no managed-by label, another
// namespace in its labels) is not one.
func TestHubServiceEvents(t *testing.T) {
	t.Parallel()
	lb := loadBalancer("tenant-a", "web", 20001)
	svc := hubService(lb)
	if got := hubnames.LoadBalancerOf(svc); got != "web" {
		t.Fatalf("hubnames.LoadBalancerOf(envoy-web) = %q", got)
	}
	renamed := svc.DeepCopy()
	renamed.Name = "envoy-other"
	unmanaged := svc.DeepCopy()
	delete(unmanaged.Labels, v1alpha1.LabelManagedBy)
	foreign := svc.DeepCopy()
	foreign.Labels[v1alpha1.LabelLoadBalancerNS] = "tenant-b"
	byOwner := svc.DeepCopy()
	delete(byOwner.Labels, v1alpha1.LabelLoadBalancerName)
	controller := true
	byOwner.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LoadBalancer", Name: "web", Controller: &controller}}
	for name, tc := range map[string]struct {
		svc  *corev1.Service
		want string
	}{"renamed": {renamed, ""}, "unmanaged": {unmanaged, ""}, "foreign": {foreign, ""}, "controller reference": {byOwner, "web"}} {
		if got := hubnames.LoadBalancerOf(tc.svc); got != tc.want {
			t.Errorf("%s: LoadBalancerOf = %q, want %q", name, got, tc.want)
		}
	}

	p := hubServiceChanged()
	reported := svc.DeepCopy()
	reported.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	reported.Labels["kubelb.k8c.io/other"] = "x"
	moved := svc.DeepCopy()
	moved.Spec.Ports[0].TargetPort = intstr.FromInt32(20009)
	dual := svc.DeepCopy()
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	deleting := svc.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	lbPred := translationInputChanged()
	addressed := lb.DeepCopy()
	addressed.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	addressed.Status.Service.Ports = nil
	for name, tc := range map[string]struct{ got, want bool }{
		"create":                      {p.Create(event.CreateEvent{Object: svc}), true},
		"delete":                      {p.Delete(event.DeleteEvent{Object: svc}), true},
		"other Service created":       {p.Create(event.CreateEvent{Object: renamed}), false},
		"address and labels":          {p.Update(event.UpdateEvent{ObjectOld: svc, ObjectNew: reported}), false},
		"targetPort":                  {p.Update(event.UpdateEvent{ObjectOld: svc, ObjectNew: moved}), true},
		"IP families":                 {p.Update(event.UpdateEvent{ObjectOld: svc, ObjectNew: dual}), true},
		"deletion":                    {p.Update(event.UpdateEvent{ObjectOld: svc, ObjectNew: deleting}), true},
		"LoadBalancer status written": {lbPred.Update(event.UpdateEvent{ObjectOld: lb, ObjectNew: addressed}), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", name, tc.got, tc.want)
		}
	}
}

// TestChangeWaitsForItsPort: a LoadBalancer that gains a port before the planner applied its
// hub Service's listener port for it is served as it was: nothing is pushed to the proxies and
// the report leaves it out (no verdict); once the hub Service has the port, the new version is
// pushed and reported, with no PortPending problem ever reported.
func TestChangeWaitsForItsPort(t *testing.T) {
	t.Parallel()
	web := loadBalancer("tenant-a", "web", 20001)
	c := newClient(t, namespace("tenant-a", true), web, &v1alpha1.Addresses{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: v1alpha1.DefaultAddressesName},
		Spec:       v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}}},
	})
	rec := &recorder{set: map[string]xds.Resources{}}
	store := status.NewStore()
	r := NewReconciler(c, rec, store, "kubelb", translate.Options{ListenerAddress: "127.0.0.1"})
	ctx := context.Background()
	ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: "tenant-a", Name: "web"}
	reconcileTenant := func() *status.Report {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "tenant-a"}}); err != nil {
			t.Fatal(err)
		}
		rep := store.Get("tenant-a")
		for _, p := range rep.Problems {
			if p.Reason == translate.ReasonPortPending {
				t.Errorf("reported %v", p)
			}
		}
		return rep
	}
	listeners := func() []string {
		var names []string
		for _, l := range rec.set["tenant-a"][resource.ListenerType] {
			names = append(names, cache.GetResourceName(l))
		}
		slices.Sort(names)
		return names
	}
	if rep := reconcileTenant(); len(rep.Objects) != 1 {
		t.Fatalf("report objects %v", rep.Objects)
	}
	sets := rec.sets

	lb := &v1alpha1.LoadBalancer{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(web), lb); err != nil {
		t.Fatal(err)
	}
	lb.Spec.Ports = append(lb.Spec.Ports, v1alpha1.LoadBalancerPort{Port: 443})
	if err := c.Update(ctx, lb); err != nil {
		t.Fatal(err)
	}
	rep := reconcileTenant()
	if rec.sets != sets || !slices.Equal(listeners(), []string{"web-tcp-80"}) {
		t.Errorf("pushed %d times while the port waits, listeners %v; want none and [web-tcp-80]", rec.sets-sets, listeners())
	}
	if _, ok := rep.Objects[ref]; ok {
		t.Errorf("the waiting LoadBalancer is in the report: %v", rep.Objects)
	}
	// A manager that just started has no settled version: it serves the allocated port and
	// gives no verdict, never dropping the live listener.
	fresh := &recorder{set: map[string]xds.Resources{}}
	freshStore := status.NewStore()
	if _, err := NewReconciler(c, fresh, freshStore, "kubelb", translate.Options{ListenerAddress: "127.0.0.1"}).Reconcile(ctx,
		reconcile.Request{NamespacedName: types.NamespacedName{Name: "tenant-a"}}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range fresh.set["tenant-a"][resource.ListenerType] {
		names = append(names, cache.GetResourceName(l))
	}
	if !slices.Equal(names, []string{"web-tcp-80"}) || !freshStore.Get("tenant-a").Waiting[ref] {
		t.Errorf("a started manager serves %v and waiting %v, want [web-tcp-80] and web waiting", names, freshStore.Get("tenant-a").Waiting)
	}

	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(hubService(web)), svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(20443)})
	if err := c.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	rep = reconcileTenant()
	if !slices.Equal(listeners(), []string{"web-tcp-443", "web-tcp-80"}) {
		t.Errorf("listeners %v once the port exists, want web-tcp-443 and web-tcp-80", listeners())
	}
	if gen, ok := rep.Objects[ref]; !ok || gen != lb.Generation {
		t.Errorf("report objects %v, want web at generation %d", rep.Objects, lb.Generation)
	}
}
