package quota

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
)

// storeTenant is a tenant's objects as the informer stores hold them (pointers), with the
// same objects as lists for Admission.
type storeTenant struct {
	lbs    []*kubelbv1alpha1.LoadBalancer
	routes []*kubelbv1alpha1.Route
	rv     int
}

func (s *storeTenant) items() (lbs, routes []any, lbList []kubelbv1alpha1.LoadBalancer, routeList []kubelbv1alpha1.Route) {
	for _, lb := range s.lbs {
		lbs = append(lbs, lb)
		lbList = append(lbList, *lb)
	}
	for _, rt := range s.routes {
		routes = append(routes, rt)
		routeList = append(routeList, *rt)
	}
	return lbs, routes, lbList, routeList
}

func (s *storeTenant) nextRV() string { s.rv++; return strconv.Itoa(s.rv) }

// randomLB is a LoadBalancer of one to three ports (sometimes repeating one), sometimes
// asking for a hostname of its own, sometimes being deleted.
func (s *storeTenant) randomLB(r *rand.Rand, i int) *kubelbv1alpha1.LoadBalancer {
	var ports []kubelbv1alpha1.LoadBalancerPort
	for p := range 1 + r.IntN(3) {
		ports = append(ports, kubelbv1alpha1.LoadBalancerPort{Name: fmt.Sprintf("p%d", p), Port: int32(80 + r.IntN(3)), Protocol: corev1.ProtocolTCP})
	}
	lb := hubLB(fmt.Sprintf("lb-%d", i), t0.Add(time.Duration(r.IntN(50))*time.Second), ports...)
	lb.UID, lb.ResourceVersion = types.UID(fmt.Sprintf("uid-lb-%d", i)), s.nextRV()
	lb.Spec.Type = []corev1.ServiceType{"", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer}[r.IntN(4)]
	if r.IntN(5) == 0 {
		lb.Spec.Hostname = fmt.Sprintf("own-%d.example.org", i)
	}
	if r.IntN(10) == 0 {
		lb.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	return &lb
}

// randomRoute is a Gateway of up to three listener ports or an Ingress.
func (s *storeTenant) randomRoute(r *rand.Rand, i int) *kubelbv1alpha1.Route {
	var rt kubelbv1alpha1.Route
	if r.IntN(2) == 0 {
		var ls []map[string]any
		for l := range 1 + r.IntN(3) {
			ls = append(ls, map[string]any{"name": fmt.Sprintf("l%d", l), "port": int64(80 + r.IntN(4)), "protocol": "HTTP"})
		}
		rt = hubRoute(fmt.Sprintf("gw-%d", i), t0.Add(time.Duration(r.IntN(50))*time.Second), gateway(ls...))
	} else {
		rt = hubRoute(fmt.Sprintf("ing-%d", i), t0.Add(time.Duration(r.IntN(50))*time.Second), map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"})
	}
	rt.UID, rt.ResourceVersion = types.UID(fmt.Sprintf("uid-rt-%d", i)), s.nextRV()
	return &rt
}

// TestStoreAdmissionIsAdmission checks that the Store's verdict — remembered Objects, and
// no ranking when the tenant fits its limits — is exactly the verdict of Admission over the
// same objects: which objects are refused, with which message, and the ports used, while
// objects are added, changed and deleted, and the settings and limits change between calls.
func TestStoreAdmissionIsAdmission(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		s := &storeTenant{}
		m := newNamespaceMemo()
		next := 0
		for range 1 + r.IntN(30) {
			s.lbs = append(s.lbs, s.randomLB(r, next))
			next++
		}
		for range r.IntN(10) {
			s.routes = append(s.routes, s.randomRoute(r, next))
			next++
		}
		for step := range 15 {
			ten := settings.Tenant{
				Limits:              limits(r.IntN(40), r.IntN(12), r.IntN(80)),
				DisableLoadBalancer: r.IntN(6) == 0, DisableGatewayAPI: r.IntN(6) == 0, DisableIngress: r.IntN(6) == 0,
				AllocateNodePorts: r.IntN(2) == 0,
			}
			ten.Limits.NodePorts = r.IntN(60)
			if r.IntN(3) == 0 { // every LoadBalancer gets a hostname: they share the Ingress Service's ports
				ten.DNS = translate.DNS{WildcardDomain: "lb.example.com", AllowExplicitHostnames: r.IntN(2) == 0}
			}
			if r.IntN(2) == 0 { // generous limits: the fast path
				ten.Limits = limits(1000, 1000, 1000)
				ten.Limits.NodePorts = 1000
			}
			lbs, routes, lbList, routeList := s.items()
			want := Admission("tenant-a", lbList, routeList, ten)
			got := m.admission("tenant-a", lbs, routes, ten)
			if got.UsedPorts != want.UsedPorts || got.UsedNodePorts != want.UsedNodePorts {
				t.Fatalf("round %d step %d: used ports %d, NodePorts %d; Admission says %d, %d", round, step, got.UsedPorts, got.UsedNodePorts, want.UsedPorts, want.UsedNodePorts)
			}
			if got.Asked != want.Asked || got.RefusedCount() != want.RefusedCount() {
				t.Fatalf("round %d step %d: asked %+v with %d refused, Admission says %+v with %d", round, step, got.Asked, got.RefusedCount(), want.Asked, want.RefusedCount())
			}
			for _, lb := range s.lbs {
				gm, gr := got.Refused(KindLoadBalancer, lb.Name)
				wm, wr := want.Refused(KindLoadBalancer, lb.Name)
				if gm != wm || gr != wr {
					t.Fatalf("round %d step %d: LoadBalancer %s refused %v %q, Admission says %v %q", round, step, lb.Name, gr, gm, wr, wm)
				}
			}
			for _, rt := range s.routes {
				gm, gr := got.Refused(KindRoute, rt.Name)
				wm, wr := want.Refused(KindRoute, rt.Name)
				if gm != wm || gr != wr {
					t.Fatalf("round %d step %d: Route %s refused %v %q, Admission says %v %q", round, step, rt.Name, gr, gm, wr, wm)
				}
			}
			// Change the tenant: replace (a new resourceVersion), delete and add objects.
			for range r.IntN(4) {
				if len(s.lbs) > 0 {
					i := r.IntN(len(s.lbs))
					changed := s.randomLB(r, 0)
					changed.Name, changed.UID, changed.CreationTimestamp = s.lbs[i].Name, s.lbs[i].UID, s.lbs[i].CreationTimestamp
					s.lbs[i] = changed
				}
			}
			if len(s.lbs) > 1 && r.IntN(3) == 0 {
				i := r.IntN(len(s.lbs))
				s.lbs = append(s.lbs[:i], s.lbs[i+1:]...)
			}
			if r.IntN(2) == 0 {
				s.lbs = append(s.lbs, s.randomLB(r, next))
				next++
			}
			if len(s.routes) > 0 && r.IntN(3) == 0 {
				s.routes = s.routes[1:]
			}
			if r.IntN(3) == 0 {
				s.routes = append(s.routes, s.randomRoute(r, next))
				next++
			}
		}
	}
}

// TestStoreForgetsDeletedObjects checks that the Store does not keep what it remembered of
// objects long gone: a tenant that churns through many objects holds memory for about the
// objects it has.
func TestStoreForgetsDeletedObjects(t *testing.T) {
	t.Parallel()
	s := &storeTenant{}
	m := newNamespaceMemo()
	r := rand.New(rand.NewPCG(3, 4))
	ten := settings.Tenant{Limits: limits(1000, 1000, 1000)}
	for i := range 2000 {
		s.lbs = append(s.lbs, s.randomLB(r, i))
		if len(s.lbs) > 10 {
			s.lbs = s.lbs[1:]
		}
		lbs, routes, _, _ := s.items()
		m.admission("tenant-a", lbs, routes, ten)
	}
	if len(m.lbs) > 2*10+64 {
		t.Fatalf("the Store remembers %d LoadBalancers of a tenant that has 10", len(m.lbs))
	}
}

// BenchmarkStoreAdmission10000 is what every LoadBalancer reconcile of a tenant of 10 000
// one-port LoadBalancers pays for the tenant's verdict, once their Objects are remembered
// (the burst benchmark's tenant: every one fits the limits).
func BenchmarkStoreAdmission10000(b *testing.B) {
	s := &storeTenant{}
	for i := range 10000 {
		lb := hubLB(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), t0.Add(time.Duration(i)*time.Second),
			kubelbv1alpha1.LoadBalancerPort{Port: 80, Protocol: corev1.ProtocolTCP})
		lb.UID, lb.ResourceVersion = types.UID(fmt.Sprint(i)), s.nextRV()
		s.lbs = append(s.lbs, &lb)
	}
	lbs, routes, _, _ := s.items()
	m := newNamespaceMemo()
	ten := settings.Tenant{Limits: limits(10000, 1000, 10000)}
	b.ReportAllocs()
	for b.Loop() {
		m.admission("tenant-a", lbs, routes, ten)
	}
}

