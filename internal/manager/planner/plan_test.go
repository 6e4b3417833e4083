package planner

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/trafficpolicy"
	"kubelb.dev/kubelb/internal/translate"
)

const ns = "tenant-a"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func meta(name string, age int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
		CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))}
}

func lb(name string, age int, ports ...int32) *kubelbv1alpha1.LoadBalancer {
	l := &kubelbv1alpha1.LoadBalancer{ObjectMeta: meta(name, age)}
	for _, p := range ports {
		l.Spec.Ports = append(l.Spec.Ports, kubelbv1alpha1.LoadBalancerPort{Port: p})
	}
	return l
}

func embedded(rt *kubelbv1alpha1.Route, obj map[string]any) *kubelbv1alpha1.Route {
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: obj}}
	return rt
}

func gateway(name string, age int, ports ...int64) *kubelbv1alpha1.Route {
	ls := []any{}
	for _, p := range ports {
		ls = append(ls, map[string]any{"name": fmt.Sprintf("l%d", p), "port": p, "protocol": "TCP"})
	}
	return embedded(&kubelbv1alpha1.Route{ObjectMeta: meta(name, age)}, map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw-" + name, "namespace": "shop"},
		"spec":     map[string]any{"gatewayClassName": "kubelb", "listeners": ls},
	})
}

func ingress(name string, age int) *kubelbv1alpha1.Route {
	return embedded(&kubelbv1alpha1.Route{ObjectMeta: meta(name, age)}, map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"name": "ing-" + name, "namespace": "shop"},
		"spec":     map[string]any{"ingressClassName": "kubelb"},
	})
}

func httpRoute(name string, age int) *kubelbv1alpha1.Route {
	return embedded(&kubelbv1alpha1.Route{ObjectMeta: meta(name, age)}, map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "hr-" + name, "namespace": "shop"},
	})
}

// service is a hub Service controlled by an object of kind and name (uid), with the
// (port, targetPort) pairs given.
func service(name, kind, owner string, uid types.UID, labels map[string]string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("svc-" + name), ResourceVersion: "7", Labels: labels}}
	if kind != "" {
		svc.OwnerReferences = []metav1.OwnerReference{{APIVersion: kubelbv1alpha1.GroupVersion.String(), Kind: kind, Name: owner, UID: uid, Controller: ptr.To(true)}}
	}
	for i := 0; i+1 < len(ports); i += 2 {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: ports[i], TargetPort: intstr.FromInt32(ports[i+1])})
	}
	return svc
}

func services(svcs ...*corev1.Service) map[string]*corev1.Service {
	out := map[string]*corev1.Service{}
	for _, s := range svcs {
		out[s.Name] = s
	}
	return out
}

func tenant(mutate ...func(*settings.Tenant)) settings.Tenant {
	t := settings.Tenant{AllocateNodePorts: true, Limits: settings.Limits{LoadBalancers: 100, Routes: 100, ListenerPorts: 100, NodePorts: 100, ObjectBytes: 1 << 30}}
	for _, m := range mutate {
		m(&t)
	}
	return t
}

func lbKey(name string, port int32) portalloc.Key { return portalloc.KeyFor(ns, name, "", "", port) }

func req(k portalloc.Key, hints ...int32) portalloc.Request {
	return portalloc.Request{Key: k, Hints: hints}
}

