package syncsecret_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
	"kubelb.dev/kubelb/internal/manager/syncsecret"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

const hostileWait = 60 * time.Second

// TestHostileTenantSyncSecrets: tenant b (the attacker, limited to 5 SyncSecrets and the
// default 4 MiB of SyncSecret data) writes 15 SyncSecrets, five of them of 900 KiB, next to
// tenant a (the victim). With the manager as cmd/kubelb sets it up (its cache selection and
// transforms, the SyncSecret and LoadBalancer controllers):
//   - b's SyncSecrets past its limits, oldest first, get no hub Secret and show Synced=False
//     QuotaExceeded with a Warning Event (the 5th by bytes, the 6th to 15th by count);
//   - the manager's cache holds no SyncSecret's data (it is read by name when copied);
//   - a keeps being served: a change of its LoadBalancer reaches its hub Service and a change
//     of its SyncSecret reaches its Secret;
//   - deleting one of b's admitted SyncSecrets admits the next ones.
//
// On the code before spec.limits.syncSecrets/syncSecretBytes every one of b's SyncSecrets
// became a Secret (15 Secrets, 4.4 MiB) and the cache held all their data.
func TestHostileTenantSyncSecrets(t *testing.T) {
	const managerNS = "kubelb"
	c := testenv.Start(t, "hub", testenv.Options{})
	ctx := t.Context()
	create := func(o client.Object) {
		t.Helper()
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}})
	for _, n := range []string{"tenant-a", "tenant-b"} {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n,
			Labels: map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}}})
	}
	create(&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: kubelbv1alpha1.TenantSpec{Limits: kubelbv1alpha1.Limits{SyncSecrets: ptr.To[int32](5)}}})

	log := testr.NewWithOptions(t, testr.Options{LogTimestamp: true, Verbosity: 0})
	mgr := testenv.StartManager(t, c.Config, func(mgr ctrl.Manager) error {
		if err := syncsecret.SetupWithManager(mgr, syncsecret.Options{Namespace: managerNS}); err != nil {
			return err
		}
		return loadbalancer.SetupWithManager(mgr, loadbalancer.Options{Namespace: managerNS})
	}, func(o *ctrl.Options) {
		o.Logger = log
		o.Cache.ByObject = hubcache.CacheByObject() // as cmd/kubelb
	})

	// The victim: a LoadBalancer and a SyncSecret, served.
	lb := &kubelbv1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web"},
		Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{
				Addresses: []kubelbv1alpha1.EndpointAddress{{IP: "192.0.2.10"}},
				Ports:     []kubelbv1alpha1.EndpointPort{{Name: "http", Port: 30080, Protocol: corev1.ProtocolTCP}},
			}},
			Ports: []kubelbv1alpha1.LoadBalancerPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			Type:  corev1.ServiceTypeLoadBalancer,
		},
	}
	create(lb)
	hubPorts := func(want int32) {
		t.Helper()
		testsupport.Eventually(t, hostileWait, fmt.Sprintf("tenant a's hub Service on port %d", want), func() error {
			svc := &corev1.Service{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-a", Name: hubnames.LoadBalancerServiceName("web")}, svc); err != nil {
				return err
			}
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != want {
				return fmt.Errorf("ports %+v", svc.Spec.Ports)
			}
			return nil
		})
	}
	hubPorts(80)
	victim := newSyncSecret("tenant-a", "a-cert", map[string][]byte{"k": []byte("v1")})
	create(victim)
	waitSecret(t, c.Client, victim, "v1")

	// The attacker: 5 large SyncSecrets, then 10 small ones, oldest first by name.
	big := bytes.Repeat([]byte("x"), 900*1024)
	var attacker []*kubelbv1alpha1.SyncSecret
	for i := range 15 {
		data := map[string][]byte{"k": []byte("small")}
		if i < 5 {
			data = map[string][]byte{"k": big}
		}
		ss := newSyncSecret("tenant-b", fmt.Sprintf("b-%02d", i), data)
		create(ss)
		attacker = append(attacker, ss)
	}
	for i, ss := range attacker {
		want := metav1.ConditionTrue
		reason, part := syncsecret.ReasonSynced, ""
		switch {
		case i == 4:
			want, reason, part = metav1.ConditionFalse, quota.ReasonQuotaExceeded, "may take 4194304 bytes (spec.limits.syncSecretBytes)"
		case i >= 5:
			want, reason, part = metav1.ConditionFalse, quota.ReasonQuotaExceeded, fmt.Sprintf("may hold 5 SyncSecrets (spec.limits.syncSecrets); this is the %dth oldest", i+1)
		}
		cur := waitSynced(t, c.Client, ss, want, reason, part)
		_, err := secretOf(ctx, c.Client, cur)
		if want == metav1.ConditionTrue && err != nil {
			t.Errorf("%s: admitted, but its Secret: %v", ss.Name, err)
		}
		if want == metav1.ConditionFalse && !apierrors.IsNotFound(err) {
			t.Errorf("%s: over the limits, but its Secret: %v", ss.Name, err)
		}
	}
	testsupport.Eventually(t, hostileWait, "a Warning Event QuotaExceeded on b-14", func() error {
		list := &eventsv1.EventList{}
		if err := c.Client.List(ctx, list, client.InNamespace("tenant-b")); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.Name == "b-14" && ev.Reason == quota.ReasonQuotaExceeded && ev.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return errors.New("none yet")
	})

	// The manager's cache holds no SyncSecret data, only its size.
	cached := &kubelbv1alpha1.SyncSecret{}
	if err := mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(attacker[0]), cached); err != nil {
		t.Fatal(err)
	}
	if len(cached.Data) != 0 || len(cached.StringData) != 0 || hubcache.SyncSecretDataBytes(cached) != int64(len(big)+1) {
		t.Errorf("the cache holds %d bytes of data of b-00 and says it has %d", len(cached.Data["k"]), hubcache.SyncSecretDataBytes(cached))
	}

	// The victim is still served: its changes go through.
	cur := &kubelbv1alpha1.LoadBalancer{}
	testsupport.Eventually(t, hostileWait, "updating tenant a's LoadBalancer", func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(lb), cur); err != nil {
			return err
		}
		cur.Spec.Ports[0].Port = 8080
		return c.Client.Update(ctx, cur)
	})
	start := time.Now()
	hubPorts(8080)
	t.Logf("tenant a's LoadBalancer change reached its hub Service in %v while tenant b is over its limits", time.Since(start).Round(time.Millisecond))
	testsupport.Eventually(t, hostileWait, "updating tenant a's SyncSecret", func() error {
		s := &kubelbv1alpha1.SyncSecret{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(victim), s); err != nil {
			return err
		}
		s.Data = map[string][]byte{"k": []byte("v2")}
		return c.Client.Update(ctx, s)
	})
	waitSecret(t, c.Client, victim, "v2")

	// Freeing room admits the next ones, oldest first: without b-00, b-04 fits the bytes and
	// b-05 the count.
	if err := c.Client.Delete(ctx, attacker[0]); err != nil {
		t.Fatal(err)
	}
	for _, ss := range attacker[4:6] {
		waitSynced(t, c.Client, ss, metav1.ConditionTrue, syncsecret.ReasonSynced, "")
		waitSecret(t, c.Client, ss, "")
	}
	waitSynced(t, c.Client, attacker[6], metav1.ConditionFalse, quota.ReasonQuotaExceeded, "this is the 6th oldest")
	if got := settings.DefaultLimitSyncSecretBytes; got != 4<<20 {
		t.Errorf("the test assumes the default syncSecretBytes of 4 MiB, not %d", got)
	}
}

