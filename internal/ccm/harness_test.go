package ccm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// tenantNS is the tenant's namespace on the hub in these tests.
const tenantNS = "tenant-a"

// wait is the deadline of every Eventually in these tests: generous for a loaded 2-core
// machine, never a sleep.
const wait = 30 * time.Second

// env is a hub and a tenant API server with the tenant's namespace on the hub.
type env struct {
	*testenv.Pair
	ctx context.Context
	// recorded counts the Events the running ccm emitted.
	recorded *eventCounter
	// hubView is the running ccm's view of the hub (its cache).
	hubView client.Reader
}

// eventCounter counts Events per reason and object UID, then passes them on.
type eventCounter struct {
	recorder.EventRecorder
	mu     sync.Mutex
	counts map[string]int
}

// Eventf counts and records an Event.
func (c *eventCounter) Eventf(regarding, related runtime.Object, eventType, reason, action, note string, args ...any) {
	if o, ok := regarding.(client.Object); ok {
		c.mu.Lock()
		c.counts[reason+"/"+string(o.GetUID())]++
		c.mu.Unlock()
	}
	c.EventRecorder.Eventf(regarding, related, eventType, reason, action, note, args...)
}

// count is how many Events with reason the ccm emitted about obj.
func (c *eventCounter) count(reason string, obj client.Object) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[reason+"/"+string(obj.GetUID())]
}

// countingManager is a manager whose Event recorder counts what is recorded.
type countingManager struct {
	ctrl.Manager
	rec *eventCounter
}

// GetEventRecorder returns the counting recorder.
func (m countingManager) GetEventRecorder(string) recorder.EventRecorder { return m.rec }

// newEnv starts a hub and a tenant control plane and makes the tenant's hub namespace.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, testenv.PairOptions{})
}

// newEnvWith is newEnv with options for the control planes (e.g. dual-stack).
func newEnvWith(t *testing.T, o testenv.PairOptions) *env {
	t.Helper()
	e := &env{Pair: testenv.StartPairWith(t, o), ctx: t.Context()}
	objects.Create(t, e.Hub.Client, objects.ManagedNamespace(tenantNS))
	e.playManagerFinalizer(t)
	return e
}

