package quota

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
