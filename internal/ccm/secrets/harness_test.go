package secrets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// tenantNS is the tenant's namespace on the hub in these tests.
const tenantNS = "tenant-probe"

// wait is the deadline of every Eventually here: generous for a loaded machine.
const wait = 30 * time.Second

// env is a hub and a tenant API server with the tenant's namespace on the hub.
type env struct {
	*testenv.Pair
	ctx context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{Pair: testenv.StartPair(t), ctx: t.Context()}
	objects.Create(t, e.Hub.Client, objects.ManagedNamespace(tenantNS))
	return e
}

func (e *env) create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	objects.Create(t, c, obj)
}

// startSync runs the Secret synchronizer in-process as the ccm does: a manager on the tenant
// and a hub cluster whose cache covers only the tenant's namespace. The returned function
// stops it (also done at the end of the test).
func (e *env) startSync(t *testing.T, o Options) (stop func()) {
	t.Helper()
	o.Namespace = tenantNS
	log := testr.NewWithOptions(t, testr.Options{LogTimestamp: true})
	mgr, err := ctrl.NewManager(e.Tenant.Config, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Logger:                 log.WithName("tenant"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	hub, err := cluster.New(e.Hub.Config, func(co *cluster.Options) {
		co.Scheme = testenv.Scheme()
		co.Logger = log.WithName("hub")
		co.Cache.DefaultNamespaces = map[string]cache.Config{tenantNS: {}}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(hub); err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr, hub, hub.GetClient(), o); err != nil {
		t.Fatal(err)
	}
	return testenv.RunManager(t, mgr, "synchronizer", wait)
}

// namespace makes a namespace on the tenant.
func (e *env) namespace(t *testing.T, name string) {
	t.Helper()
	objects.Create(t, e.Tenant.Client, objects.Namespace(name, nil))
}

// tlsSecret makes a kubernetes.io/tls Secret with a fresh self-signed certificate.
func (e *env) tlsSecret(t *testing.T, ns, name string, labels map[string]string) *corev1.Secret {
	t.Helper()
	crt, key := testsupport.SelfSignedPEM(t, name+".example.com")
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
	e.create(t, e.Tenant.Client, s)
	return s
}

// syncSecretOf waits for the SyncSecret of a Secret and returns it once check accepts it.
func (e *env) syncSecretOf(t *testing.T, s *corev1.Secret, check func(*v1alpha1.SyncSecret) error) *v1alpha1.SyncSecret {
	t.Helper()
	return objects.WaitFor(t, e.Hub.Client, wait, mirrorKey(s), &v1alpha1.SyncSecret{}, check)
}

// noSyncSecret fails unless the hub has no SyncSecret for a Secret.
func (e *env) noSyncSecret(t *testing.T, s *corev1.Secret) {
	t.Helper()
	objects.Absent(t, e.Hub.Client, mirrorKey(s), &v1alpha1.SyncSecret{})
}

// waitSyncSecretGone waits until the SyncSecret of a Secret is gone.
func (e *env) waitSyncSecretGone(t *testing.T, s *corev1.Secret) {
	t.Helper()
	key := mirrorKey(s)
	objects.WaitGone(t, e.Hub.Client, wait, &v1alpha1.SyncSecret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
}

// mirrorKey is the key of the hub SyncSecret of a tenant Secret.
func mirrorKey(s *corev1.Secret) client.ObjectKey {
	return client.ObjectKey{Namespace: tenantNS, Name: string(s.UID)}
}

// secret reads a tenant Secret (nil when it is gone).
func (e *env) secret(t *testing.T, s *corev1.Secret) *corev1.Secret {
	t.Helper()
	cur := &corev1.Secret{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(s), cur); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return cur
}

// waitFinalizer waits until the tenant Secret has (want) or lacks the cleanup finalizer.
func (e *env) waitFinalizer(t *testing.T, s *corev1.Secret, want bool) {
	t.Helper()
	testsupport.Eventually(t, wait, fmt.Sprintf("finalizer on Secret %s: %v", s.Name, want), func() error {
		cur := e.secret(t, s)
		if cur == nil {
			return errors.New("Secret is gone")
		}
		if got := slices.Contains(cur.Finalizers, v1alpha1.CleanupFinalizer); got != want {
			return fmt.Errorf("finalizers %v", cur.Finalizers)
		}
		return nil
	})
}

// waitEvent waits for an Event about a Secret with a reason and type.
func (e *env) waitEvent(t *testing.T, s *corev1.Secret, eventType, reason string) eventsv1.Event {
	t.Helper()
	return objects.WaitEvent(t, e.Tenant.Client, wait, objects.EventFilter{
		Namespace: s.Namespace, Kind: "Secret", Name: s.Name, UID: string(s.UID), Reason: reason, Type: eventType})
}

// settle waits until the synchronizer has nothing queued or running: what it would do about
// the objects made so far is done.
func settle(t *testing.T) {
	t.Helper()
	testenv.WaitControllerIdle(t, ControllerName, 1)
}
