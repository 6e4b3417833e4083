package loadbalancer

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// running is a controller running in-process against a test API server.
type running struct {
	writes *objects.WriteCounter
	r      *Reconciler
	stop   func()

	mu         sync.Mutex
	reconciles map[types.NamespacedName]int
	errors     map[string]int // reconcile errors by message prefix
	busy       time.Duration  // summed reconcile time
}

// Errors summarises the reconcile errors seen so far.
func (m *running) Errors() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.errors)
}

// Reconciles is the number of reconciles of one LoadBalancer that finished.
func (m *running) Reconciles(ns, name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reconciles[types.NamespacedName{Namespace: ns, Name: name}]
}

// startController runs the controller in a manager of its own (no leader election, no
// metrics server) until stop or the end of the test. An unset AddressWait is 500 ms. Set KUBELB_TEST_LOG=1 for its logs.
func startController(t testing.TB, hub *testenv.Cluster, opts Options, qps float32, burst int) *running {
	t.Helper()
	if opts.AddressWait == 0 {
		// Most tests play no hub load balancer, or play it late: the first status write
		// waits for the address only briefly.
		opts.AddressWait = 500 * time.Millisecond
	}
	m := &running{writes: &objects.WriteCounter{ByResource: true}, reconciles: map[types.NamespacedName]int{}, errors: map[string]int{}}
	cfg := rest.CopyConfig(hub.Config)
	cfg.QPS, cfg.Burst = qps, burst
	cfg.Wrap(m.writes.RoundTripper)
	mgr := testenv.NewManager(t, cfg, func(o *ctrl.Options) {
		if os.Getenv("KUBELB_TEST_LOG") != "" {
			o.Logger = testr.NewWithInterface(t, testr.Options{Verbosity: 1})
		}
	})
	var err error
	m.r, err = setup(mgr, opts, func(inner reconcile.Reconciler) reconcile.Reconciler {
		return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			start := time.Now()
			res, err := inner.Reconcile(ctx, req)
			m.mu.Lock()
			m.busy += time.Since(start)
			m.reconciles[req.NamespacedName]++
			if err != nil {
				msg := err.Error()
				msg = strings.ReplaceAll(msg, req.Namespace+"/"+req.Name, "<lb>")
				if len(msg) > 120 {
					msg = msg[:120]
				}
				m.errors[msg]++
			}
			m.mu.Unlock()
			return res, err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	// Longer than the manager's own grace period (30 s), so a runnable that does not end
	// shows as the manager's error.
	m.stop = testenv.RunManager(t, mgr, "manager", 45*time.Second)
	return m
}

// ---- fixtures ----

const waitTimeout = 30 * time.Second

func newLB(ns, name string, ports ...kubelbv1alpha1.LoadBalancerPort) *kubelbv1alpha1.LoadBalancer {
	eps := make([]kubelbv1alpha1.EndpointPort, 0, len(ports))
	for i, p := range ports {
		eps = append(eps, kubelbv1alpha1.EndpointPort{Name: p.Name, Port: int32(30000 + i), Protocol: p.Protocol})
	}
	return &kubelbv1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{
				AddressesReference: &corev1.ObjectReference{Name: kubelbv1alpha1.DefaultAddressesName},
				Ports:              eps,
			}},
			Ports: ports,
			Type:  corev1.ServiceTypeLoadBalancer, // what the ccm writes
		},
	}
}

func tcp(port int32) kubelbv1alpha1.LoadBalancerPort {
	return kubelbv1alpha1.LoadBalancerPort{Protocol: corev1.ProtocolTCP, Port: port}
}

func getLB(t testing.TB, c client.Client, ns, name string) *kubelbv1alpha1.LoadBalancer {
	t.Helper()
	return objects.Get(t, c, client.ObjectKey{Namespace: ns, Name: name}, &kubelbv1alpha1.LoadBalancer{})
}

// upstreamPorts returns the allocated listener ports of a LoadBalancer, in status order.
func upstreamPorts(lb *kubelbv1alpha1.LoadBalancer) []int32 {
	var out []int32
	for _, p := range lb.Status.Service.Ports {
		out = append(out, p.UpstreamTargetPort)
	}
	return out
}

// waitPorts waits until the LoadBalancer's status records n allocated ports.
func waitPorts(t testing.TB, c client.Client, ns, name string, n int) *kubelbv1alpha1.LoadBalancer {
	t.Helper()
	return objects.WaitFor(t, c, waitTimeout, client.ObjectKey{Namespace: ns, Name: name}, &kubelbv1alpha1.LoadBalancer{}, func(lb *kubelbv1alpha1.LoadBalancer) error {
		if got := len(lb.Status.Service.Ports); got != n {
			return fmt.Errorf("%d ports, want %d: %+v", got, n, lb.Status)
		}
		return nil
	})
}

// waitReady waits until the Ready condition has the given status and reason.
func waitReady(t testing.TB, c client.Client, ns, name string, status metav1.ConditionStatus, reason string) *kubelbv1alpha1.LoadBalancer {
	t.Helper()
	return objects.WaitFor(t, c, waitTimeout, client.ObjectKey{Namespace: ns, Name: name}, &kubelbv1alpha1.LoadBalancer{}, func(lb *kubelbv1alpha1.LoadBalancer) error {
		for _, cond := range lb.Status.Conditions {
			if cond.Type == ConditionReady && cond.Status == status && cond.Reason == reason {
				if cond.ObservedGeneration != lb.Generation {
					return fmt.Errorf("condition of generation %d, object at %d", cond.ObservedGeneration, lb.Generation)
				}
				return nil
			}
		}
		return fmt.Errorf("want Ready=%s %s, conditions %+v", status, reason, lb.Status.Conditions)
	})
}

// waitService waits for the hub Service of a LoadBalancer and checks it with cond (nil: none).
func waitService(t testing.TB, c client.Client, ns, lbName string, cond func(*corev1.Service) error) *corev1.Service {
	t.Helper()
	key := client.ObjectKey{Namespace: ns, Name: hubnames.LoadBalancerServiceName(lbName)}
	return objects.WaitFor(t, c, waitTimeout, key, &corev1.Service{}, cond)
}

// lbWarning selects the Warning Events of a reason about LoadBalancer ns/name.
func lbWarning(ns, name, reason string) objects.EventFilter {
	return objects.EventFilter{Namespace: ns, Kind: "LoadBalancer", Name: name, Reason: reason, Type: corev1.EventTypeWarning}
}

// playLoadBalancer plays the hub's own LoadBalancer implementation (MetalLB in production):
// it writes an address into the status of the LoadBalancer's hub Service, plus an annotation
// of its own.
func playLoadBalancer(t testing.TB, c client.Client, ns, lbName, ip string) {
	t.Helper()
	objects.PlayLoadBalancer(t, c, waitTimeout, client.ObjectKey{Namespace: ns, Name: hubnames.LoadBalancerServiceName(lbName)}, ip,
		map[string]string{"metallb.universe.tf/ip-allocated-from-pool": "test"})
}

// deleteAll deletes the LoadBalancers of a namespace and waits until they and their hub
// Services are gone.
func deleteAll(t testing.TB, c client.Client, ns string) {
	t.Helper()
	objects.DeleteAllOf(t, c, waitTimeout, ns, &kubelbv1alpha1.LoadBalancer{}, &kubelbv1alpha1.LoadBalancerList{}, func(s client.Object) bool {
		return s.GetLabels()[kubelbv1alpha1.LabelManagedBy] == kubelbv1alpha1.LabelManagedByValue
	})
}
