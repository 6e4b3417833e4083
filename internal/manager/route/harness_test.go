package route

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
	"kubelb.dev/kubelb/internal/manager/perobject"
	statuspkg "kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

const waitTimeout = 30 * time.Second

// running is a manager with the Route and LoadBalancer controllers, sharing one port
// allocator as in cmd/kubelb, running in-process against a test API server.
type running struct {
	ports  *portalloc.Shared
	sink   *statuspkg.Sink // the one status writer, shared as in cmd/kubelb
	writes *objects.WriteCounter
	stop   func()
}

// startManager runs the Route and LoadBalancer controllers in a manager of their own (no
// leader election, no metrics server) until stop or the end of the test. Set
// KUBELB_TEST_LOG=1 for its logs.
func startManager(t testing.TB, hub *testenv.Cluster, r portalloc.Range) *running {
	t.Helper()
	return startManagerWith(t, hub, r, Options{})
}

// startManagerWith is startManager with the Route controller's options opts (its Namespace and
// Shared are set here).
func startManagerWith(t testing.TB, hub *testenv.Cluster, r portalloc.Range, opts Options) *running {
	t.Helper()
	m := &running{writes: &objects.WriteCounter{}}
	cfg := rest.CopyConfig(hub.Config)
	cfg.QPS, cfg.Burst = 200, 400
	cfg.Wrap(m.writes.RoundTripper)
	mgr := testenv.NewManager(t, cfg, func(o *ctrl.Options) {
		if os.Getenv("KUBELB_TEST_LOG") != "" {
			o.Logger = testr.NewWithInterface(t, testr.Options{Verbosity: 1})
		}
	})
	m.ports = loadbalancer.NewSharedPorts(mgr, r)
	m.sink = statuspkg.NewSink(mgr.GetClient())
	shared, err := perobject.Shared{Ports: m.ports, Sink: m.sink, StaticAddressRetry: opts.Shared.StaticAddressRetry}.WithDefaults(mgr, managerNS, 0) // one of each, for both controllers
	if err != nil {
		t.Fatal(err)
	}
	if err := loadbalancer.SetupWithManager(mgr, loadbalancer.Options{Namespace: managerNS, Shared: shared}); err != nil {
		t.Fatal(err)
	}
	opts.Namespace, opts.Shared = managerNS, shared
	if err := SetupWithManager(mgr, opts); err != nil {
		t.Fatal(err)
	}
	// Longer than the manager's own grace period (30 s), so a runnable that does not end
	// shows as the manager's error.
	m.stop = testenv.RunManager(t, mgr, "manager", 45*time.Second)
	return m
}

// ---- fixtures ----

const managerNS = "kubelb-system"

func createNamespace(t testing.TB, c client.Client, name string) {
	t.Helper()
	objects.Create(t, c, objects.ManagedNamespace(name))
}

// ceRoutes reads the Routes a KubeLB CE ccm wrote (testdata/hub-routes.yaml, a copy of
// /work/shared/fixtures/kubelb-ce) into namespace ns, by origin kind ("Gateway", "Ingress",
// "HTTPRoute", "GRPCRoute"), as a ccm would create them (no status, uid, generation).
func ceRoutes(t testing.TB, ns string) map[string]*kubelbv1alpha1.Route {
	t.Helper()
	f, err := os.Open("testdata/hub-routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	out := map[string]*kubelbv1alpha1.Route{}
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		delete(u.Object, "status")
		rt := &kubelbv1alpha1.Route{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rt); err != nil {
			t.Fatal(err)
		}
		rt.Namespace, rt.UID, rt.ResourceVersion, rt.Generation = ns, "", "", 0
		out[rt.Spec.Source.Kubernetes.Route.GetKind()] = rt
	}
	return out
}

// gatewayRoute is a Route of a Gateway with the given listeners ({name, port, protocol}).
func gatewayRoute(ns, name string, listeners ...map[string]any) *kubelbv1alpha1.Route {
	ls := make([]any, 0, len(listeners))
	for _, l := range listeners {
		ls = append(ls, l)
	}
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	rt.Spec.Endpoints = []kubelbv1alpha1.LoadBalancerEndpoints{{Name: "default", AddressesReference: &corev1.ObjectReference{Name: "default"}}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw-" + name, "namespace": "shop"},
		"spec":     map[string]any{"gatewayClassName": "kubelb", "listeners": ls},
	}}}
	return rt
}