func owner(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

var ingressOwner = portalloc.IngressOwner(ns)

// outcome is what a test compares of a plan: the verdict is read through Refused.
type outcome struct {
	Holders        []Holder
	Hostnames      []string
	Release        []types.NamespacedName
	DeleteServices []string
}

func TestPlan(t *testing.T) {
	t.Parallel()
	lbSvc := func(name string, uid types.UID, ports ...int32) *corev1.Service {
		return service("envoy-"+name, "LoadBalancer", name, uid, map[string]string{kubelbv1alpha1.LabelManagedBy: "kubelb",
			kubelbv1alpha1.LabelLoadBalancerNS: ns, kubelbv1alpha1.LabelLoadBalancerName: name}, ports...)
	}
	gwSvc := func(route string, uid types.UID, ports ...int32) *corev1.Service {
		return service("gateway-"+route, "Route", route, uid, map[string]string{kubelbv1alpha1.LabelManagedBy: "kubelb", kubelbv1alpha1.LabelRouteName: route}, ports...)
	}
	ingSvc := func(ports ...int32) *corev1.Service {
		return service(kubelbv1alpha1.IngressServiceName, "", "", "", map[string]string{kubelbv1alpha1.LabelManagedBy: "kubelb", kubelbv1alpha1.LabelIngressService: "true"}, ports...)
	}
	refusedLB := "tenant tenant-a may hold 1 LoadBalancer (spec.limits.loadBalancers); this is the 2nd oldest — delete another or ask the platform team to raise the limit"
	refusedRoute := "tenant tenant-a may hold 1 Route (spec.limits.routes); this is the 2nd oldest — delete another or ask the platform team to raise the limit"
	wildcard := func(t *settings.Tenant) { t.DNS = translate.DNS{WildcardDomain: "lb.example.com"} }

	cases := []struct {
		name string
		in   Input
		want outcome
	}{{
		name: "a new LoadBalancer asks for a listener port per port, and gets a hub Service",
		in:   Input{Tenant: tenant(), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("web", 0, 80, 443)}},
		want: outcome{Holders: []Holder{{Kind: LoadBalancer, Name: "web", UID: "uid-web", Owner: owner("web"), Service: "envoy-web",
			Action: Ensure, Requests: []portalloc.Request{req(lbKey("web", 80)), req(lbKey("web", 443))}, Wanted: true}}},
	}, {
		name: "the hub Service's target ports are the hints, so a restart keeps the listener ports",
		in: Input{Tenant: tenant(), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("web", 0, 80)},
			Services: services(lbSvc("web", "uid-web", 80, 20001))},
		want: outcome{Holders: []Holder{{Kind: LoadBalancer, Name: "web", UID: "uid-web", Owner: owner("web"), Service: "envoy-web",
			Action: Ensure, Requests: []portalloc.Request{req(lbKey("web", 80), 20001)}, Wanted: true}}},
	}, {
		name: "the newer LoadBalancer beyond the limit is refused: it holds no ports and its hub Service goes",
		in: Input{Tenant: tenant(func(t *settings.Tenant) { t.Limits.LoadBalancers = 1 }),
			LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("new", 5, 80), lb("old", 0, 80)},
			Services:      services(lbSvc("new", "uid-new", 80, 20002))},
		want: outcome{Holders: []Holder{
			{Kind: LoadBalancer, Name: "new", UID: "uid-new", Owner: owner("new"), Service: "envoy-new", Refused: refusedLB, Action: Ensure, DeleteService: true},
			{Kind: LoadBalancer, Name: "old", UID: "uid-old", Owner: owner("old"), Service: "envoy-old", Action: Ensure, Requests: []portalloc.Request{req(lbKey("old", 80))}, Wanted: true},
		}},
	}, {
		name: "load balancing disabled: no ports, no hub Service",
		in: Input{Tenant: tenant(func(t *settings.Tenant) { t.DisableLoadBalancer = true }), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("web", 0, 80)},
			Services: services(lbSvc("web", "uid-web", 80, 20001))},
		want: outcome{Holders: []Holder{{Kind: LoadBalancer, Name: "web", UID: "uid-web", Owner: owner("web"), Service: "envoy-web", Disabled: true, Action: Ensure, DeleteService: true}}},
	}, {
		name: "an earlier LoadBalancer's hub Service goes first; the ports stay as they are",
		in: Input{Tenant: tenant(), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("web", 0, 80)},
			Services: services(lbSvc("web", "uid-earlier", 80, 20001))},
		want: outcome{Holders: []Holder{{Kind: LoadBalancer, Name: "web", UID: "uid-web", Owner: owner("web"), Service: "envoy-web", Action: Keep, Stale: true, DeleteService: true}}},
	}, {
		name: "a foreign Service in the hub Service's place is never touched; the ports are kept for when it goes",
		in: Input{Tenant: tenant(), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("web", 0, 80)},
			Services: services(service("envoy-web", "", "", "", nil, 80, 30000))},
		want: outcome{Holders: []Holder{{Kind: LoadBalancer, Name: "web", UID: "uid-web", Owner: owner("web"), Service: "envoy-web", Foreign: true,
			Action: Ensure, Requests: []portalloc.Request{req(lbKey("web", 80))}}}},
	}, {
		name: "a Gateway asks for a port per listener port, hinted by its hub Service",
		in: Input{Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{gateway("gw", 0, 80, 443)},
			Services: services(gwSvc("gw", "uid-gw", 443, 20443))},
		want: outcome{Holders: []Holder{{Kind: Gateway, Name: "gw", UID: "uid-gw", Owner: portalloc.RouteOwner(ns, "gw"), Service: "gateway-gw", Action: Ensure,
			Requests: []portalloc.Request{req(portalloc.RouteKey(ns, "gw", corev1.ProtocolTCP, 80)), req(portalloc.RouteKey(ns, "gw", corev1.ProtocolTCP, 443), 20443)}, Wanted: true}}},
	}, {
		name: "an earlier Route's Gateway Service is replaced at once",
		in: Input{Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{gateway("gw", 0, 80)},
			Services: services(gwSvc("gw", "uid-earlier", 80, 20080))},
		want: outcome{Holders: []Holder{{Kind: Gateway, Name: "gw", UID: "uid-gw", Owner: portalloc.RouteOwner(ns, "gw"), Service: "gateway-gw", Action: Ensure,
			Stale: true, DeleteService: true, Requests: []portalloc.Request{req(portalloc.RouteKey(ns, "gw", corev1.ProtocolTCP, 80))}, Wanted: true}}},
	}, {
		name: "Gateway API disabled: the Gateway's ports and hub Service go; its HTTPRoute is disabled too",
		in: Input{Tenant: tenant(func(t *settings.Tenant) { t.DisableGatewayAPI = true }), Routes: []*kubelbv1alpha1.Route{gateway("gw", 0, 80), httpRoute("hr", 1)},
			Services: services(gwSvc("gw", "uid-gw", 80, 20080))},
		want: outcome{Holders: []Holder{
			{Kind: Gateway, Name: "gw", UID: "uid-gw", Owner: portalloc.RouteOwner(ns, "gw"), Service: "gateway-gw", Disabled: true, Action: Ensure, DeleteService: true},
			{Kind: Route, Name: "hr", UID: "uid-hr", Owner: portalloc.RouteOwner(ns, "hr"), Disabled: true, Action: Ensure},
		}},
	}, {
		name: "a Route whose Gateway was replaced by an HTTPRoute gives back its ports and hub Service",
		in: Input{Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{httpRoute("gw", 0)},
			Services: services(gwSvc("gw", "uid-gw", 80, 20080))},
		want: outcome{Holders: []Holder{{Kind: Route, Name: "gw", UID: "uid-gw", Owner: portalloc.RouteOwner(ns, "gw"), Service: "gateway-gw", Action: Ensure, DeleteService: true}}},
	}, {
		name: "a refused Gateway holds nothing",
		in: Input{Tenant: tenant(func(t *settings.Tenant) { t.Limits.Routes = 1 }), Routes: []*kubelbv1alpha1.Route{gateway("a", 0, 80), gateway("b", 1, 81)},
			Services: services(gwSvc("b", "uid-b", 81, 20081))},
		want: outcome{Holders: []Holder{
			{Kind: Gateway, Name: "a", UID: "uid-a", Owner: portalloc.RouteOwner(ns, "a"), Service: "gateway-a", Action: Ensure,
				Requests: []portalloc.Request{req(portalloc.RouteKey(ns, "a", corev1.ProtocolTCP, 80))}, Wanted: true},
			{Kind: Gateway, Name: "b", UID: "uid-b", Owner: portalloc.RouteOwner(ns, "b"), Service: "gateway-b", Refused: refusedRoute, Action: Ensure, DeleteService: true},
		}},
	}, {
		name: "a Gateway Route whose name cannot label a Service is left as it is",
		in:   Input{Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{gateway("Not_A_Label.x!", 0, 80)}},
		want: outcome{Holders: []Holder{{Kind: Gateway, Name: "Not_A_Label.x!", UID: "uid-Not_A_Label.x!", Owner: portalloc.RouteOwner(ns, "Not_A_Label.x!"),
			Service: hubnames.GatewayServiceName("Not_A_Label.x!"), InvalidName: true, Action: Keep}}},
	}, {
		name: "an Ingress Route makes the tenant's Ingress Service ask for ports 80 and 443",
		in:   Input{Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{ingress("shop", 0)}, Services: services(ingSvc(443, 20443))},
		want: outcome{Holders: []Holder{
			{Kind: Ingress, Name: "kubelb-ingress", Owner: ingressOwner, Service: "kubelb-ingress", Action: Ensure, Wanted: true,
				Requests: []portalloc.Request{req(portalloc.IngressKey(ns, 80)), req(portalloc.IngressKey(ns, 443), 20443)}},
			{Kind: Route, Name: "shop", UID: "uid-shop", Owner: portalloc.RouteOwner(ns, "shop"), Action: Ensure},
		}},
	}, {
		name: "Ingress disabled: the Ingress Service goes",
		in: Input{Tenant: tenant(func(t *settings.Tenant) { t.DisableIngress = true }), Routes: []*kubelbv1alpha1.Route{ingress("shop", 0)},
			Services: services(ingSvc(80, 20080)), Allocated: []types.NamespacedName{ingressOwner}},
		want: outcome{Holders: []Holder{
			{Kind: Ingress, Name: "kubelb-ingress", Owner: ingressOwner, Service: "kubelb-ingress", Action: Ensure, DeleteService: true},
			{Kind: Route, Name: "shop", UID: "uid-shop", Owner: portalloc.RouteOwner(ns, "shop"), Disabled: true, Action: Ensure},
		}},
	}, {
		name: "a foreign kubelb-ingress is never touched; the tenant's Ingress Service waits for it to go",
		in: Input{Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{ingress("shop", 0)},
			Services: services(service(kubelbv1alpha1.IngressServiceName, "", "", "", nil, 80, 80))},
		want: outcome{Holders: []Holder{
			{Kind: Ingress, Name: "kubelb-ingress", Owner: ingressOwner, Service: "kubelb-ingress", Foreign: true, Action: Keep},
			{Kind: Route, Name: "shop", UID: "uid-shop", Owner: portalloc.RouteOwner(ns, "shop"), Action: Ensure},
		}},
	}, {
		name: "LoadBalancer hostnames need the Ingress Service (its DNS annotation); one held by another tenant does not",
		in: Input{Tenant: tenant(wildcard), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("web", 0, 80), lb("taken", 1, 80)},
			HeldElsewhere: map[string]bool{"taken": true}},
		want: outcome{Hostnames: []string{"web.a.lb.example.com"}, Holders: []Holder{
			{Kind: Ingress, Name: "kubelb-ingress", Owner: ingressOwner, Service: "kubelb-ingress", Action: Ensure, Wanted: true,
				Requests: []portalloc.Request{req(portalloc.IngressKey(ns, 80)), req(portalloc.IngressKey(ns, 443))}},
			{Kind: LoadBalancer, Name: "taken", UID: "uid-taken", Owner: owner("taken"), Service: "envoy-taken", Action: Ensure, Requests: []portalloc.Request{req(lbKey("taken", 80))}, Wanted: true},
			{Kind: LoadBalancer, Name: "web", UID: "uid-web", Owner: owner("web"), Service: "envoy-web", Action: Ensure, Requests: []portalloc.Request{req(lbKey("web", 80))}, Wanted: true},
		}},
	}, {
		name: "what is gone: its ports are freed and the hub Services made for it deleted; others' Services stay",
		in: Input{Tenant: tenant(),
			Services: services(lbSvc("gone-lb", "uid-gone-lb", 80, 20001), gwSvc("gone-gw", "uid-gone-gw", 80, 20002),
				service("envoy-tenants-own", "", "", "", nil, 80, 80), ingSvc(80, 20003)),
			Allocated: []types.NamespacedName{owner("gone-lb"), portalloc.RouteOwner(ns, "gone-gw"), ingressOwner, {Namespace: "tenant-b", Name: "other"}}},
		want: outcome{
			Holders:        []Holder{{Kind: Ingress, Name: "kubelb-ingress", Owner: ingressOwner, Service: "kubelb-ingress", Action: Ensure, DeleteService: true}},
			Release:        []types.NamespacedName{owner("gone-lb"), portalloc.RouteOwner(ns, "gone-gw")},
			DeleteServices: []string{"envoy-gone-lb", "gateway-gone-gw"},
		},
	}, {
		name: "an object being deleted: its hub Service is deleted and its ports freed",
		in: Input{Tenant: tenant(), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{deleting(lb("web", 0, 80))},
			Services: services(lbSvc("web", "uid-web", 80, 20001)), Allocated: []types.NamespacedName{owner("web")}},
		want: outcome{Release: []types.NamespacedName{owner("web")}, DeleteServices: []string{"envoy-web"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.in.Namespace = ns
			p := Make(tc.in)
			got := outcome{Holders: p.Holders, Hostnames: p.Hostnames, Release: p.Release, DeleteServices: p.DeleteServices}
			// The ports themselves are in the requests' keys (TestPlanListenerSets checks them).
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Holder{}, "LoadBalancerPorts", "GatewayPorts")); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			for _, h := range p.Holders {
				if h.UID == "" {
					continue
				}
				kind := quota.KindLoadBalancer
				if h.Kind != LoadBalancer {
					kind = quota.KindRoute
				}
				if msg, refused := p.Verdict.Refused(kind, h.Name); msg != h.Refused || refused != (h.Refused != "") {
					t.Errorf("%s %s: the verdict says %q, the holder %q", h.Kind, h.Name, msg, h.Refused)
				}
			}
		})
	}
}

