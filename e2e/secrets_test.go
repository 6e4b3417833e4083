package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// waitTLSSecretOnHub creates a TLS Secret and an Ingress of class kubelb naming it in the
// tenant, and waits until the hub holds the SyncSecret the ccm mirrors and the Secret the
// manager makes from it, with the labels the Envoy control plane finds it by.
func waitTLSSecretOnHub(t *testing.T, hub *testenv.Cluster, a *framework.Tenant) {
	t.Helper()
	ctx := t.Context()
	tc := a.Cluster.Client
	if err := tc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	crt, key := testsupport.SelfSignedPEM(t, "shop.example.com")
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
	if err := tc.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(kubelbv1alpha1.DefaultClass),
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "app-tls"}},
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
		},
	}
	if err := tc.Create(ctx, ing); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, time.Minute, "the hub Secret of tenant Secret shop/app-tls", func() error {
		ss := &kubelbv1alpha1.SyncSecret{}
		if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: string(secret.UID)}, ss); err != nil {
			return fmt.Errorf("SyncSecret: %w", err)
		}
		list := &corev1.SecretList{}
		if err := hub.Client.List(ctx, list, client.InNamespace(a.Namespace), client.MatchingLabels{
			kubelbv1alpha1.LabelOriginNamespace: "shop", kubelbv1alpha1.LabelOriginName: "app-tls",
		}); err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].Name != string(ss.UID) || string(list.Items[0].Data[corev1.TLSCertKey]) != string(crt) {
			return errors.New("no hub Secret with the certificate yet")
		}
		return nil
	})
}
