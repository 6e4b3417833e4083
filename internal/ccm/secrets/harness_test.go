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
	e.create(t, e.Hub.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: tenantNS, Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}})
	return e
}

func (e *env) create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(e.ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
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
	e.create(t, e.Tenant.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
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
	ss := &v1alpha1.SyncSecret{}
	testsupport.Eventually(t, wait, "SyncSecret of Secret "+s.Namespace+"/"+s.Name, func() error {
		if err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Namespace: tenantNS, Name: string(s.UID)}, ss); err != nil {
			return err
		}
		if check != nil {
			return check(ss)
		}
		return nil
	})
	return ss
}

// noSyncSecret fails unless the hub has no SyncSecret for a Secret.
func (e *env) noSyncSecret(t *testing.T, s *corev1.Secret) {
	t.Helper()
	err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Namespace: tenantNS, Name: string(s.UID)}, &v1alpha1.SyncSecret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Secret %s/%s: want no SyncSecret on the hub, got err=%v", s.Namespace, s.Name, err)
	}
}

// waitSyncSecretGone waits until the SyncSecret of a Secret is gone.
func (e *env) waitSyncSecretGone(t *testing.T, s *corev1.Secret) {
	t.Helper()
	testsupport.Eventually(t, wait, "SyncSecret of Secret "+s.Name+" to be deleted", func() error {
		err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Namespace: tenantNS, Name: string(s.UID)}, &v1alpha1.SyncSecret{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
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
	var got eventsv1.Event
	testsupport.Eventually(t, wait, reason+" Event on "+s.Name, func() error {
		list := &eventsv1.EventList{}
		if err := e.Tenant.Client.List(e.ctx, list, client.InNamespace(s.Namespace)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.UID == s.UID && ev.Reason == reason && ev.Type == eventType {
				got = ev
				return nil
			}
		}
		return fmt.Errorf("no %s Event %s yet", eventType, reason)
	})
	return got
}

// settle waits until the synchronizer has nothing queued or running: what it would do about
// the objects made so far is done.
func settle(t *testing.T) {
	t.Helper()
	testenv.WaitControllerIdle(t, ControllerName, 1)
}