func deleting(l *kubelbv1alpha1.LoadBalancer) *kubelbv1alpha1.LoadBalancer {
	l.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	l.Finalizers = []string{"someone.else/hold"}
	return l
}

// listenerSet is a Route of a ListenerSet of namespace shop naming the Gateway of the Route
// gateway, with one listener on port.
func listenerSet(name string, age int, gateway string, port int64) *kubelbv1alpha1.Route {
	rt := embedded(&kubelbv1alpha1.Route{ObjectMeta: meta(name, age)}, map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
		"metadata": map[string]any{"name": "ls-" + name, "namespace": "shop"},
		"spec": map[string]any{"parentRef": map[string]any{"name": "gw-" + gateway, "namespace": "shop"},
			"listeners": []any{map[string]any{"name": "extra", "port": port, "protocol": "TCP"}}},
	})
	rt.Spec.Source.Kubernetes.Context = &kubelbv1alpha1.SourceContext{}
	return rt
}

// allowListenerSets makes a Gateway Route take ListenerSets of its own namespace.
func allowListenerSets(rt *kubelbv1alpha1.Route) *kubelbv1alpha1.Route {
	_ = unstructured.SetNestedField(rt.Spec.Source.Kubernetes.Route.Object, "Same", "spec", "allowedListeners", "namespaces", "from")
	return rt
}

