package translate_test

import (
	"maps"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// listenerNames are the names of the listeners of a translation, sorted.
func listenerNames(t *testing.T, out translate.Result) []string {
	t.Helper()
	var names []string
	for _, l := range out.Config.Listeners {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	return names
}

func noPortPending(t *testing.T, out translate.Result) {
	t.Helper()
	for _, p := range out.Problems {
		if p.Reason == translate.ReasonPortPending {
			t.Errorf("a PortPending problem left the translation: %v", p)
		}
	}
}

// TestWaitingLoadBalancerServedAsItWas: a LoadBalancer that gains a port its hub Service has
// no listener port for yet is served as it was before the change (same listeners, no partial
// version); one that is new has nothing to serve yet; both wait, with no PortPending problem,
// until the hub Service has the port. A LoadBalancer deleted and made again under its name
// does not get its predecessor's version: it is served as it is, its allocated ports only.
func TestWaitingLoadBalancerServedAsItWas(t *testing.T) {
	in := translatetest.LoadBalancerTenant(3)
	var front translate.Incremental
	var settled translate.Settled
	run := func(in translate.Input) (translate.Input, translate.Result, translate.Waiting) {
		t.Helper()
		got, out, w, err := settled.Translate(in, front.Run)
		if err != nil {
			t.Fatal(err)
		}
		noPortPending(t, out)
		return got, out, w
	}
	_, out, w := run(in)
	if len(w.Held)+len(w.Translated) > 0 {
		t.Fatalf("waiting with every port allocated: %+v", w)
	}
	before := listenerNames(t, out)
	if len(before) != 3 {
		t.Fatalf("listeners %v, want 3", before)
	}

	// LoadBalancer 1 gains port 443; its hub Service has no listener port for it yet.
	in.LoadBalancers = slices.Clone(in.LoadBalancers)
	lb1 := in.LoadBalancers[1].DeepCopy()
	lb1.Spec.Ports = append(lb1.Spec.Ports, v1alpha1.LoadBalancerPort{Port: 443, Protocol: corev1.ProtocolTCP})
	lb1.ResourceVersion, lb1.Generation = "2", 2
	in.LoadBalancers[1] = *lb1
	// A new LoadBalancer without a hub Service.
	lb3 := in.LoadBalancers[0].DeepCopy()
	lb3.Name, lb3.UID = "new", "lb-new"
	in.LoadBalancers = append(in.LoadBalancers, *lb3)
	ref1 := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: in.Tenant, Name: lb1.Name}
	ref3 := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: in.Tenant, Name: "new"}

	translated, out, w := run(in)
	if !w.Held[ref1] || len(w.Held) != 1 || !w.Translated[ref3] || len(w.Translated) != 1 {
		t.Errorf("held %v and waiting as they are %v, want %s held and %s as it is", w.Held, w.Translated, ref1.Name, ref3.Name)
	}
	if diff := cmp.Diff(before, listenerNames(t, out)); diff != "" {
		t.Errorf("listeners while waiting differ from before the change (-before +now):\n%s", diff)
	}
	if i := slices.IndexFunc(translated.LoadBalancers, func(lb v1alpha1.LoadBalancer) bool { return lb.Name == lb1.Name }); i < 0 || translated.LoadBalancers[i].ResourceVersion != "1" {
		t.Errorf("the translated input does not have the settled version of %s", lb1.Name)
	}

	// The planner applies both hub Services.
	in.HubServices = cloneServices(in.HubServices)
	svc1 := in.HubServices[lb1.Name].DeepCopy()
	svc1.Spec.Ports = append(svc1.Spec.Ports, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(11443)})
	svc1.ResourceVersion = "2"
	in.HubServices[lb1.Name] = svc1
	svc3 := in.HubServices[in.LoadBalancers[0].Name].DeepCopy()
	svc3.Name, svc3.UID, svc3.Spec.Ports[0].TargetPort = "envoy-new", "svc-new", intstr.FromInt32(11080)
	in.HubServices["new"] = svc3
	_, out, w = run(in)
	if len(w.Held)+len(w.Translated) > 0 {
		t.Errorf("still waiting once the ports exist: %+v", w)
	}
	if got := len(listenerNames(t, out)); got != 5 {
		t.Errorf("%d listeners once the ports exist, want 5: %v", got, listenerNames(t, out))
	}

	// "new" is deleted and made again (another UID) with a port it has no listener port for.
	again := in.LoadBalancers[3].DeepCopy()
	again.UID, again.ResourceVersion = types.UID("lb-new-2"), "3"
	again.Spec.Ports = append(again.Spec.Ports, v1alpha1.LoadBalancerPort{Port: 8443, Protocol: corev1.ProtocolTCP})
	in.LoadBalancers[3] = *again
	translated, out, w = run(in)
	if w.Held[ref3] || !w.Translated[ref3] {
		t.Errorf("held %v, waiting as they are %v, want %s waiting as it is", w.Held, w.Translated, ref3.Name)
	}
	if i := slices.IndexFunc(translated.LoadBalancers, func(lb v1alpha1.LoadBalancer) bool { return lb.Name == "new" }); i < 0 || translated.LoadBalancers[i].UID != "lb-new-2" {
		t.Error("a LoadBalancer made again under a name is served as its predecessor was")
	}
	if !slices.Contains(listenerNames(t, out), "new-tcp-80") || slices.Contains(listenerNames(t, out), "new-tcp-8443") {
		t.Errorf("listeners %v, want new-tcp-80 (allocated) and not new-tcp-8443 (pending)", listenerNames(t, out))
	}
}

