package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/admission"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// hubWithWebhook starts a hub API server and the real kubelb binary serving the admission
// webhook on loopback (startWithWebhook), and creates the Tenants.
func hubWithWebhook(t *testing.T, tenants ...*kubelbv1alpha1.Tenant) client.Client {
	t.Helper()
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubelb"}}); err != nil {
		t.Fatal(err)
	}
	for _, tn := range tenants {
		if err := hub.Client.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	startWithWebhook(t, hub, testsupport.BuildBinary(t, "./cmd/kubelb"))
	for _, tn := range tenants {
		testsupport.Eventually(t, time.Minute, "tenant namespace "+hubnames.TenantNamespace(tn.Name), func() error {
			return hub.Client.Get(ctx, client.ObjectKey{Name: hubnames.TenantNamespace(tn.Name)}, &corev1.Namespace{})
		})
	}
	return hub.Client
}

// managerProcess is a running kubelb binary and its loopback ports.
type managerProcess struct {
	proc                   *testsupport.Process
	metricsPort, pprofPort int
}

// startWithWebhook runs bin (the kubelb binary) against hub with the admission webhook on
// loopback and the ValidatingWebhookConfiguration the chart installs pointing at it by URL
// (envtest has no Service network), and waits until the manager is ready and has set the
// configuration's CA bundle.
func startWithWebhook(t *testing.T, hub *testenv.Cluster, bin string) managerProcess {
	t.Helper()
	ctx := context.Background()
	c := hub.Client
	webhookPort := testsupport.FreePort(t)
	if err := c.Create(ctx, admission.Configuration(admissionregistrationv1.WebhookClientConfig{
		URL: ptr.To("https://" + testsupport.Loopback(webhookPort) + admission.Path),
	})); err != nil {
		t.Fatal(err)
	}
	m := managerProcess{metricsPort: testsupport.FreePort(t), pprofPort: testsupport.FreePort(t)}
	probePort, xdsPort := testsupport.FreePort(t), testsupport.FreePort(t)
	m.proc = testsupport.StartProcess(t, "kubelb", bin,
		"--kubeconfig", hub.Kubeconfig, "--namespace", "kubelb",
		"--metrics-addr", testsupport.Loopback(m.metricsPort), "--health-probe-bind-address", testsupport.Loopback(probePort),
		"--listen-address", testsupport.Loopback(xdsPort), "--pprof-bind-address", testsupport.Loopback(m.pprofPort),
		"--admission-webhook-address", testsupport.Loopback(webhookPort), "--admission-webhook-host", "127.0.0.1")
	testsupport.WaitHTTP200(t, m.proc, "http://"+testsupport.Loopback(probePort)+"/readyz", time.Minute)
	testsupport.Eventually(t, time.Minute, "the manager to set the webhook's CA bundle", func() error {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: admission.ConfigurationName}, vwc); err != nil {
			return err
		}
		if len(vwc.Webhooks[0].ClientConfig.CABundle) == 0 {
			return fmt.Errorf("no CA bundle yet")
		}
		return nil
	})
	return m
}

