package secrets

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
)

// tlsIngress is an Ingress of class class whose TLS section names Secret secret.
func tlsIngress(ns, name, class, secret string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.IngressSpec{
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
		},
	}
	if class != "" {
		ing.Spec.IngressClassName = ptr.To(class)
	}
	if secret != "" {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: secret}}
	}
	return ing
}

// ceSyncSecret reads the SyncSecret KubeLB CE's ccm wrote for Secret shop/app-tls.
func ceSyncSecret(t *testing.T) *v1alpha1.SyncSecret {
	t.Helper()
	raw, err := os.ReadFile("/work/shared/fixtures/kubelb-ce/hub-syncsecrets.yaml")
	if err != nil {
		t.Skipf("CE fixture not available: %v", err)
	}
	ss := &v1alpha1.SyncSecret{}
	if err := yaml.Unmarshal(bytes.ReplaceAll(raw, []byte("<redacted base64>"), []byte("AA==")), ss); err != nil {
		t.Fatal(err)
	}
	return ss
}

// An Ingress of class kubelb naming a TLS Secret gets that Secret mirrored as a SyncSecret in
// KubeLB CE's shape; data changes follow; dropping the reference removes the SyncSecret and
// the finalizer. Another class's Secret is never mirrored.
func TestIngressTLSSecretMirrored(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	e.startSync(t, Options{Ingress: true, UseIngressClass: true})

	secret := e.tlsSecret(t, "shop", "app-tls", nil)
	other := e.tlsSecret(t, "shop", "other-tls", nil)
	ing := tlsIngress("shop", "app", v1alpha1.DefaultClass, "app-tls")
	e.create(t, e.Tenant.Client, ing)
	e.create(t, e.Tenant.Client, tlsIngress("shop", "other", "nginx", "other-tls"))

	ss := e.syncSecretOf(t, secret, nil)
	ce := ceSyncSecret(t)
	wantLabels := map[string]string{
		v1alpha1.LabelOriginName: "app-tls", v1alpha1.LabelOriginNamespace: "shop",
		v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue, v1alpha1.LabelTenantName: "probe",
	}
	for k, v := range ce.Labels { // CE's labels, same values (the fixture's Secret is shop/app-tls)
		if wantLabels[k] != v {
			t.Errorf("CE label %s=%s: want the same here, got labels %v", k, v, wantLabels)
		}
	}
	if fmt.Sprint(ss.Labels) != fmt.Sprint(wantLabels) {
		t.Errorf("labels %v, want %v", ss.Labels, wantLabels)
	}
	if ss.Type != ce.Type || ss.Type != corev1.SecretTypeTLS {
		t.Errorf("type %q, want %q (CE's)", ss.Type, ce.Type)
	}
	if len(ss.StringData) != 0 || ss.Immutable != nil {
		t.Errorf("stringData %v immutable %v, want none", ss.StringData, ss.Immutable)
	}
	if len(ss.Data) != len(ce.Data) || !bytes.Equal(ss.Data[corev1.TLSCertKey], secret.Data[corev1.TLSCertKey]) ||
		!bytes.Equal(ss.Data[corev1.TLSPrivateKeyKey], secret.Data[corev1.TLSPrivateKeyKey]) {
		t.Errorf("data keys %d (CE %d), or values differ from the Secret's", len(ss.Data), len(ce.Data))
	}
	e.waitFinalizer(t, secret, true)
	settle(t)
	e.noSyncSecret(t, other)
	if n := testutil.ToFloat64(metrics.CCMManagedSecrets.WithLabelValues("shop")); n != 1 {
		t.Errorf("kubelb_ccm_managed_secrets_total{namespace=shop} = %v, want 1", n)
	}
	if f := e.secret(t, other).Finalizers; len(f) != 0 {
		t.Errorf("Secret of another class's Ingress got finalizers %v", f)
	}

	// A new certificate reaches the hub.
	crt, key := testsupport.SelfSignedPEM(t, "renewed.example.com")
	cur := e.secret(t, secret)
	cur.Data = map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}
	if err := e.Tenant.Client.Update(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.syncSecretOf(t, secret, func(ss *v1alpha1.SyncSecret) error {
		if !bytes.Equal(ss.Data[corev1.TLSCertKey], crt) {
			return errors.New("old certificate")
		}
		return nil
	})

	// The Ingress drops the reference: the mirror goes, the Secret is released.
	curIng := &networkingv1.Ingress{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(ing), curIng); err != nil {
		t.Fatal(err)
	}
	curIng.Spec.TLS = nil
	if err := e.Tenant.Client.Update(e.ctx, curIng); err != nil {
		t.Fatal(err)
	}
	e.waitSyncSecretGone(t, secret)
	e.waitFinalizer(t, secret, false)
	if n := testutil.ToFloat64(metrics.CCMManagedSecrets.WithLabelValues("shop")); n != 0 {
		t.Errorf("kubelb_ccm_managed_secrets_total{namespace=shop} = %v after the release, want 0", n)
	}

	// Named again, then the Secret is deleted: mirror removed, the Secret goes away.
	curIng.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "app-tls"}}
	if err := e.Tenant.Client.Update(e.ctx, curIng); err != nil {
		t.Fatal(err)
	}
	e.syncSecretOf(t, secret, nil)
	e.waitFinalizer(t, secret, true)
	if err := e.Tenant.Client.Delete(e.ctx, secret); err != nil {
		t.Fatal(err)
	}
	e.waitSyncSecretGone(t, secret)
	testsupport.Eventually(t, wait, "Secret app-tls to be gone", func() error {
		if e.secret(t, secret) != nil {
			return errors.New("still there")
		}
		return nil
	})
}