func cloneServices(m map[string]*corev1.Service) map[string]*corev1.Service {
	out := make(map[string]*corev1.Service, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestWaitingGateway: a Gateway that gains a listener its hub Service has no port for yet is
// served as it was (same listeners, its status left out); a new Gateway without its Service is
// translated (its listeners say Pending in its status) but waits for its verdict.
func TestWaitingGateway(t *testing.T) {
	in := translatetest.HTTPRoutesTenant(t, 2)
	var settled translate.Settled
	_, out, w, err := settled.Translate(in, translate.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Held)+len(w.Translated) > 0 {
		t.Fatalf("waiting with every port allocated: %+v", w)
	}
	before := listenerNames(t, out)

	gw := slices.IndexFunc(in.Routes, func(r v1alpha1.Route) bool { return r.Name == "gw" })
	in.Routes = slices.Clone(in.Routes)
	changed := in.Routes[gw].DeepCopy()
	spec := changed.Spec.Source.Kubernetes.Route.Object["spec"].(map[string]any)
	spec["listeners"] = append(slices.Clone(spec["listeners"].([]any)), map[string]any{"name": "alt", "port": int64(8080), "protocol": "HTTP"})
	changed.ResourceVersion = "2"
	in.Routes[gw] = *changed
	newGW := in.Routes[gw].DeepCopy()
	newGW.Name, newGW.UID = "gw2", "gw2"
	newGW.Spec.Source.Kubernetes.Route.Object["metadata"] = map[string]any{"name": "gw2", "namespace": "apps"}
	in.Routes = append(in.Routes, *newGW)

	_, out, w, err = settled.Translate(in, translate.Run)
	if err != nil {
		t.Fatal(err)
	}
	noPortPending(t, out)
	refGW := ir.ObjectRef{Kind: translate.KindRoute, Namespace: in.Tenant, Name: "gw"}
	refNew := ir.ObjectRef{Kind: translate.KindRoute, Namespace: in.Tenant, Name: "gw2"}
	if !w.Held[refGW] || len(w.Held) != 1 {
		t.Errorf("held %v, want gw", w.Held)
	}
	if !w.Translated[refNew] || len(w.Translated) != 1 {
		t.Errorf("translated while waiting %v, want gw2", w.Translated)
	}
	if diff := cmp.Diff(before, listenerNames(t, out)); diff != "" {
		t.Errorf("listeners while waiting differ from before the change (-before +now):\n%s", diff)
	}
	if _, ok := out.Routes["gw2"]; !ok {
		t.Error("the new Gateway has no status while it waits (its listeners are Pending)")
	}

	// The planner applies the new port.
	in.RouteServices = slices.Clone(in.RouteServices)
	i := slices.IndexFunc(in.RouteServices, func(s corev1.Service) bool { return s.Labels[v1alpha1.LabelRouteName] == "gw" })
	svc := in.RouteServices[i].DeepCopy()
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "tcp-8080", Port: 8080, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(20880)})
	in.RouteServices[i] = *svc
	_, out, w, err = settled.Translate(in, translate.Run)
	if err != nil {
		t.Fatal(err)
	}
	if w.Held[refGW] || w.Translated[refGW] {
		t.Errorf("gw still waits once its port exists: %+v", w)
	}
	if got := listenerNames(t, out); len(got) <= len(before) {
		t.Errorf("listeners %v once the port exists, want more than %v", got, before)
	}
}

