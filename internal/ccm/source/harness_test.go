package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// tenantNS is the tenant's namespace on the hub of the ccm every test shares.
const tenantNS = "tenant-a"

// timeout is the deadline of every Eventually: generous for a loaded machine, never a sleep.
const timeout = 30 * time.Second

// env is a hub and a tenant API server (the tenant with the standard Gateway API CRDs from
// internal/gatewaycrds), shared by the tests of this package, with one ccm running the
// Layer 7 controllers for tenant-a (--enable-gateway-api, default classes).
type env struct {
	*testenv.Pair
	ctx context.Context
}

var (
	sharedOnce sync.Once
	shared     *env
	sharedErr  error
)

// packageTB holds the shared env's clean-ups: it lives as long as the test binary (TestMain).
var packageTB *mainTB

// newEnv returns the package's shared env, starting it on first use.
func newEnv(t *testing.T) *env {
	t.Helper()
	sharedOnce.Do(func() {
		if packageTB == nil {
			sharedErr = errors.New("no package test harness (TestMain)")
			return
		}
		e := &env{Pair: testenv.StartPair(packageTB), ctx: context.Background()}
		if packageTB.Failed() {
			sharedErr = errors.New("starting the control planes failed: " + packageTB.String())
			return
		}
		if err := e.Hub.Client.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: tenantNS, Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}}); err != nil {
			sharedErr = err
			return
		}
		if err := e.startCCM(packageTB, Options{Namespace: tenantNS, EventSource: "kubelb-ccm", Ingress: true, UseIngressClass: true,
			GatewayAPI: true, UseGatewayClass: true, GatewayServices: true, MaxConcurrentReconciles: 2}); err != nil {
			sharedErr = err
			return
		}
		shared = e
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// startCCM runs the Layer 7 controllers in-process, as cmd/ccm does: a manager on the tenant
// and a hub cluster whose cache covers only the hub namespace o.Namespace. It runs until tb
// ends.
func (e *env) startCCM(tb testsupport.TB, o Options) error {
	return e.startCCMOn(tb, e.Tenant.Config, o, testr.NewWithInterface(loggerT{tb}, testr.Options{LogTimestamp: true, Verbosity: 0}))
}

// startCCMOn is startCCM against another tenant API server, logging to log.
func (e *env) startCCMOn(tb testsupport.TB, tenant *rest.Config, o Options, log logr.Logger) error {
	mgr, err := ctrl.NewManager(tenant, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Logger:                 log.WithName("tenant"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{ByObject: CacheByObject()},
	})
	if err != nil {
		return err
	}
	hub, err := cluster.New(e.Hub.Config, func(co *cluster.Options) {
		co.Scheme = testenv.Scheme()
		co.Logger = log.WithName("hub")
		co.Cache.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(hub); err != nil {
		return err
	}
	if err := Setup(mgr, hub, hub.GetClient(), o); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Logf("ccm stopped with error: %v", err)
			}
		case <-time.After(timeout):
			tb.Logf("ccm did not stop")
		}
	})
	return nil
}

// loggerT adapts a testsupport.TB to testr's interface.
type loggerT struct{ testsupport.TB }

func (l loggerT) Log(args ...any) { l.Logf("%s", fmt.Sprint(args...)) }

func (l loggerT) Error(args ...any) { l.Logf("ERROR %s", fmt.Sprint(args...)) }

// namespace makes a tenant namespace with labels.
func (e *env) namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	objects.Create(t, e.Tenant.Client, objects.Namespace(name, labels))
}

// create creates a tenant object.
func (e *env) create(t *testing.T, obj client.Object) {
	t.Helper()
	objects.Create(t, e.Tenant.Client, obj)
}

// clusterIP is a ClusterIP Service with one port (name port → target).
func clusterIP(ns, name string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP}}},
	}
}

// routeOf waits for the hub Route of a tenant object (by UID) until check accepts it.
func (e *env) routeOf(t *testing.T, hubNS string, uid types.UID, check func(*v1alpha1.Route) error) *v1alpha1.Route {
	t.Helper()
	return objects.WaitFor(t, e.Hub.Client, timeout, client.ObjectKey{Namespace: hubNS, Name: string(uid)}, &v1alpha1.Route{}, check)
}

// waitGone waits until a tenant or hub object is gone.
func (e *env) waitGone(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	objects.WaitGone(t, c, timeout, obj)
}

// reconciles is the number of finished reconciles of a kind in a namespace.
func reconciles(k Kind, ns string) float64 {
	return testutil.ToFloat64(k.Reconcile.Total.WithLabelValues(ns, metrics.ResultSuccess)) +
		testutil.ToFloat64(k.Reconcile.Total.WithLabelValues(ns, metrics.ResultError))
}

// waitReconciles waits until the controller of k finished more reconciles in ns than before:
// proof that the ccm looked at what the test changed.
func waitReconciles(t *testing.T, k Kind, ns string, before float64) {
	t.Helper()
	testsupport.Eventually(t, timeout, "a reconcile of "+k.Name+" in "+ns, func() error {
		if reconciles(k, ns) <= before {
			return errors.New("none yet")
		}
		return nil
	})
}

// noRoute fails when the hub has a Route for uid.
func (e *env) noRoute(t *testing.T, hubNS string, uid types.UID) {
	t.Helper()
	objects.Absent(t, e.Hub.Client, client.ObjectKey{Namespace: hubNS, Name: string(uid)}, &v1alpha1.Route{})
}