// With --enable-secret-synchronizer off a labelled Secret stays in the tenant; with it on it
// is mirrored, and deleting it removes the mirror.
func TestLabelledSecret(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "apps")
	labels := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}
	plain := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "token", Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"token": []byte("s3cr3t")},
		Immutable:  ptr.To(true),
	}
	e.create(t, e.Tenant.Client, plain)

	stop := e.startSync(t, Options{Ingress: true, UseIngressClass: true})
	tlsLabelled := e.tlsSecret(t, "apps", "labelled-tls", labels)
	settle(t)
	e.noSyncSecret(t, plain)
	e.noSyncSecret(t, tlsLabelled)
	stop()

	e.startSync(t, Options{Ingress: true, UseIngressClass: true, Labelled: true})
	ss := e.syncSecretOf(t, plain, nil)
	if ss.Type != corev1.SecretTypeOpaque || string(ss.Data["token"]) != "s3cr3t" || ss.Immutable == nil || !*ss.Immutable {
		t.Errorf("SyncSecret type %q data %v immutable %v: want Opaque, the token, immutable", ss.Type, ss.Data, ss.Immutable)
	}
	e.syncSecretOf(t, tlsLabelled, nil)
	e.waitFinalizer(t, plain, true)

	// The label goes: so does the mirror.
	cur := e.secret(t, tlsLabelled)
	cur.Labels = nil
	if err := e.Tenant.Client.Update(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.waitSyncSecretGone(t, tlsLabelled)
	e.waitFinalizer(t, tlsLabelled, false)

	if err := e.Tenant.Client.Delete(e.ctx, plain); err != nil {
		t.Fatal(err)
	}
	e.waitSyncSecretGone(t, plain)
	testsupport.Eventually(t, wait, "Secret token to be gone", func() error {
		if e.secret(t, plain) != nil {
			return errors.New("still there (finalizer)")
		}
		return nil
	})
}

// A Secret of a type the hub does not need, or too large, is not mirrored: a Warning Event on
// the Secret says why. A mirrored Secret that grows too large loses its mirror.
func TestRefusedSecrets(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "apps")
	labels := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}
	e.startSync(t, Options{Labelled: true})

	docker := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "pull", Labels: labels},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
	}
	e.create(t, e.Tenant.Client, docker)
	big := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "big", Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"blob": bytes.Repeat([]byte("x"), MaxDataBytes+1)},
	}
	e.create(t, e.Tenant.Client, big)
	growing := e.tlsSecret(t, "apps", "growing", labels)

	ev := e.waitEvent(t, docker, corev1.EventTypeWarning, ReasonSecretTypeInvalid)
	t.Logf("event: %s", ev.Note)
	ev = e.waitEvent(t, big, corev1.EventTypeWarning, ReasonSecretTooLarge)
	t.Logf("event: %s", ev.Note)
	e.syncSecretOf(t, growing, nil)
	settle(t)
	e.noSyncSecret(t, docker)
	e.noSyncSecret(t, big)
	for _, s := range []*corev1.Secret{docker, big} {
		if f := e.secret(t, s).Finalizers; len(f) != 0 {
			t.Errorf("refused Secret %s got finalizers %v", s.Name, f)
		}
	}

	cur := e.secret(t, growing)
	cur.Data["padding"] = bytes.Repeat([]byte("x"), MaxDataBytes)
	if err := e.Tenant.Client.Update(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(t, growing, corev1.EventTypeWarning, ReasonSecretTooLarge)
	e.waitSyncSecretGone(t, growing)
	e.waitFinalizer(t, growing, false)
}

