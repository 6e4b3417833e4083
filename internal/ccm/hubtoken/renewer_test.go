package hubtoken

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/tenant"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

var bg = context.Background()

const (
	managerNS     = "kubelb"
	tenantName    = "shop"
	hubNS         = "tenant-shop"
	ccmNS         = "kubelb"
	ccmSecretName = "kubelb-cluster"
	ccmSA         = "kubelb-ccm"
	// fraction renews a 10-minute token every 6 seconds.
	fraction = 0.01
)

// startCCMManager runs a controller-runtime manager until the test ends, like
// testenv.StartManager, and returns a channel that is closed when it stops (the test checks
// that a rejected token stops nothing).
func startCCMManager(t *testing.T, cfg *rest.Config, setup func(ctrl.Manager) error) <-chan struct{} {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	return stopped
}

// logSink collects log lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
}

func (l *logSink) find(substr string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			return line
		}
	}
	return ""
}

// hubKubeconfig is the manager's Secret for the tenant on the hub.
func hubKubeconfig(t *testing.T, hub client.Client) []byte {
	t.Helper()
	var raw []byte
	testsupport.Eventually(t, 30*time.Second, "the Tenant's kubeconfig Secret", func() error {
		sec := &corev1.Secret{}
		if err := hub.Get(bg, types.NamespacedName{Namespace: hubNS, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, sec); err != nil {
			return err
		}
		raw = sec.Data[kubelbv1alpha1.CCMKubeconfigSecretKey]
		return nil
	})
	return raw
}

// tenantKubeconfig is the kubeconfig in the tenant cluster's Secret kubelb/kubelb-cluster.
func tenantKubeconfig(t *testing.T, c client.Client) []byte {
	t.Helper()
	sec := &corev1.Secret{}
	if err := c.Get(bg, types.NamespacedName{Namespace: ccmNS, Name: ccmSecretName}, sec); err != nil {
		t.Fatal(err)
	}
	return sec.Data[DefaultSecretKey]
}

func mustParse(t *testing.T, kubeconfig []byte) Claims {
	t.Helper()
	c, err := ParseToken(KubeconfigToken(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// credentialID asks the hub who sent a request with cfg and returns the ID of the credential
// the API server saw: "JTI=<jti of the token>".
func credentialID(cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(bg, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	ids := review.Status.UserInfo.Extra["authentication.kubernetes.io/credential-id"]
	if len(ids) != 1 {
		return "", fmt.Errorf("user info %+v has no credential ID", review.Status.UserInfo)
	}
	return ids[0], nil
}

// TestRenewalOnRealAPIServers runs the real Tenant controller on a hub API server and the
// renewer in a manager on a tenant API server, with only the tenant-side permissions the ccm
// chart grants (get and update of its one Secret): the ccm's token is renewed through the
// TokenRequest API with the tenant's own credentials, hub requests switch to the new token,
// the new token is written back into the tenant Secret (server and CA unchanged), a token the
// hub rejects (its ServiceAccount re-created) is reported by the connectivity gauge and a log
// line without stopping anything, and a fresh copy of the kubeconfig is taken over without a
// restart.
func TestRenewalOnRealAPIServers(t *testing.T) {
	pair := testenv.StartPair(t)
	hub, tc := pair.Hub, pair.Tenant

	// Hub: the real Tenant controller makes namespace, ServiceAccount, Role and kubeconfig.
	if err := hub.Client.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		return tenant.SetupWithManager(mgr, tenant.Options{Namespace: managerNS, HubAPIServerURL: hub.Config.Host, TokenTTL: tenant.MinTokenTTL})
	})
	if err := hub.Client.Create(bg, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tenantName}}); err != nil {
		t.Fatal(err)
	}
	original := hubKubeconfig(t, hub.Client)
	origClaims := mustParse(t, original)

	// Tenant: the platform team's copy, and the chart's Role for the ccm (this Secret only).
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ccmNS}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ccmNS, Name: ccmSecretName}, Data: map[string][]byte{DefaultSecretKey: original}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ccmNS, Name: "kubelb-ccm-hub-kubeconfig"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{ccmSecretName}, Verbs: []string{"get", "update"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ccmNS, Name: "kubelb-ccm-hub-kubeconfig"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "kubelb-ccm-hub-kubeconfig"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ccmNS, Name: ccmSA}}},
	} {
		if err := tc.Client.Create(bg, o); err != nil {
			t.Fatal(err)
		}
	}
	asCCM := rest.CopyConfig(tc.Config)
	asCCM.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ccmNS + ":" + ccmSA,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ccmNS, "system:authenticated"}}

	hubCfg, err := clientcmd.RESTConfigFromKubeConfig(original)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("tenant credentials get no token for another ServiceAccount", func(t *testing.T) {
		cs := kubernetes.NewForConfigOrDie(hubCfg)
		for _, sa := range []types.NamespacedName{{Namespace: hubNS, Name: "default"}, {Namespace: "tenant-other", Name: ccmSA}, {Namespace: managerNS, Name: "kubelb"}} {
			_, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(bg, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("token for %s: %v, want 403 Forbidden", sa, err)
			}
		}
	})

	t.Run("client certificates: nothing to renew", func(t *testing.T) {
		if _, err := New(hub.Config, nil, Options{}); err == nil || !strings.Contains(err.Error(), ErrNotServiceAccountToken.Error()) {
			t.Errorf("New with the admin's client certificate: %v", err)
		}
	})

	t.Run("in memory without a Secret", func(t *testing.T) {
		r, err := New(hubCfg, nil, Options{RenewAfterFraction: fraction})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { done <- r.Start(ctx) }()
		testsupport.Eventually(t, 30*time.Second, "an in-memory renewal", func() error {
			if raw, _ := r.Current(); raw == KubeconfigToken(original) {
				return fmt.Errorf("still the original token")
			}
			return nil
		})
		_, c := r.Current()
		id, err := credentialID(r.Config())
		if err != nil || id != "JTI="+c.ID {
			t.Errorf("requests use credential %q (%v), want the renewed token's JTI=%s", id, err, c.ID)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
		if got := tenantKubeconfig(t, tc.Client); string(got) != string(original) {
			t.Error("the tenant Secret changed without a Secret option")
		}
	})

	// Counted before the manager starts: the first renewal may come within milliseconds.
	okBefore := testutil.ToFloat64(metrics.CCMOperations.WithLabelValues(opToken, metrics.ResultSuccess))
	logs := &logSink{}
	var wrapped *rest.Config
	var hubCluster cluster.Cluster
	stopped := startCCMManager(t, asCCM, func(mgr ctrl.Manager) error {
		var err error
		wrapped, err = Setup(mgr, hubCfg, Options{
			Secret:             types.NamespacedName{Namespace: ccmNS, Name: ccmSecretName},
			RenewAfterFraction: fraction,
			Logger:             logs.logger(),
		})
		if err != nil {
			return err
		}
		// The hub cluster as cmd/ccm makes it.
		hubCluster, err = cluster.New(wrapped, func(o *cluster.Options) {
			o.Scheme = testenv.Scheme()
			o.Cache.DefaultNamespaces = map[string]cache.Config{hubNS: {}}
		})
		if err != nil {
			return err
		}
		return mgr.Add(hubCluster)
	})

	var renewed []byte
	t.Run("renewed, used, written back", func(t *testing.T) {
		start := time.Now()
		testsupport.Eventually(t, 30*time.Second, "a renewed token in the tenant Secret", func() error {
			renewed = tenantKubeconfig(t, tc.Client)
			if KubeconfigToken(renewed) == KubeconfigToken(original) {
				return fmt.Errorf("still the original token")
			}
			return nil
		})
		t.Logf("first renewal written back %s after start", time.Since(start).Round(time.Millisecond))
		c := mustParse(t, renewed)
		if !c.SameServiceAccount(origClaims) || !c.ExpiresAt.After(origClaims.ExpiresAt) || c.ID == origClaims.ID ||
			c.Lifetime() != origClaims.Lifetime() || strings.Join(c.Audiences, ",") != strings.Join(origClaims.Audiences, ",") {
			t.Errorf("renewed claims %+v\noriginal %+v", c, origClaims)
		}
		// Server, CA, context and namespace are as the manager wrote them; only the token differs.
		if want := strings.Replace(string(original), KubeconfigToken(original), KubeconfigToken(renewed), 1); string(renewed) != want {
			t.Errorf("the written kubeconfig differs beyond the token:\n%s\nwant\n%s", renewed, want)
		}
		// Every hub request now carries a renewed token: the API server names the credential.
		testsupport.Eventually(t, 30*time.Second, "hub requests to use the token in the Secret", func() error {
			id, err := credentialID(wrapped)
			if err != nil {
				return err
			}
			if want := "JTI=" + mustParse(t, tenantKubeconfig(t, tc.Client)).ID; id != want {
				return fmt.Errorf("request credential %s, Secret %s", id, want)
			}
			return nil
		})
		if id, _ := credentialID(wrapped); id == "JTI="+origClaims.ID {
			t.Error("hub requests still use the original token")
		}
		// The controller-runtime cache on the hub keeps working.
		lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "after-renewal"}, Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{Addresses: []kubelbv1alpha1.EndpointAddress{{IP: "10.0.0.1"}},
				Ports: []kubelbv1alpha1.EndpointPort{{Port: 30080, Protocol: corev1.ProtocolTCP}}}},
			Ports: []kubelbv1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
		c2, err := client.New(wrapped, client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		if err := c2.Create(bg, lb); err != nil {
			t.Fatalf("creating a LoadBalancer with the renewed token: %v", err)
		}
		testsupport.Eventually(t, 10*time.Second, "the hub cache to see the LoadBalancer", func() error {
			return hubCluster.GetClient().Get(bg, client.ObjectKeyFromObject(lb), &kubelbv1alpha1.LoadBalancer{})
		})
		if got := testutil.ToFloat64(metrics.CCMOperations.WithLabelValues(opToken, metrics.ResultSuccess)) - okBefore; got < 1 {
			t.Errorf("kubelb_ccm_kubelb_operations_total{operation=token,result=success} grew by %v", got)
		}
		if got := testutil.ToFloat64(metrics.CCMClusterConnected); got != 1 {
			t.Errorf("kubelb_ccm_kubelb_cluster_connected = %v after a renewal, want 1", got)
		}
		if logs.find("renewed the hub token") == "" || logs.find("wrote the renewed hub token") == "" {
			t.Errorf("no renewal log lines in %v", logs.lines)
		}
	})

	t.Run("a rejected token is reported, not fatal", func(t *testing.T) {
		// Deleting the ServiceAccount invalidates every token it ever had; the manager re-creates
		// it and writes a kubeconfig with a token for the new one into the hub's Secret.
		if err := hub.Client.Delete(bg, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: ccmSA}}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		testsupport.Eventually(t, 60*time.Second, "kubelb_ccm_kubelb_cluster_connected to drop to 0", func() error {
			if v := testutil.ToFloat64(metrics.CCMClusterConnected); v != 0 {
				return fmt.Errorf("gauge %v", v)
			}
			return nil
		})
		t.Logf("rejection reported %s after the ServiceAccount was deleted", time.Since(start).Round(time.Millisecond))
		if line := logs.find("the hub rejected the ccm's token"); line == "" || !strings.Contains(line, hubNS+"/kubelb-ccm-kubeconfig") {
			t.Errorf("no log line telling what to do; got %q", line)
		}
		select {
		case <-stopped:
			t.Fatal("the manager stopped")
		default:
		}
		if _, err := credentialID(wrapped); !apierrors.IsUnauthorized(err) {
			t.Errorf("a request with the rejected token: %v, want 401", err)
		}
	})

	t.Run("a fresh copy is taken over without a restart", func(t *testing.T) {
		var fresh []byte
		testsupport.Eventually(t, 30*time.Second, "the manager's kubeconfig for the re-created ServiceAccount", func() error {
			fresh = hubKubeconfig(t, hub.Client)
			if c, err := ParseToken(KubeconfigToken(fresh)); err != nil || c.ServiceAccountUID == origClaims.ServiceAccountUID {
				return fmt.Errorf("still the old ServiceAccount (%v)", err)
			}
			return nil
		})
		sec := &corev1.Secret{}
		if err := tc.Client.Get(bg, types.NamespacedName{Namespace: ccmNS, Name: ccmSecretName}, sec); err != nil {
			t.Fatal(err)
		}
		sec.Data[DefaultSecretKey] = fresh
		if err := tc.Client.Update(bg, sec); err != nil {
			t.Fatal(err)
		}
		freshUID := mustParse(t, fresh).ServiceAccountUID
		testsupport.Eventually(t, 60*time.Second, "hub requests to work again", func() error {
			if _, err := credentialID(wrapped); err != nil {
				return err
			}
			if c := mustParse(t, tenantKubeconfig(t, tc.Client)); c.ServiceAccountUID != freshUID {
				return fmt.Errorf("the tenant Secret holds a token of ServiceAccount %s, want %s", c.ServiceAccountUID, freshUID)
			}
			if v := testutil.ToFloat64(metrics.CCMClusterConnected); v != 1 {
				return fmt.Errorf("gauge %v", v)
			}
			return nil
		})
		if logs.find("took over the hub token in the tenant Secret") == "" {
			t.Error("no log line about taking over the fresh token")
		}
	})
}
