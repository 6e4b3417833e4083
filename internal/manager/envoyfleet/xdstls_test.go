package envoyfleet

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/pki/store"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/xds"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

func getSecret(c client.Client, ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	return s, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s)
}

func leafOf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("tls.crt is not PEM")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestFleetXDSCertificate runs the fleet controller against a real API server and a real
// Envoy: the manager makes the xDS CA Secret, each tenant's fleet gets a client certificate
// Secret naming its namespace and mounts it, and a real Envoy started from the fleet's
// bootstrap with that Secret mounted is served by an xDS server whose credentials come from
// the same CA Secret (pki/store.Authority, as every manager replica runs it). Deleting the CA
// Secret rotates the CA: a new CA, and every fleet's Secret reissued from it.
func TestFleetXDSCertificate(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	xdsAddr := lis.Addr().String()
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}},
		tenantNamespace("a"), tenantNamespace("b"),
		&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	)
	var srv *xds.Server
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		// A replica: the CA's keeper and the xDS server with its credentials.
		authority := store.NewAuthority(mgr.GetClient(), mgr.GetAPIReader(), managerNS, "127.0.0.1", testr.New(t))
		srv = xds.NewServer(testr.NewWithOptions(t, testr.Options{Verbosity: 1}), authority.ServerTLS())
		if err := mgr.Add(authority); err != nil {
			return err
		}
		if err := mgr.Add(runnable(func(ctx context.Context) error { return srv.Serve(ctx, lis) })); err != nil {
			return err
		}
		return SetupWithManager(mgr, Options{Namespace: managerNS, XDSAddress: xdsAddr})
	})
	create(t, c, loadBalancer("tenant-a", "lb"), loadBalancer("tenant-b", "lb"))

	var caSecret, secretA *corev1.Secret
	testsupport.Eventually(t, 20*time.Second, "the CA Secret and the client Secrets", func() error {
		var err error
		if caSecret, err = getSecret(c, managerNS, pki.CASecretName); err != nil {
			return err
		}
		if secretA, err = getSecret(c, "tenant-a", pki.ClientSecretName); err != nil {
			return err
		}
		if _, err = getSecret(c, "tenant-b", pki.ClientSecretName); err != nil {
			return err
		}
		// The Secret is applied before the workload that mounts it.
		_, err = getDeployment(c, "tenant-a")
		return err
	})
	ca, err := store.CAFromSecret(caSecret)
	if err != nil {
		t.Fatal(err)
	}
	leaf := leafOf(t, secretA.Data[pki.KeyCert])
	if tenant, err := pki.TenantOf(leaf); err != nil || tenant != "tenant-a" {
		t.Errorf("tenant-a's certificate names %q (%v)", tenant, err)
	}
	if err := leaf.CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("tenant-a's certificate is not signed by the CA in the Secret: %v", err)
	}
	if !bytes.Equal(secretA.Data[pki.KeyCA], caSecret.Data[pki.KeyCert]) {
		t.Error("tenant-a's Secret does not carry the CA certificate")
	}
	if secretA.Labels[kubelbv1alpha1.LabelManagedBy] != kubelbv1alpha1.LabelManagedByValue || secretA.Labels[kubelbv1alpha1.LabelTenantName] != "a" {
		t.Errorf("client Secret labels %v", secretA.Labels)
	}
	if _, ok := caSecret.Data[pki.KeyKey]; !ok || caSecret.Type != corev1.SecretTypeTLS {
		t.Errorf("the CA Secret has type %s and keys %v", caSecret.Type, keys(caSecret.Data))
	}

	// The pods mount the Secret where the bootstrap reads it.
	dep, err := getDeployment(c, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	mounted := false
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != pki.ClientSecretName {
			continue
		}
		for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
			mounted = mounted || (m.Name == v.Name && m.MountPath == xdsbootstrap.DefaultTLSDir)
		}
	}
	if !mounted {
		t.Errorf("the Deployment does not mount Secret %s at %s: %+v", pki.ClientSecretName, xdsbootstrap.DefaultTLSDir, dep.Spec.Template.Spec.Volumes)
	}

	// A real Envoy of tenant-a with the fleet's bootstrap and Secret is served.
	if _, err := srv.SetTenant(ctx, "tenant-a", nil); err != nil {
		t.Fatal(err)
	}
	bootstrap, err := BootstrapFor(ctx, c, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	// Envoys here share loopback: free admin and readiness ports.
	bootstrap = bytes.ReplaceAll(bootstrap, []byte(fmt.Sprintf("port_value: %d", AdminPort)), []byte(fmt.Sprintf("port_value: %d", testsupport.FreePort(t))))
	bootstrap = bytes.ReplaceAll(bootstrap, []byte(fmt.Sprintf("port_value: %d", ReadyPort)), []byte(fmt.Sprintf("port_value: %d", testsupport.FreePort(t))))
	bootstrap = bytes.ReplaceAll(bootstrap, []byte("address: 0.0.0.0"), []byte("address: 127.0.0.1"))
	e := testsupport.StartEnvoy(t, "envoy-a", xdstest.Mount(t, bootstrap, secretA.Data), testsupport.EnvoyOptions{Node: "envoy-a", Concurrency: 1})
	testsupport.Eventually(t, 30*time.Second, "Envoy of tenant-a connected to xDS", func() error {
		v, err := e.Stat("control_plane.connected_state")
		if err == nil && v != 1 {
			err = fmt.Errorf("control_plane.connected_state = %d", v)
		}
		return err
	})

	// A Secret of that name that kubelb did not make is left alone, and says so.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: pki.ClientSecretName, Namespace: "tenant-c"}, Data: map[string][]byte{"tls.crt": []byte("mine")}}
	create(t, c, tenantNamespace("c"), &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, foreign, loadBalancer("tenant-c", "lb"))
	testsupport.Eventually(t, 20*time.Second, "a Warning Event about the foreign Secret", func() error {
		var list eventsv1.EventList
		if err := c.List(ctx, &list); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == ReasonXDSSecretConflict && e.Regarding.Name == "c" {
				return nil
			}
		}
		return fmt.Errorf("no %s Event", ReasonXDSSecretConflict)
	})
	if got, err := getSecret(c, "tenant-c", pki.ClientSecretName); err != nil || string(got.Data["tls.crt"]) != "mine" || len(got.Data) != 1 {
		t.Errorf("the foreign Secret was changed: %v %v", err, keys(got.Data))
	}

	// Rotation: the CA Secret is deleted; a new CA is made and every fleet's Secret follows.
	if err := c.Delete(ctx, caSecret); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 30*time.Second, "a new CA and the fleets' certificates reissued from it", func() error {
		newCA, err := getSecret(c, managerNS, pki.CASecretName)
		if err != nil {
			return err
		}
		if newCA.UID == caSecret.UID {
			return fmt.Errorf("the old CA Secret is still there")
		}
		for _, ns := range []string{"tenant-a", "tenant-b"} {
			sec, err := getSecret(c, ns, pki.ClientSecretName)
			if err != nil {
				return err
			}
			if !bytes.Equal(sec.Data[pki.KeyCA], newCA.Data[pki.KeyCert]) {
				return fmt.Errorf("%s's Secret still carries the old CA", ns)
			}
		}
		return nil
	})
}

type runnable func(context.Context) error

func (r runnable) Start(ctx context.Context) error { return r(ctx) }
func (runnable) NeedLeaderElection() bool          { return false }

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