// A served Gateway's certificateRefs are mirrored; a Secret in another namespace only once a
// ReferenceGrant there allows it; a Gateway of another controller's class is not served.
func TestGatewayTLSSecretsMirrored(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	e.namespace(t, "certs")
	e.startSync(t, Options{Gateway: true, UseGatewayClass: true})

	e.create(t, e.Tenant.Client, &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "ours"},
		Spec: gwapiv1.GatewayClassSpec{ControllerName: ccmsource.ControllerName}})
	e.create(t, e.Tenant.Client, &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "theirs"},
		Spec: gwapiv1.GatewayClassSpec{ControllerName: "example.com/other"}})
	local := e.tlsSecret(t, "shop", "gw-tls", nil)
	shared := e.tlsSecret(t, "certs", "shared-tls", nil)
	foreign := e.tlsSecret(t, "shop", "theirs-tls", nil)
	gateway := func(name, class string, refs ...gwapiv1.SecretObjectReference) *gwapiv1.Gateway {
		return &gwapiv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: gwapiv1.GatewaySpec{
				GatewayClassName: gwapiv1.ObjectName(class),
				Listeners: []gwapiv1.Listener{{
					Name: "https", Port: 443, Protocol: gwapiv1.HTTPSProtocolType, Hostname: ptr.To(gwapiv1.Hostname("shop.example.com")),
					TLS: &gwapiv1.ListenerTLSConfig{Mode: ptr.To(gwapiv1.TLSModeTerminate), CertificateRefs: refs},
				}},
			},
		}
	}
	e.create(t, e.Tenant.Client, gateway("web", "ours",
		gwapiv1.SecretObjectReference{Name: "gw-tls"},
		gwapiv1.SecretObjectReference{Name: "shared-tls", Namespace: ptr.To(gwapiv1.Namespace("certs"))}))
	e.create(t, e.Tenant.Client, gateway("other", "theirs", gwapiv1.SecretObjectReference{Name: "theirs-tls"}))

	e.syncSecretOf(t, local, nil)
	settle(t)
	e.noSyncSecret(t, shared)
	e.noSyncSecret(t, foreign)

	e.create(t, e.Tenant.Client, &gwapiv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "shop-gateways"},
		Spec: gwapiv1.ReferenceGrantSpec{
			From: []gwapiv1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "Gateway", Namespace: "shop"}},
			To:   []gwapiv1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
		},
	})
	e.syncSecretOf(t, shared, func(ss *v1alpha1.SyncSecret) error {
		if ss.Labels[v1alpha1.LabelOriginNamespace] != "certs" || ss.Labels[v1alpha1.LabelOriginName] != "shared-tls" {
			return fmt.Errorf("labels %v", ss.Labels)
		}
		return nil
	})

	// The grant goes: so does the mirror of the Secret it allowed.
	if err := e.Tenant.Client.Delete(e.ctx, &gwapiv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "shop-gateways"}}); err != nil {
		t.Fatal(err)
	}
	e.waitSyncSecretGone(t, shared)
	e.waitFinalizer(t, shared, false)
}

// TestListenerSetTLSSecretsMirrored: a Secret a ListenerSet names is mirrored when the
// ListenerSet's Gateway is served (another namespace's only with a ReferenceGrant from
// ListenerSets there), not when its Gateway is another implementation's.
func TestListenerSetTLSSecretsMirrored(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	e.namespace(t, "certs")
	e.startSync(t, Options{Gateway: true, UseGatewayClass: true})

	e.create(t, e.Tenant.Client, &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "ours"},
		Spec: gwapiv1.GatewayClassSpec{ControllerName: ccmsource.ControllerName}})
	local := e.tlsSecret(t, "shop", "ls-tls", nil)
	shared := e.tlsSecret(t, "certs", "ls-shared-tls", nil)
	foreign := e.tlsSecret(t, "shop", "ls-theirs-tls", nil)
	for _, gw := range []struct{ name, class string }{{"web", "ours"}, {"other", "theirs"}} {
		e.create(t, e.Tenant.Client, &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: gw.name},
			Spec: gwapiv1.GatewaySpec{GatewayClassName: gwapiv1.ObjectName(gw.class),
				Listeners: []gwapiv1.Listener{{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType}}}})
	}
	listenerSet := func(name, gateway string, refs ...gwapiv1.SecretObjectReference) *gwapiv1.ListenerSet {
		return &gwapiv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: gwapiv1.ListenerSetSpec{
			ParentRef: gwapiv1.ParentGatewayReference{Name: gwapiv1.ObjectName(gateway)},
			Listeners: []gwapiv1.ListenerEntry{{Name: "https", Port: 443, Protocol: gwapiv1.HTTPSProtocolType,
				TLS: &gwapiv1.ListenerTLSConfig{Mode: ptr.To(gwapiv1.TLSModeTerminate), CertificateRefs: refs}}},
		}}
	}
	e.create(t, e.Tenant.Client, listenerSet("ours", "web",
		gwapiv1.SecretObjectReference{Name: "ls-tls"},
		gwapiv1.SecretObjectReference{Name: "ls-shared-tls", Namespace: ptr.To(gwapiv1.Namespace("certs"))}))
	e.create(t, e.Tenant.Client, listenerSet("theirs", "other", gwapiv1.SecretObjectReference{Name: "ls-theirs-tls"}))

	e.syncSecretOf(t, local, nil)
	settle(t)
	e.noSyncSecret(t, shared)
	e.noSyncSecret(t, foreign)

	e.create(t, e.Tenant.Client, &gwapiv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "shop-listenersets"},
		Spec: gwapiv1.ReferenceGrantSpec{
			From: []gwapiv1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "ListenerSet", Namespace: "shop"}},
			To:   []gwapiv1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
		},
	})
	e.syncSecretOf(t, shared, nil)
}