// TestPlanListenerSets: the listeners of an admitted ListenerSet its Gateway allows get
// ports on the Gateway's hub Service; a refused one's do not.
func TestPlanListenerSets(t *testing.T) {
	t.Parallel()
	gwKey := func(port int32) portalloc.Request { return req(portalloc.RouteKey(ns, "gw", corev1.ProtocolTCP, port)) }
	for _, tc := range []struct {
		name   string
		limit  int
		routes []*kubelbv1alpha1.Route
		want   []portalloc.Request
	}{
		{"allowed", 10, []*kubelbv1alpha1.Route{allowListenerSets(gateway("gw", 0, 80)), listenerSet("ls", 1, "gw", 8080)}, []portalloc.Request{gwKey(80), gwKey(8080)}},
		{"not allowed", 10, []*kubelbv1alpha1.Route{gateway("gw", 0, 80), listenerSet("ls", 1, "gw", 8080)}, []portalloc.Request{gwKey(80)}},
		{"refused by the limits", 1, []*kubelbv1alpha1.Route{allowListenerSets(gateway("gw", 0, 80)), listenerSet("ls", 1, "gw", 8080)}, []portalloc.Request{gwKey(80)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := Make(Input{Namespace: ns, Tenant: tenant(func(t *settings.Tenant) { t.Limits.Routes = tc.limit }), Routes: tc.routes})
			h, ok := p.Holder(Gateway, "gw")
			if !ok {
				t.Fatalf("no holder for the Gateway: %+v", p.Holders)
			}
			if diff := cmp.Diff(tc.want, h.Requests, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if len(h.GatewayPorts) != len(tc.want) {
				t.Errorf("ports %v, want one per request", h.GatewayPorts)
			}
			for i, p := range h.GatewayPorts {
				if k := portalloc.RouteKey(ns, "gw", p.Protocol, p.Port); i < len(tc.want) && k != tc.want[i].Key {
					t.Errorf("port %d is %v, its request %v", i, k, tc.want[i].Key)
				}
			}
		})
	}
}

// tenantObjects is a tenant of every kind of holder, with hub Services.
func tenantObjects() Input {
	return Input{Namespace: ns, Tenant: tenant(func(t *settings.Tenant) {
		t.DNS = translate.DNS{WildcardDomain: "lb.example.com"}
		t.Limits.LoadBalancers = 3
		t.Limits.Routes = 4
	}),
		LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("a", 3, 80), lb("b", 1, 80, 443), lb("c", 2, 53), lb("d", 0, 22)},
		Routes: []*kubelbv1alpha1.Route{allowListenerSets(gateway("gw", 0, 80, 443)), listenerSet("ls", 1, "gw", 8080), ingress("shop", 2),
			httpRoute("hr", 3), gateway("late", 4, 9000)},
		Services: services(
			service("envoy-b", "LoadBalancer", "b", "uid-b", nil, 80, 20080, 443, 20443),
			service("gateway-gw", "Route", "gw", "uid-gw", nil, 80, 21080),
			service("envoy-gone", "LoadBalancer", "gone", "uid-gone", nil, 80, 22080)),
		Allocated: []types.NamespacedName{owner("b"), owner("gone")},
	}
}