// TestSettledKeepsNoListOfAnEarlierInput: the Envoy control plane lists a tenant's hub
// Services at every rebuild and hands Translate pointers into that list. What Settled (and
// the Incremental front end) keep across rebuilds must not point into it, or every rebuild
// that settles one LoadBalancer keeps that rebuild's whole list alive: a 10 000-Service burst
// grew the manager to 3 GB this way.
func TestSettledKeepsNoListOfAnEarlierInput(t *testing.T) {
	var front translate.Incremental
	var settled translate.Settled
	freed := make(chan struct{})
	listed := func(first bool) translate.Input {
		in := translatetest.LoadBalancerTenant(3)
		names := slices.Sorted(maps.Keys(in.HubServices))
		svcs := make([]corev1.Service, len(names)) // one list, as the cache gives it
		for i, name := range names {
			svcs[i] = *in.HubServices[name]
			svcs[i].UID, svcs[i].ResourceVersion = types.UID("svc-"+name), "1" // unchanged between the rebuilds
			in.HubServices[name] = &svcs[i]
		}
		for i := range in.LoadBalancers {
			in.LoadBalancers[i].ResourceVersion = "1"
		}
		if first {
			runtime.SetFinalizer(&svcs[0], func(*corev1.Service) { close(freed) })
		}
		return in
	}
	for _, first := range []bool{true, false} {
		if _, _, _, err := settled.Translate(listed(first), front.Run); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		runtime.GC()
		select {
		case <-freed:
			runtime.KeepAlive(&settled) // what the next rebuild has
			runtime.KeepAlive(&front)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	runtime.KeepAlive(&settled)
	runtime.KeepAlive(&front)
	t.Fatal("the first rebuild's list of hub Services is still alive after the second rebuild")
}

// TestUntoldLeavesHeldObjectsOut: what a translation tells of an object held at its settled
// version (its generation, its problems — of a section too —, a Route's tenant status) is not
// that object's and is left out of the report; the others' stays, and the caller's problems
// and Route statuses are not changed.
func TestUntoldLeavesHeldObjectsOut(t *testing.T) {
	t.Parallel()
	lb := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: "tenant-a", Name: "held"}
	gw := ir.ObjectRef{Kind: translate.KindRoute, Namespace: "tenant-a", Name: "gw"}
	other := ir.ObjectRef{Kind: translate.KindRoute, Namespace: "tenant-a", Name: "other"}
	w := translate.Waiting{Held: map[ir.ObjectRef]bool{lb: true, gw: true}}
	objects := map[ir.ObjectRef]int64{lb: 2, gw: 3, other: 4}
	section := gw
	section.Section = "https"
	problems := ir.Problems{{Object: lb, Message: "a"}, {Object: section, Message: "b"}, {Object: other, Message: "c"}}
	routes := map[string]translate.RouteStatus{"gw": {}, "other": {}}
	gotObjects, gotProblems, gotRoutes := w.Untold(objects, slices.Clone(problems), routes)
	if want := map[ir.ObjectRef]int64{other: 4}; !maps.Equal(gotObjects, want) {
		t.Errorf("objects %v, want %v", gotObjects, want)
	}
	if len(gotProblems) != 1 || gotProblems[0].Object != other {
		t.Errorf("problems %v, want only the other Route's", gotProblems)
	}
	if _, ok := gotRoutes["gw"]; ok || len(gotRoutes) != 1 {
		t.Errorf("Route statuses %v, want only the other Route's", gotRoutes)
	}
	if len(routes) != 2 {
		t.Errorf("the caller's Route statuses were changed: %v", routes)
	}
	none := translate.Waiting{}
	if o, p, r := none.Untold(map[ir.ObjectRef]int64{other: 4}, problems, routes); len(o) != 1 || len(p) != 3 || len(r) != 2 {
		t.Errorf("nothing held, yet something was left out: %v %v %v", o, p, r)
	}
}