// ingressRoute is a Route of an Ingress.
func ingressRoute(ns, name string) *kubelbv1alpha1.Route {
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	rt.Spec.Endpoints = []kubelbv1alpha1.LoadBalancerEndpoints{{Name: "default", AddressesReference: &corev1.ObjectReference{Name: "default"}}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"name": "ing-" + name, "namespace": "shop"},
		"spec": map[string]any{"ingressClassName": "kubelb", "rules": []any{map[string]any{
			"host": name + ".example.com",
			"http": map[string]any{"paths": []any{map[string]any{"path": "/", "pathType": "Prefix",
				"backend": map[string]any{"service": map[string]any{"name": "web", "port": map[string]any{"number": int64(80)}}}}}},
		}}},
	}}}
	return rt
}

func listener(name string, port int64, protocol string) map[string]any {
	return map[string]any{"name": name, "port": port, "protocol": protocol}
}

func getRoute(t testing.TB, c client.Client, ns, name string) *kubelbv1alpha1.Route {
	t.Helper()
	return objects.Get(t, c, client.ObjectKey{Namespace: ns, Name: name}, &kubelbv1alpha1.Route{})
}

// waitCondition waits until the Route's ResourceAppliedSuccessfully condition has the given
// status and reason for the Route's generation.
func waitCondition(t testing.TB, c client.Client, ns, name string, status metav1.ConditionStatus, reason string) *kubelbv1alpha1.Route {
	t.Helper()
	return objects.WaitFor(t, c, waitTimeout, client.ObjectKey{Namespace: ns, Name: name}, &kubelbv1alpha1.Route{}, func(rt *kubelbv1alpha1.Route) error {
		cond := meta.FindStatusCondition(rt.Status.Resources.Route.Conditions, ConditionApplied)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("want %s=%s %s, condition %+v", ConditionApplied, status, reason, cond)
		}
		if cond.ObservedGeneration != rt.Generation {
			return fmt.Errorf("condition of generation %d, object at %d", cond.ObservedGeneration, rt.Generation)
		}
		return nil
	})
}

// waitService waits for a hub Service and checks it with cond.
func waitService(t testing.TB, c client.Client, ns, name string, cond func(*corev1.Service) error) *corev1.Service {
	t.Helper()
	return objects.WaitFor(t, c, waitTimeout, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{}, cond)
}

// waitGone waits until an object no longer exists.
func waitGone(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	objects.WaitGone(t, c, waitTimeout, obj)
}

// targets returns a Service's ports as "name proto port->target".
func targets(svc *corev1.Service) []string {
	var out []string
	for _, p := range svc.Spec.Ports {
		out = append(out, fmt.Sprintf("%s %s %d->%d", p.Name, p.Protocol, p.Port, p.TargetPort.IntVal))
	}
	return out
}

// routeWarning selects the Warning Events of a reason about Route ns/name.
func routeWarning(ns, name, reason string) objects.EventFilter {
	return objects.EventFilter{Namespace: ns, Kind: "Route", Name: name, Reason: reason, Type: corev1.EventTypeWarning}
}

func countEvents(t testing.TB, c client.Client, ns, name, reason string) int {
	t.Helper()
	return objects.CountEvents(t, c, routeWarning(ns, name, reason))
}

func waitEvent(t testing.TB, c client.Client, ns, name, reason string) {
	t.Helper()
	objects.WaitEvent(t, c, waitTimeout, routeWarning(ns, name, reason))
}

// deleteRoutes deletes every Route of a namespace and waits until they and the hub Services
// of Routes are gone.
func deleteRoutes(t testing.TB, c client.Client, ns string) {
	t.Helper()
	objects.DeleteAllOf(t, c, waitTimeout, ns, &kubelbv1alpha1.Route{}, &kubelbv1alpha1.RouteList{}, hubnames.LooksLikeRouteService)
}