// TestPlanIsDeterministic: the order in which the caches list a tenant's objects does not
// change its plan.
func TestPlanIsDeterministic(t *testing.T) {
	t.Parallel()
	in := tenantObjects()
	want := Make(in)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		shuffled := in
		shuffled.LoadBalancers = slices.Clone(in.LoadBalancers)
		shuffled.Routes = slices.Clone(in.Routes)
		shuffled.Allocated = slices.Clone(in.Allocated)
		rnd.Shuffle(len(shuffled.LoadBalancers), func(i, j int) {
			shuffled.LoadBalancers[i], shuffled.LoadBalancers[j] = shuffled.LoadBalancers[j], shuffled.LoadBalancers[i]
		})
		rnd.Shuffle(len(shuffled.Routes), func(i, j int) { shuffled.Routes[i], shuffled.Routes[j] = shuffled.Routes[j], shuffled.Routes[i] })
		rnd.Shuffle(len(shuffled.Allocated), func(i, j int) {
			shuffled.Allocated[i], shuffled.Allocated[j] = shuffled.Allocated[j], shuffled.Allocated[i]
		})
		got := Make(shuffled)
		if diff := cmp.Diff(view(want), view(got), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("shuffle %d: plan (-want +got):\n%s", i, diff)
		}
	}
}