// TestHostileTenantEtcdBytes: an attacker tenant writes SyncSecrets and LoadBalancers past its
// byte limits; the API server refuses them (the manager's webhook), so the hub's etcd holds at
// most the limits, while the victim tenant's writes go through. Without the webhook (the code
// before it) every write is stored: the manager only refused to serve the excess.
func TestHostileTenantEtcdBytes(t *testing.T) {
	const secretLimit, objectLimit = 128 << 10, 96 << 10
	attacker := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "attacker"}}
	attacker.Spec.Limits.SyncSecretBytes = ptr.To[int64](secretLimit)
	attacker.Spec.Limits.ObjectBytes = ptr.To[int64](objectLimit)
	victim := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "victim"}}
	c := hubWithWebhook(t, attacker, victim)
	ctx := context.Background()
	attackerNS, victimNS := hubnames.TenantNamespace("attacker"), hubnames.TenantNamespace("victim")

	// SyncSecrets of 50 KiB: the first two fit 128 KiB, the third does not. Each write is
	// followed by the manager's status on it, so the webhook has seen it (one cache).
	syncSecret := func(ns, name string, size int) *kubelbv1alpha1.SyncSecret {
		return &kubelbv1alpha1.SyncSecret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"k": bytes.Repeat([]byte("s"), size)},
		}
	}
	waitSeen := func(obj client.Object, seen func() bool) {
		t.Helper()
		testsupport.Eventually(t, time.Minute, fmt.Sprintf("the manager to see %s", obj.GetName()), func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			if !seen() {
				return fmt.Errorf("no status yet")
			}
			return nil
		})
	}
	for i := range 2 {
		ss := syncSecret(attackerNS, fmt.Sprintf("s%d", i), 50<<10)
		if err := c.Create(ctx, ss); err != nil {
			t.Fatalf("SyncSecret %d within the limit refused: %v", i, err)
		}
		waitSeen(ss, func() bool { return len(ss.Status.Conditions) > 0 })
	}
	err := c.Create(ctx, syncSecret(attackerNS, "s2", 50<<10))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "spec.limits.syncSecretBytes") || !strings.Contains(err.Error(), "tenant attacker") {
		t.Fatalf("a SyncSecret past syncSecretBytes: want Forbidden naming spec.limits.syncSecretBytes and the tenant, got %v", err)
	}
	// Growing a stored one past the limit is refused too; shrinking is not.
	grown := &kubelbv1alpha1.SyncSecret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: attackerNS, Name: "s0"}, grown); err != nil {
		t.Fatal(err)
	}
	// Merge patches: the manager writes the objects' status meanwhile.
	before := grown.DeepCopy()
	grown.Data["k"] = bytes.Repeat([]byte("s"), 90<<10)
	if err := c.Patch(ctx, grown, client.MergeFrom(before)); !apierrors.IsForbidden(err) {
		t.Fatalf("growing a SyncSecret past syncSecretBytes: want Forbidden, got %v", err)
	}
	grown.Data["k"] = []byte("small")
	if err := c.Patch(ctx, grown, client.MergeFrom(before)); err != nil {
		t.Fatalf("shrinking a SyncSecret was refused: %v", err)
	}

	// LoadBalancers: 40 KiB of annotations each against objectBytes 96 KiB.
	lb := func(ns, name string, pad int) *kubelbv1alpha1.LoadBalancer {
		return &kubelbv1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"pad": strings.Repeat("p", pad)}},
			Spec: kubelbv1alpha1.LoadBalancerSpec{
				Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{
					Addresses: []kubelbv1alpha1.EndpointAddress{{IP: "10.0.0.1"}},
					Ports:     []kubelbv1alpha1.EndpointPort{{Name: "http", Port: 30080, Protocol: corev1.ProtocolTCP}},
				}},
				Ports: []kubelbv1alpha1.LoadBalancerPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
				Type:  corev1.ServiceTypeClusterIP,
			},
		}
	}
	for i := range 2 {
		o := lb(attackerNS, fmt.Sprintf("lb%d", i), 40<<10)
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("LoadBalancer %d within the limit refused: %v", i, err)
		}
		waitSeen(o, func() bool { return len(o.Status.Conditions) > 0 })
	}
	err = c.Create(ctx, lb(attackerNS, "lb2", 40<<10))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "spec.limits.objectBytes") {
		t.Fatalf("a LoadBalancer past objectBytes: want Forbidden naming spec.limits.objectBytes, got %v", err)
	}
	// A finalizer and a delete do not free the bytes: the object stays in etcd.
	held := &kubelbv1alpha1.LoadBalancer{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: attackerNS, Name: "lb1"}, held); err != nil {
		t.Fatal(err)
	}
	heldBefore := held.DeepCopy()
	held.Finalizers = append(held.Finalizers, "attacker.example/hold")
	if err := c.Patch(ctx, held, client.MergeFrom(heldBefore)); err != nil {
		t.Fatalf("adding a finalizer (no growth worth a refusal) was refused: %v", err)
	}
	if err := c.Delete(ctx, held); err != nil {
		t.Fatal(err)
	}
	waitSeen(held, func() bool { return !held.DeletionTimestamp.IsZero() })
	time.Sleep(2 * time.Second) // the webhook's cache sees the deletion timestamp (nothing should change)
	if err := c.Create(ctx, lb(attackerNS, "lb3", 40<<10)); !apierrors.IsForbidden(err) {
		t.Fatalf("a LoadBalancer past objectBytes while another, being deleted, still holds its bytes: want Forbidden, got %v", err)
	}
	heldBefore = held.DeepCopy()
	held.Finalizers = nil
	if err := c.Patch(ctx, held, client.MergeFrom(heldBefore)); err != nil {
		t.Fatalf("removing the finalizer: %v", err)
	}

	// The victim's writes of the same sizes go through: its budget is its own.
	for i := range 2 {
		if err := c.Create(ctx, syncSecret(victimNS, fmt.Sprintf("s%d", i), 50<<10)); err != nil {
			t.Fatalf("victim's SyncSecret %d refused: %v", i, err)
		}
		if err := c.Create(ctx, lb(victimNS, fmt.Sprintf("lb%d", i), 40<<10)); err != nil {
			t.Fatalf("victim's LoadBalancer %d refused: %v", i, err)
		}
	}
}