func newSyncSecret(ns, name string, data map[string][]byte) *kubelbv1alpha1.SyncSecret {
	return &kubelbv1alpha1.SyncSecret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			kubelbv1alpha1.LabelOriginName: name, kubelbv1alpha1.LabelOriginNamespace: "default",
			kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue,
		}},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

func waitSynced(t *testing.T, c client.Client, ss *kubelbv1alpha1.SyncSecret, status metav1.ConditionStatus, reason, part string) *kubelbv1alpha1.SyncSecret {
	t.Helper()
	cur := &kubelbv1alpha1.SyncSecret{}
	testsupport.Eventually(t, hostileWait, fmt.Sprintf("SyncSecret %s Synced=%s (%s)", ss.Name, status, reason), func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(ss), cur); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(cur.Status.Conditions, syncsecret.ConditionSynced)
		if cond == nil || cond.Status != status || cond.Reason != reason || cond.ObservedGeneration != cur.Generation {
			return fmt.Errorf("conditions %+v", cur.Status.Conditions)
		}
		if part != "" && !bytes.Contains([]byte(cond.Message), []byte(part)) {
			return fmt.Errorf("message %q lacks %q", cond.Message, part)
		}
		return nil
	})
	return cur
}

func secretOf(ctx context.Context, c client.Client, ss *kubelbv1alpha1.SyncSecret) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ss.Namespace, Name: syncsecret.SecretName(ss)}, s)
	return s, err
}

// waitSecret waits for the hub Secret of ss to hold value under "k" (any value when "").
func waitSecret(t *testing.T, c client.Client, ss *kubelbv1alpha1.SyncSecret, value string) {
	t.Helper()
	testsupport.Eventually(t, hostileWait, "the hub Secret of "+ss.Name, func() error {
		cur := &kubelbv1alpha1.SyncSecret{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(ss), cur); err != nil {
			return err
		}
		s, err := secretOf(t.Context(), c, cur)
		if err != nil {
			return err
		}
		if value != "" && string(s.Data["k"]) != value {
			return fmt.Errorf("data %q", s.Data["k"])
		}
		return nil
	})
}