// TestPlannerRemembersOnlyWhatIsCurrent: a Planner's plans, across changes of objects,
// Services and settings, are those made from scratch; an object whose resourceVersion did
// not change is not worked out again.
func TestPlannerRemembersOnlyWhatIsCurrent(t *testing.T) {
	t.Parallel()
	in := tenantObjects()
	pl := &Planner{}
	check := func(step string, in Input) {
		t.Helper()
		if diff := cmp.Diff(view(Make(in)), view(pl.Plan(in)), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%s: remembered plan (-fresh +remembered):\n%s", step, diff)
		}
	}
	check("first", in)
	check("unchanged", in)

	// A LoadBalancer's new port, at a new resourceVersion.
	b := in.LoadBalancers[1].DeepCopy()
	b.Spec.Ports = append(b.Spec.Ports, kubelbv1alpha1.LoadBalancerPort{Port: 8443})
	b.ResourceVersion = "2"
	in.LoadBalancers = []*kubelbv1alpha1.LoadBalancer{in.LoadBalancers[0], b, in.LoadBalancers[2], in.LoadBalancers[3]}
	check("port added", in)

	// Its hub Service's target port changes: the hint follows.
	svc := in.Services["envoy-b"].DeepCopy()
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(20090)
	svc.ResourceVersion = "8"
	in.Services = maps.Clone(in.Services)
	in.Services["envoy-b"] = svc
	check("hint changed", in)

	// The ListenerSet's listener moves: the Gateway's ports follow, though the Gateway's
	// own resourceVersion did not change.
	ls := listenerSet("ls", 1, "gw", 8081)
	ls.ResourceVersion = "2"
	in.Routes = slices.Clone(in.Routes)
	in.Routes[1] = ls
	check("ListenerSet changed", in)
	if h, _ := pl.Plan(in).Holder(Gateway, "gw"); !slices.ContainsFunc(h.Requests, func(r portalloc.Request) bool { return r.Key.Port == "8081" }) {
		t.Errorf("the Gateway's requests miss the ListenerSet's new port: %+v", h.Requests)
	}

	// Settings: load balancing off, then the limits raised.
	in.Tenant.DisableLoadBalancer = true
	check("load balancing disabled", in)
	in.Tenant.DisableLoadBalancer = false
	in.Tenant.Limits.LoadBalancers = 10
	check("limits raised", in)

	// Objects go.
	in.LoadBalancers = in.LoadBalancers[:1]
	in.Routes = in.Routes[:2]
	check("objects gone", in)
}

// planView is a plan as a test compares it: the verdict as its refusals' messages.
type planView struct {
	Refused map[string]string
	Used    [3]int64
	Outcome outcome
}

func view(p Plan) planView {
	v := planView{Refused: map[string]string{}, Used: [3]int64{int64(p.Verdict.UsedPorts), int64(p.Verdict.UsedNodePorts), p.Verdict.UsedBytes},
		Outcome: outcome{Holders: p.Holders, Hostnames: p.Hostnames, Release: p.Release}}
	for _, k := range []quota.Kind{quota.KindLoadBalancer, quota.KindRoute} {
		for _, name := range p.Verdict.RefusedNames(k) {
			v.Refused[string(k)+"/"+name], _ = p.Verdict.Refused(k, name)
		}
	}
	return v
}

// TestLoadBalancerRequestsHints: a named port is hinted by the hub Service's port of its name
// (its number since changed), an unnamed one by the port of its number; the LoadBalancer's
// status, which the tenant can write, never is.
func TestLoadBalancerRequestsHints(t *testing.T) {
	t.Parallel()
	l := lb("web", 0)
	l.Spec.Ports = []kubelbv1alpha1.LoadBalancerPort{{Name: "http", Port: 8080}, {Port: 443}}
	l.Status.Service.Ports = []kubelbv1alpha1.ServicePort{
		{ServicePort: corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}, UpstreamTargetPort: 10005},
	}
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "http", Port: 80, TargetPort: intstr.FromInt32(10007)},
		{Name: "tcp-443", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(10009)},
	}}}
	ports, _ := quota.LoadBalancerPorts(l)
	reqs := LoadBalancerRequests(ports, svc)
	if diff := cmp.Diff([]int32{10007}, reqs[0].Hints); diff != "" {
		t.Errorf("hints of http: %s", diff)
	}
	if diff := cmp.Diff([]int32{10009}, reqs[1].Hints); diff != "" {
		t.Errorf("hints of 443: %s", diff)
	}
}