// playManagerFinalizer plays the manager's part in deleting a LoadBalancer: the ccm creates
// mirrors with the manager's cleanup finalizer, which the manager removes once it has cleaned
// up. It polls until the test ends.
func (e *env) playManagerFinalizer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var lbs v1alpha1.LoadBalancerList
			if err := e.Hub.Client.List(ctx, &lbs); err == nil {
				for i := range lbs.Items {
					lb := &lbs.Items[i]
					if lb.DeletionTimestamp != nil && controllerutil.RemoveFinalizer(lb, v1alpha1.CleanupFinalizer) {
						_ = e.Hub.Client.Update(ctx, lb)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// ccmOpts tune one in-process ccm.
type ccmOpts struct {
	Options
	// hubConfig overrides the hub credentials (default: admin).
	hubConfig *rest.Config
	// syncPeriod forces resyncs of both caches (default: controller-runtime's).
	syncPeriod time.Duration
	// external runs the ccm with EnableCloudProvider off (another load balancer
	// implementation serves the Services).
	external bool
	// l7 runs the Layer 7 controllers too (Ingresses and the Gateway API, default classes).
	l7 bool
}

// startCCM runs the ccm's controllers in-process against the pair, as cmd/ccm does: a manager
// on the tenant and a hub cluster whose cache covers only the tenant's namespace. The
// returned function stops it (also done at the end of the test).
func (e *env) startCCM(t *testing.T, o ccmOpts) (stop func()) {
	t.Helper()
	if o.ClusterName == "" {
		o.ClusterName = tenantNS
	}
	o.EnableCloudProvider = !o.external
	// Most are the layer-4 tests; the Layer 7 controllers are tested in package source.
	o.DisableIngressController = !o.l7
	o.EnableGatewayAPI = o.EnableGatewayAPI || o.l7
	if o.NodeAddressType == "" {
		o.NodeAddressType = NodeAddressExternalIP
	}
	hubCfg := e.Hub.Config
	if o.hubConfig != nil {
		hubCfg = o.hubConfig
	}
	var sync *time.Duration
	if o.syncPeriod > 0 {
		sync = &o.syncPeriod
	}
	log := testr.NewWithOptions(t, testr.Options{LogTimestamp: true})
	mgr := testenv.NewManager(t, e.Tenant.Config, func(mo *ctrl.Options) {
		mo.Logger, mo.Cache = log.WithName("tenant"), cache.Options{SyncPeriod: sync}
	})
	hub, err := cluster.New(hubCfg, func(co *cluster.Options) {
		co.Scheme = testenv.Scheme()
		co.Logger = log.WithName("hub")
		co.Cache.DefaultNamespaces = map[string]cache.Config{tenantNS: {}}
		co.Cache.SyncPeriod = sync
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(hub); err != nil {
		t.Fatal(err)
	}
	e.hubView = hub.GetClient()
	e.recorded = &eventCounter{EventRecorder: mgr.GetEventRecorder(EventSource), counts: map[string]int{}}
	if err := Setup(countingManager{Manager: mgr, rec: e.recorded}, hub, o.Options); err != nil {
		t.Fatal(err)
	}
	return testenv.RunManager(t, mgr, "ccm", wait)
}

// lbService is a LoadBalancer Service with one TCP port "http" (80 → 8080).
func lbService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// newMirroredService starts an env and a ccm, creates the LoadBalancer Service shop/web on
// the tenant, and waits for its mirror on the hub.
func newMirroredService(t *testing.T) (*env, *corev1.Service, *v1alpha1.LoadBalancer) {
	t.Helper()
	e := newEnv(t)
	e.namespace(t, "shop")
	e.startCCM(t, ccmOpts{})
	svc := lbService("shop", "web")
	objects.Create(t, e.Tenant.Client, svc)
	return e, svc, e.mirrorOf(t, svc, nil)
}

// namespace makes a namespace on the tenant.
func (e *env) namespace(t *testing.T, name string) {
	t.Helper()
	objects.Create(t, e.Tenant.Client, objects.Namespace(name, nil))
}

// getService reads a tenant Service.
func (e *env) getService(t *testing.T, ns, name string) *corev1.Service {
	t.Helper()
	return objects.Get(t, e.Tenant.Client, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{})
}

// mirror is the hub LoadBalancer of a Service (by name: the Service's UID).
func mirror(svc *corev1.Service) *v1alpha1.LoadBalancer {
	return &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: string(svc.UID)}}
}

// mirrorOf waits for the hub LoadBalancer of a Service and returns it once check accepts it.
func (e *env) mirrorOf(t *testing.T, svc *corev1.Service, check func(*v1alpha1.LoadBalancer) error) *v1alpha1.LoadBalancer {
	t.Helper()
	lb := mirror(svc)
	return objects.WaitFor(t, e.Hub.Client, wait, client.ObjectKeyFromObject(lb), lb, check)
}

// noMirror fails unless the hub has no LoadBalancer for a Service.
func (e *env) noMirror(t *testing.T, svc *corev1.Service) {
	t.Helper()
	lb := mirror(svc)
	objects.Absent(t, e.Hub.Client, client.ObjectKeyFromObject(lb), lb)
}

// waitMirrorGone waits until the hub LoadBalancer of a Service is gone.
func (e *env) waitMirrorGone(t *testing.T, svc *corev1.Service) {
	t.Helper()
	objects.WaitGone(t, e.Hub.Client, wait, mirror(svc))
}

// waitReleased waits until the ccm released a tenant Service: no finalizer, no address.
func (e *env) waitReleased(t *testing.T, svc *corev1.Service) {
	t.Helper()
	objects.WaitFor(t, e.Tenant.Client, wait, client.ObjectKeyFromObject(svc), &corev1.Service{}, func(cur *corev1.Service) error {
		if hasFinalizer(cur) {
			return errors.New("finalizer still there")
		}
		if len(cur.Status.LoadBalancer.Ingress) != 0 {
			return fmt.Errorf("status still %v", cur.Status.LoadBalancer.Ingress)
		}
		return nil
	})
}

// serviceEvents selects the Events about a tenant Service with a reason and, when set, a type.
func serviceEvents(svc *corev1.Service, eventType, reason string) objects.EventFilter {
	return objects.EventFilter{Namespace: svc.Namespace, UID: string(svc.UID), Reason: reason, Type: eventType}
}

// events returns the Events about a tenant Service with a reason.
func (e *env) events(t *testing.T, svc *corev1.Service, reason string) []eventsv1.Event {
	t.Helper()
	return objects.ListEvents(t, e.Tenant.Client, serviceEvents(svc, "", reason))
}

// waitEvent waits for an Event about a Service with a reason and type.
func (e *env) waitEvent(t *testing.T, svc *corev1.Service, eventType, reason string) eventsv1.Event {
	t.Helper()
	return objects.WaitEvent(t, e.Tenant.Client, wait, serviceEvents(svc, eventType, reason))
}

// serviceReconciles is the number of finished reconciles of tenant Services in a namespace.
func serviceReconciles(ns string) float64 {
	return testutil.ToFloat64(metrics.CCMServiceReconcile.Total.WithLabelValues(ns, metrics.ResultSuccess)) +
		testutil.ToFloat64(metrics.CCMServiceReconcile.Total.WithLabelValues(ns, metrics.ResultError))
}

// waitReconciles waits until the mirror controller finished n more reconciles in ns than
// before: proof that the ccm looked at what the test changed.
func waitReconciles(t *testing.T, ns string, before float64, n int) {
	t.Helper()
	testsupport.Eventually(t, wait, fmt.Sprintf("%d reconciles of Services in %s", n, ns), func() error {
		if got := serviceReconciles(ns) - before; got < float64(n) {
			return fmt.Errorf("%v so far", got)
		}
		return nil
	})
}

// hubWrites is the number of write requests the ccm sent to the hub.
func hubWrites() float64 {
	var n float64
	for _, op := range []string{opCreate, opUpdate, opPatch, opDelete} {
		for _, res := range []string{metrics.ResultSuccess, metrics.ResultError} {
			n += testutil.ToFloat64(metrics.CCMOperations.WithLabelValues(op, res))
		}
	}
	return n
}

// controllerReconciles is controller-runtime's count of reconciles of a controller.
func controllerReconciles(t *testing.T, name string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// setLBStatus plays the manager: it writes ingress addresses into a hub LoadBalancer's status.
func (e *env) setLBStatus(t *testing.T, lb *v1alpha1.LoadBalancer, ips ...string) {
	t.Helper()
	objects.EditStatus(t, e.Hub.Client, wait, lb, func(cur *v1alpha1.LoadBalancer) { cur.Status.LoadBalancer.Ingress = objects.Ingress(ips...) })
}

// waitServiceIngress waits until a tenant Service shows exactly these ingress IPs.
func (e *env) waitServiceIngress(t *testing.T, svc *corev1.Service, ips ...string) *corev1.Service {
	t.Helper()
	return objects.WaitFor(t, e.Tenant.Client, wait, client.ObjectKeyFromObject(svc), &corev1.Service{}, func(cur *corev1.Service) error {
		if got := objects.IngressIPs(cur.Status.LoadBalancer.Ingress); !slices.Equal(got, ips) {
			return fmt.Errorf("ingress %v, want %v", got, ips)
		}
		return nil
	})
}

// hasFinalizer tells whether a Service carries the ccm's finalizer.
func hasFinalizer(svc *corev1.Service) bool {
	return controllerutil.ContainsFinalizer(svc, v1alpha1.CleanupFinalizer)
}