// BenchmarkAdmissionLoadBalancers10000 is the same through Admission (a List of the
// tenant, every Object worked out again and ranked), for comparison.
func BenchmarkAdmissionLoadBalancers10000(b *testing.B) {
	lbs := make([]kubelbv1alpha1.LoadBalancer, 10000)
	for i := range lbs {
		lbs[i] = hubLB(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), t0.Add(time.Duration(i)*time.Second),
			kubelbv1alpha1.LoadBalancerPort{Port: 80, Protocol: corev1.ProtocolTCP})
	}
	ten := settings.Tenant{Limits: limits(10000, 1000, 10000)}
	b.ReportAllocs()
	for b.Loop() {
		Admission("tenant-a", lbs, nil, ten)
	}
}

// informers is a cache.Informers of two real client-go informers (LoadBalancers and Routes)
// fed by fake list-watch sources: what the Store reads in the manager, without an API server.
type informers struct {
	cache.Informers // only GetInformer is called
	lbs, routes     toolscache.SharedIndexInformer
}

func (i informers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	if _, ok := obj.(*kubelbv1alpha1.LoadBalancer); ok {
		return i.lbs, nil
	}
	return i.routes, nil
}

// TestStoreKeepsTheVerdictUntilAChange checks that the Store hands every caller the same
// verdict until one of the namespace's LoadBalancers or Routes changes or the settings asked
// with differ, and that a change is always seen: the planner, the Envoy control plane and
// the Tenant controller reacting to one event share one computation, never a stale one.
func TestStoreKeepsTheVerdictUntilAChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lbSource, routeSource := fcache.NewFakeControllerSource(), fcache.NewFakeControllerSource()
	byNamespace := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	inf := informers{
		lbs:    toolscache.NewSharedIndexInformer(lbSource, &kubelbv1alpha1.LoadBalancer{}, 0, byNamespace),
		routes: toolscache.NewSharedIndexInformer(routeSource, &kubelbv1alpha1.Route{}, 0, byNamespace),
	}
	port := kubelbv1alpha1.LoadBalancerPort{Port: 80, Protocol: corev1.ProtocolTCP}
	for i := range 3 {
		lb := hubLB(fmt.Sprintf("lb-%d", i), t0.Add(time.Duration(i)*time.Second), port)
		lb.UID = types.UID(lb.Name)
		lbSource.Add(&lb)
	}
	go inf.lbs.Run(ctx.Done())
	go inf.routes.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.lbs.HasSynced, inf.routes.HasSynced) {
		t.Fatal("the informers did not sync")
	}
	s := NewStore(inf, nil)
	ten := settings.Tenant{Limits: limits(2, 10, 10)}
	same := func(a, b Verdict) bool {
		return reflect.ValueOf(a.refused).UnsafePointer() == reflect.ValueOf(b.refused).UnsafePointer()
	}
	// waitFor asks until the verdict refuses exactly want (the informer delivers events on
	// its own goroutine), for at most 10 seconds.
	waitFor := func(want ...string) Verdict {
		t.Helper()
		var got []string
		for range 200 {
			v, err := s.LoadAdmission(ctx, "tenant-a", ten)
			if err != nil {
				t.Fatal(err)
			}
			if got = v.RefusedNames(KindLoadBalancer); slices.Equal(got, want) {
				return v
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("the Store refuses %v, want %v", got, want)
		return Verdict{}
	}

	first := waitFor("lb-2")
	// The counters hear of the three cached LoadBalancers again, on the informers' goroutines,
	// after the Store registered them; wait for that replay, then ask for the verdict the
	// replay may have made stale.
	for i := 0; !s.counting(); i++ {
		if i == 200 {
			t.Fatal("the Store's change counters never heard of the cached objects")
		}
		time.Sleep(50 * time.Millisecond)
	}
	first = waitFor("lb-2")
	if again, _ := s.LoadAdmission(ctx, "tenant-a", ten); !same(first, again) {
		t.Fatal("nothing changed, yet the Store computed the verdict again")
	}
	if other, _ := s.LoadAdmission(ctx, "tenant-b", ten); other.RefusedCount() != 0 || other.Asked.LoadBalancers != 0 {
		t.Fatalf("tenant-b has no objects, yet its verdict is %+v", other.Asked)
	}

	// An older LoadBalancer arrives: lb-1 is now the third oldest.
	older := hubLB("lb-old", t0.Add(-time.Hour), port)
	older.UID = "lb-old"
	lbSource.Add(&older)
	changed := waitFor("lb-1", "lb-2")
	if same(first, changed) {
		t.Fatal("a LoadBalancer was added, yet the Store kept its verdict")
	}

	// Other settings, no event: computed for them.
	ten.Limits = limits(4, 10, 10)
	if v, _ := s.LoadAdmission(ctx, "tenant-a", ten); v.RefusedCount() != 0 {
		t.Fatalf("under a limit of 4 LoadBalancers the Store refuses %v", v.RefusedNames(KindLoadBalancer))
	}

	// A deletion is seen too.
	ten.Limits = limits(2, 10, 10)
	lbSource.Delete(&older)
	waitFor("lb-2")
}