// TestPlanKeepsClientAddresses: the tenant's Ingress Service keeps the clients' addresses
// (externalTrafficPolicy Local) while a LoadBalancer served on its hostname has source ranges
// or an Ingress has an ingress-nginx allow list; not for a refused or hostless one, nor an
// Ingress without a list. Its Gateway Services keep them while a Route carries a
// SecurityPolicy.
func TestPlanKeepsClientAddresses(t *testing.T) {
	t.Parallel()
	wildcard := func(t *settings.Tenant) { t.DNS = translate.DNS{WildcardDomain: "lb.example.com"} }
	restricted := func(l *kubelbv1alpha1.LoadBalancer) *kubelbv1alpha1.LoadBalancer {
		l.Spec.SourceRanges = []string{"192.0.2.0/24"}
		return l
	}
	allowlisted := func(rt *kubelbv1alpha1.Route, key string) *kubelbv1alpha1.Route {
		rt.Spec.Source.Kubernetes.Route.SetAnnotations(map[string]string{translate.NginxAnnotationPrefix + key: "192.0.2.0/24"})
		return rt
	}
	oneLB := func(t *settings.Tenant) { t.Limits.LoadBalancers = 1 }
	for _, tc := range []struct {
		name string
		in   Input
		want bool
	}{
		{"a hostname with source ranges", Input{Tenant: tenant(wildcard), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("open", 0, 80), restricted(lb("office", 1, 80))}}, true},
		{"hostnames without source ranges", Input{Tenant: tenant(wildcard), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("open", 0, 80)}}, false},
		{"source ranges without a hostname", Input{Tenant: tenant(), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{restricted(lb("office", 0, 80))},
			Routes: []*kubelbv1alpha1.Route{ingress("shop", 1)}}, false},
		{"the restricted LoadBalancer refused", Input{Tenant: tenant(wildcard, oneLB), LoadBalancers: []*kubelbv1alpha1.LoadBalancer{lb("open", 0, 80), restricted(lb("office", 1, 80))}}, false},
		{"an Ingress with an allow list", Input{Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{ingress("a", 0), allowlisted(ingress("b", 1), "allowlist-source-range")}}, true},
		{"an Ingress with the older whitelist", Input{Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{allowlisted(ingress("b", 1), "whitelist-source-range")}}, true},
		{"Ingresses without a list", Input{Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{ingress("a", 0)}}, false},
	} {
		tc.in.Namespace = ns
		if got := Make(tc.in).KeepClientAddresses; got != tc.want {
			t.Errorf("%s: KeepClientAddresses %v, want %v", tc.name, got, tc.want)
		}
	}
	// A SecurityPolicy carried by any admitted Route: the Gateways' Services keep them.
	secured := gateway("gw", 0, 80)
	secured.Spec.Source.Kubernetes.Context = &kubelbv1alpha1.SourceContext{Security: &kubelbv1alpha1.Security{Name: "office-only", Namespace: "shop",
		Authorization: &kubelbv1alpha1.SecurityAuthorization{DefaultAction: "Deny"}}}
	if !Make(Input{Namespace: ns, Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{gateway("other", 1, 81), secured}}).GatewaysKeepClientAddresses {
		t.Error("a Route with a SecurityPolicy's authorization: GatewaysKeepClientAddresses false")
	}
	// Basic authentication alone does not decide by client address.
	secured.Spec.Source.Kubernetes.Context = &kubelbv1alpha1.SourceContext{Security: &kubelbv1alpha1.Security{Name: "users", Namespace: "shop",
		BasicAuth: &kubelbv1alpha1.SecurityBasicAuth{}}}
	if Make(Input{Namespace: ns, Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{gateway("other", 1, 81), secured}}).GatewaysKeepClientAddresses {
		t.Error("a Route with basic authentication only: GatewaysKeepClientAddresses true")
	}
	// A rate limit per client address does.
	secured.Spec.Source.Kubernetes.Context = &kubelbv1alpha1.SourceContext{BackendTraffic: &kubelbv1alpha1.BackendTraffic{RateLimit: &kubelbv1alpha1.TrafficRateLimit{
		Local: &kubelbv1alpha1.TrafficLocalRateLimit{Rules: []kubelbv1alpha1.TrafficRateLimitRule{{ClientSelectors: []kubelbv1alpha1.TrafficRateLimitSelector{
			{SourceCIDR: &kubelbv1alpha1.TrafficRateLimitSourceCIDR{Type: "Distinct", Value: "0.0.0.0/0"}}}}}}}}}
	if !Make(Input{Namespace: ns, Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{gateway("other", 1, 81), secured}}).GatewaysKeepClientAddresses {
		t.Error("a Route with a rate limit per client address: GatewaysKeepClientAddresses false")
	}
	if Make(Input{Namespace: ns, Tenant: tenant(), Routes: []*kubelbv1alpha1.Route{gateway("other", 1, 81)}}).GatewaysKeepClientAddresses {
		t.Error("no SecurityPolicy: GatewaysKeepClientAddresses true")
	}
	ports := []Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, Target: 20000}}
	for keep, want := range map[bool]corev1.ServiceExternalTrafficPolicy{true: corev1.ServiceExternalTrafficPolicyLocal, false: corev1.ServiceExternalTrafficPolicyCluster} {
		if got := ptr.Deref(IngressService(ns, tenant(), ports, nil, keep, nil).Spec.ExternalTrafficPolicy, ""); got != want {
			t.Errorf("keepClients %v: Ingress Service externalTrafficPolicy %q, want %q", keep, got, want)
		}
		if got := ptr.Deref(GatewayService(secured, tenant(), ports, nil, netip.Addr{}, keep).Spec.ExternalTrafficPolicy, ""); got != want {
			t.Errorf("keepClients %v: Gateway Service externalTrafficPolicy %q, want %q", keep, got, want)
		}
	}
}

// TestPlanHTTP3: a Gateway whose ClientTrafficPolicy asks for http3 asks for a UDP listener
// port of its HTTPS port's number too, and its hub Service carries both ports (TCP and UDP
// 443, each to its own Envoy port), so that the hub's load balancer forwards QUIC; without
// http3, or when the tenant's bounds refuse ClientTrafficPolicies, only TCP.
func TestPlanHTTP3(t *testing.T) {
	t.Parallel()
	h3 := func(clientTraffic *kubelbv1alpha1.ClientTraffic) *kubelbv1alpha1.Route {
		rt := embedded(&kubelbv1alpha1.Route{ObjectMeta: meta("gw", 0)}, map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
			"metadata": map[string]any{"name": "edge", "namespace": "shop"},
			"spec": map[string]any{"gatewayClassName": "kubelb", "listeners": []any{
				map[string]any{"name": "https", "port": int64(443), "protocol": "HTTPS"},
				map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"},
			}},
		})
		rt.Spec.Source.Kubernetes.Context = &kubelbv1alpha1.SourceContext{ClientTraffic: clientTraffic}
		return rt
	}
	key := func(proto corev1.Protocol, port int32) portalloc.Request {
		return req(portalloc.RouteKey(ns, "gw", proto, port))
	}
	none := []kubelbv1alpha1.TrafficPolicyFeature{}
	for _, tc := range []struct {
		name   string
		rt     *kubelbv1alpha1.Route
		tenant settings.Tenant
		want   []portalloc.Request
	}{
		{"http3", h3(&kubelbv1alpha1.ClientTraffic{HTTP3: &kubelbv1alpha1.ClientTrafficHTTP3{}}), tenant(),
			[]portalloc.Request{key(corev1.ProtocolTCP, 80), key(corev1.ProtocolTCP, 443), key(corev1.ProtocolUDP, 443)}},
		{"no http3", h3(&kubelbv1alpha1.ClientTraffic{}), tenant(), []portalloc.Request{key(corev1.ProtocolTCP, 80), key(corev1.ProtocolTCP, 443)}},
		{"ClientTrafficPolicies refused", h3(&kubelbv1alpha1.ClientTraffic{HTTP3: &kubelbv1alpha1.ClientTrafficHTTP3{}}),
			tenant(func(t *settings.Tenant) { t.Upstream.TrafficPolicies = &trafficpolicy.Bounds{Features: none} }),
			[]portalloc.Request{key(corev1.ProtocolTCP, 80), key(corev1.ProtocolTCP, 443)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := Make(Input{Namespace: ns, Tenant: tc.tenant, Routes: []*kubelbv1alpha1.Route{tc.rt}})
			h, ok := p.Holder(Gateway, "gw")
			if !ok {
				t.Fatalf("no holder for the Gateway: %+v", p.Holders)
			}
			if diff := cmp.Diff(tc.want, h.Requests, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			alloc := map[portalloc.Key]int32{}
			for i, r := range h.Requests {
				alloc[r.Key] = 20000 + int32(i)
			}
			ports := AllocatedGatewayPorts(tc.rt, h.GatewayPorts, alloc)
			svc := GatewayService(tc.rt, tc.tenant, ports, nil, netip.Addr{}, false)
			var got []string
			for _, sp := range svc.Spec.Ports {
				got = append(got, fmt.Sprintf("%s %s/%d->%s", *sp.Name, *sp.Protocol, *sp.Port, sp.TargetPort.String()))
			}
			var want []string
			for i, r := range tc.want {
				want = append(want, fmt.Sprintf("%s %s/%s->%d", strings.ToLower(string(r.Key.Protocol))+"-"+r.Key.Port, r.Key.Protocol, r.Key.Port, 20000+i))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("hub Service ports (-want +got):\n%s", diff)
			}
		})
	}
}
