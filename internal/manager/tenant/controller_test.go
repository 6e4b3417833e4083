package tenant

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/version"
)

const managerNS = "kubelb"

var bg = context.Background()

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(bg, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// update re-reads obj, applies change and writes it, retrying on conflicts.
func update[T client.Object](t *testing.T, c client.Client, obj T, change func(T)) {
	t.Helper()
	testsupport.Eventually(t, 10*time.Second, "updating "+obj.GetName(), func() error {
		if err := c.Get(bg, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return c.Update(bg, obj)
	})
}

func gone(c client.Reader, obj client.Object) error {
	err := c.Get(bg, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%T %s/%s still exists", obj, obj.GetNamespace(), obj.GetName())
}

func loadBalancer(ns, name string, finalizers ...string) *kubelbv1alpha1.LoadBalancer {
	return &kubelbv1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: finalizers},
		Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{
				AddressesReference: &corev1.ObjectReference{Name: kubelbv1alpha1.DefaultAddressesName},
				Ports:              []kubelbv1alpha1.EndpointPort{{Port: 30080, Protocol: corev1.ProtocolTCP}},
			}},
			Ports: []kubelbv1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

func tenantObj(name string) *kubelbv1alpha1.Tenant {
	return &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// waitReady waits for the Tenant to be Ready for its current generation and returns it.
func waitReady(t *testing.T, c client.Client, name string) *kubelbv1alpha1.Tenant {
	t.Helper()
	tn := tenantObj(name)
	testsupport.Eventually(t, 30*time.Second, "Tenant "+name+" to be Ready", func() error {
		if err := c.Get(bg, client.ObjectKeyFromObject(tn), tn); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(tn.Status.Conditions, ConditionReady)
		if tn.Status.Phase != kubelbv1alpha1.TenantPhaseReady || cond == nil || cond.Status != metav1.ConditionTrue ||
			tn.Status.ObservedGeneration != tn.Generation || cond.ObservedGeneration != tn.Generation {
			return fmt.Errorf("phase %q, condition %+v", tn.Status.Phase, cond)
		}
		return nil
	})
	return tn
}

// kubeconfigSecret returns the Secret the manager made for a tenant.
func kubeconfigSecret(t *testing.T, c client.Reader, tenant string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	key := types.NamespacedName{Namespace: "tenant-" + tenant, Name: kubelbv1alpha1.CCMKubeconfigSecretName}
	if err := c.Get(bg, key, s); err != nil {
		t.Fatalf("kubeconfig Secret of %s: %v", tenant, err)
	}
	return s
}

// ccmClient is a client built from the kubeconfig Secret as is, as the ccm uses it.
func ccmClient(t *testing.T, secret *corev1.Secret) (client.WithWatch, *rest.Config, clientcmdapi.Config) {
	t.Helper()
	raw := secret.Data[kubelbv1alpha1.CCMKubeconfigSecretKey]
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		t.Fatalf("the kubeconfig in the Secret is not usable: %v", err)
	}
	parsed, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg, *parsed
}

func expectForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: want 403 Forbidden, got %v", what, err)
	}
}

func expectAllowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: want allowed, got %v", what, err)
	}
}

type hubSetup struct {
	hub        *testenv.Cluster
	kube       kubernetes.Interface
	reconciler *Reconciler
	lbs        *lbFinalizerStandIn
	namespaces *namespaceStandIn
}

// startHub starts a hub API server and the Tenant and Envoy fleet controllers on it, with the
// stand-ins for the controllers envtest and this package do not have.
func startHub(t *testing.T, serverURLOption bool) *hubSetup {
	t.Helper()
	return startHubWith(t, func(opts *Options, hub *testenv.Cluster) {
		if serverURLOption {
			opts.HubAPIServerURL = hub.Config.Host
		}
	})
}

// startHubWith is startHub with the controller's options set by tune.
func startHubWith(t *testing.T, tune func(*Options, *testenv.Cluster)) *hubSetup {
	t.Helper()
	hub := testenv.Start(t, "hub", testenv.Options{})
	var opts Options
	tune(&opts, hub)
	create(t, hub.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}})
	s := &hubSetup{hub: hub, lbs: &lbFinalizerStandIn{}, namespaces: &namespaceStandIn{}}
	var err error
	if s.kube, err = kubernetes.NewForConfig(hub.Config); err != nil {
		t.Fatal(err)
	}
	opts.Namespace = managerNS
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		r, err := newReconciler(mgr, opts)
		if err != nil {
			return err
		}
		s.reconciler = r
		if err := r.setup(mgr); err != nil {
			return err
		}
		if err := envoyfleet.SetupWithManager(mgr, envoyfleet.Options{Namespace: managerNS}); err != nil {
			return err
		}
		if err := s.lbs.setup(mgr); err != nil {
			return err
		}
		return s.namespaces.setup(mgr)
	})
	return s
}

// TestTenantOnboardingIsolationAndDeletion is issue 4's proof on a real API server with real
// RBAC and real ServiceAccount tokens.
func TestTenantOnboardingIsolationAndDeletion(t *testing.T) {
	s := startHub(t, true)
	hub, c := s.hub, s.hub.Client
	config := &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultConfigName, Namespace: managerNS}}
	create(t, c, config)

	start := time.Now()
	create(t, c, tenantObj("a"), tenantObj("b"))
	waitReady(t, c, "a")
	waitReady(t, c, "b")
	t.Logf("two Tenants Ready %s after creation", time.Since(start).Round(time.Millisecond))

	t.Run("objects", func(t *testing.T) {
		checkTenantObjects(t, c, "a")
		if got := testutil.ToFloat64(metrics.ManagerTenants); got != 2 {
			t.Errorf("kubelb_manager_tenants_total = %v, want 2", got)
		}
	})

	secretA := kubeconfigSecret(t, c, "a")
	ccmA, ccmACfg, parsed := ccmClient(t, secretA)
	t.Run("kubeconfig", func(t *testing.T) {
		ctx := parsed.Contexts[parsed.CurrentContext]
		cl := parsed.Clusters[ctx.Cluster]
		if cl.Server != hub.Config.Host || string(cl.CertificateAuthorityData) != string(hub.Config.CAData) || ctx.Namespace != "tenant-a" {
			t.Errorf("server %q (want %q), CA from the manager's config: %v, namespace %q",
				cl.Server, hub.Config.Host, string(cl.CertificateAuthorityData) == string(hub.Config.CAData), ctx.Namespace)
		}
	})

	t.Run("token audiences on the namespace", func(t *testing.T) {
		// The chart's admission policy allows the tenant's own TokenRequests only for these.
		want, err := tokenAudiences(kubeconfigToken(secretA.Data[kubelbv1alpha1.CCMKubeconfigSecretKey]))
		if err != nil {
			t.Fatal(err)
		}
		ns := &corev1.Namespace{}
		if err := c.Get(bg, types.NamespacedName{Name: "tenant-a"}, ns); err != nil {
			t.Fatal(err)
		}
		if got := ns.Annotations[AnnotationTokenAudiences]; got != strings.Join(want, " ") || got == "" {
			t.Errorf("namespace tenant-a: %s=%q, want the audiences of the ccm's token %q", AnnotationTokenAudiences, got, want)
		}
	})
	t.Run("ccm may do its job in its namespace", func(t *testing.T) { checkAllowed(t, ccmA, ccmACfg) })
	t.Run("ccm may do nothing else", func(t *testing.T) { checkForbidden(t, ccmA) })
	t.Run("exact permissions", func(t *testing.T) { checkExactRules(t, ccmA) })
	t.Run("ccm may not write hub status", func(t *testing.T) { checkNoHubStatus(t, c, ccmA) })

	t.Run("Config and Tenant settings reach TenantState", func(t *testing.T) {
		disabled := func(tenant string, want bool) {
			t.Helper()
			testsupport.Eventually(t, 20*time.Second, fmt.Sprintf("TenantState of %s to say disable=%v", tenant, want), func() error {
				ts := &kubelbv1alpha1.TenantState{}
				if err := c.Get(bg, types.NamespacedName{Namespace: "tenant-" + tenant, Name: hubnames.TenantStateName}, ts); err != nil {
					return err
				}
				if ts.Status.LoadBalancer.Disable != want {
					return fmt.Errorf("disable=%v", ts.Status.LoadBalancer.Disable)
				}
				return nil
			})
		}
		update(t, c, tenantObj("a"), func(tn *kubelbv1alpha1.Tenant) { tn.Spec.LoadBalancer.Disable = true })
		disabled("a", true)
		waitReady(t, c, "a")
		testenv.WaitControllerIdle(t, controllerName, 0)
		disabled("b", false)
		update(t, c, config, func(cfg *kubelbv1alpha1.Config) { cfg.Spec.LoadBalancer.Disable = true })
		disabled("b", true)
		update(t, c, config, func(cfg *kubelbv1alpha1.Config) { cfg.Spec.LoadBalancer.Disable = false })
		disabled("b", false)
		disabled("a", true) // the Tenant's own setting still holds
		update(t, c, tenantObj("a"), func(tn *kubelbv1alpha1.Tenant) { tn.Spec.LoadBalancer.Disable = false })
		disabled("a", false)
	})

	t.Run("no writes when nothing changed", func(t *testing.T) {
		before := testenv.WaitControllerIdle(t, controllerName, 0)
		snapshot := tenantResourceVersions(t, c, "a", "b")
		// Re-reconciles every Tenant; the effective settings stay the same.
		update(t, c, config, func(cfg *kubelbv1alpha1.Config) { cfg.Spec.LoadBalancer.Class = ptr.To("metallb") })
		after := testenv.WaitControllerIdle(t, controllerName, before+2)
		if got := tenantResourceVersions(t, c, "a", "b"); fmt.Sprint(got) != fmt.Sprint(snapshot) {
			t.Errorf("%v reconciles wrote objects although nothing changed:\nbefore %v\nafter  %v", after-before, snapshot, got)
		}
	})

	t.Run("token rotation", func(t *testing.T) { checkTokenRotation(t, s, ccmA) })

	t.Run("deletion", func(t *testing.T) { checkDeletion(t, s) })

	t.Run("re-creation", func(t *testing.T) {
		oldNS := secretA.Namespace
		create(t, c, tenantObj("a"))
		waitReady(t, c, "a")
		checkTenantObjects(t, c, "a")
		ccm, _, _ := ccmClient(t, kubeconfigSecret(t, c, "a"))
		expectAllowed(t, "listing LoadBalancers in the re-created tenant-a", ccm.List(bg, &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace(oldNS)))
		var lbs kubelbv1alpha1.LoadBalancerList
		if err := c.List(bg, &lbs, client.InNamespace("tenant-a")); err != nil || len(lbs.Items) != 0 {
			t.Errorf("the re-created namespace has %d old LoadBalancers (%v)", len(lbs.Items), err)
		}
	})
}

func checkTenantObjects(t *testing.T, c client.Client, tenant string) {
	t.Helper()
	tn := tenantObj(tenant)
	if err := c.Get(bg, client.ObjectKeyFromObject(tn), tn); err != nil {
		t.Fatal(err)
	}
	nsName := "tenant-" + tenant
	ns := &corev1.Namespace{}
	if err := c.Get(bg, types.NamespacedName{Name: nsName}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels[kubelbv1alpha1.LabelManagedBy] != kubelbv1alpha1.LabelManagedByValue {
		t.Errorf("namespace labels %v", ns.Labels)
	}
	if owner := metav1.GetControllerOf(ns); owner == nil || owner.UID != tn.UID || owner.Kind != "Tenant" {
		t.Errorf("namespace owner %+v, want Tenant %s", owner, tn.UID)
	}
	if !slices.Contains(tn.Finalizers, kubelbv1alpha1.CleanupFinalizer) {
		t.Errorf("Tenant finalizers %v", tn.Finalizers)
	}
	sa := &corev1.ServiceAccount{}
	role := &rbacv1.Role{}
	rb := &rbacv1.RoleBinding{}
	for _, x := range []struct {
		name string
		obj  client.Object
	}{{ServiceAccountName, sa}, {RoleName, role}, {RoleBindingName, rb}} {
		if err := c.Get(bg, types.NamespacedName{Namespace: nsName, Name: x.name}, x.obj); err != nil {
			t.Errorf("%T %s: %v", x.obj, x.name, err)
		}
	}
	if fmt.Sprint(role.Rules) != fmt.Sprint(CCMRules()) {
		t.Errorf("Role rules %v", role.Rules)
	}
	if rb.RoleRef.Name != RoleName || len(rb.Subjects) != 1 || rb.Subjects[0].Name != ServiceAccountName || rb.Subjects[0].Namespace != nsName {
		t.Errorf("RoleBinding %+v %+v", rb.RoleRef, rb.Subjects)
	}
	secret := kubeconfigSecret(t, c, tenant)
	life, ok := lifetimeFromAnnotations(secret.Annotations)
	if !ok || life.ExpiresAt.Sub(life.IssuedAt) < 23*time.Hour || secret.Annotations[AnnotationServiceAccountUID] != string(sa.UID) {
		t.Errorf("Secret annotations %v", secret.Annotations)
	}
	ts := &kubelbv1alpha1.TenantState{}
	if err := c.Get(bg, types.NamespacedName{Namespace: nsName, Name: hubnames.TenantStateName}, ts); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(ts.Status.Conditions, TenantStateReady)
	if ts.Status.Version != version.Get() || cond == nil || cond.Status != metav1.ConditionTrue || ts.Status.LastUpdated.IsZero() {
		t.Errorf("TenantState status %+v", ts.Status)
	}
}

// checkAllowed does, with the ccm's credentials, everything a ccm does in its namespace.
func checkAllowed(t *testing.T, ccm client.WithWatch, cfg *rest.Config) {
	ns := "tenant-a"
	lb := loadBalancer(ns, "svc-uid-1")
	expectAllowed(t, "create LoadBalancer", ccm.Create(bg, lb))
	expectAllowed(t, "get LoadBalancer", ccm.Get(bg, client.ObjectKeyFromObject(lb), lb))
	expectAllowed(t, "list LoadBalancers", ccm.List(bg, &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace(ns)))
	lb.Labels = map[string]string{kubelbv1alpha1.LabelOriginName: "web"}
	expectAllowed(t, "update LoadBalancer", ccm.Update(bg, lb))
	expectAllowed(t, "patch LoadBalancer", ccm.Patch(bg, lb, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`))))
	addr := &kubelbv1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultAddressesName, Namespace: ns},
		Spec: kubelbv1alpha1.AddressesSpec{Addresses: []kubelbv1alpha1.EndpointAddress{{IP: "127.0.0.2"}}}}
	expectAllowed(t, "create Addresses", ccm.Create(bg, addr))
	addr.Spec.Addresses = append(addr.Spec.Addresses, kubelbv1alpha1.EndpointAddress{IP: "127.0.0.3"})
	expectAllowed(t, "update Addresses", ccm.Update(bg, addr))
	ss := &kubelbv1alpha1.SyncSecret{ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: ns}, Data: map[string][]byte{"k": []byte("v")}}
	expectAllowed(t, "create SyncSecret", ccm.Create(bg, ss))
	expectAllowed(t, "delete SyncSecret", ccm.Delete(bg, ss))
	expectAllowed(t, "list Routes", ccm.List(bg, &kubelbv1alpha1.RouteList{}, client.InNamespace(ns)))
	ts := &kubelbv1alpha1.TenantState{}
	expectAllowed(t, "get TenantState", ccm.Get(bg, types.NamespacedName{Namespace: ns, Name: hubnames.TenantStateName}, ts))
	w, err := ccm.Watch(bg, &kubelbv1alpha1.TenantStateList{}, client.InNamespace(ns))
	expectAllowed(t, "watch TenantStates", err)
	if w != nil {
		w.Stop()
	}
	expectAllowed(t, "delete LoadBalancer", ccm.Delete(bg, lb))
	// Renewing its own token (TokenRequest for its own ServiceAccount), which then works.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountName, Namespace: ns}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(MinTokenTTL / time.Second))}}
	expectAllowed(t, "request a token for its own ServiceAccount", ccm.SubResource("token").Create(bg, sa, tr))
	if tr.Status.Token != "" {
		renewedCfg := rest.CopyConfig(cfg)
		renewedCfg.BearerToken = tr.Status.Token
		renewed, err := client.New(renewedCfg, client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		expectAllowed(t, "list LoadBalancers with the renewed token", renewed.List(bg, &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace(ns)))
	}
}

// checkNoHubStatus proves that a tenant cannot write the status the manager keeps on the hub
// (allocated listener ports, addresses, conditions): access reviews of the ccm's
// ServiceAccount, as the API server's authorizer answers them, deny update and patch of every
// status subresource in its own namespace while allowing what the ccm does; and real writes
// with the ccm's token are refused.
func checkNoHubStatus(t *testing.T, admin client.Client, ccm client.WithWatch) {
	ns := "tenant-a"
	user := "system:serviceaccount:" + ns + ":" + ServiceAccountName
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	review := func(resource, subresource, verb string) bool {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: kubelbv1alpha1.GroupVersion.Group, Version: kubelbv1alpha1.GroupVersion.Version,
				Resource: resource, Subresource: subresource, Name: "x",
			},
		}}
		if err := admin.Create(bg, sar); err != nil {
			t.Fatalf("access review %s/%s %s: %v", resource, subresource, verb, err)
		}
		return sar.Status.Allowed
	}
	for _, res := range []string{"loadbalancers", "routes", "addresses", "syncsecrets", "tenantstates"} {
		for _, verb := range []string{"update", "patch"} {
			if review(res, "status", verb) {
				t.Errorf("the ccm may %s %s/status in its namespace; only the manager may", verb, res)
			}
		}
	}
	for _, res := range []string{"loadbalancers", "routes", "addresses", "syncsecrets"} {
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			if !review(res, "", verb) {
				t.Errorf("the ccm may not %s %s in its namespace", verb, res)
			}
		}
	}
	for _, verb := range []string{"get", "list", "watch"} {
		if !review("tenantstates", "", verb) {
			t.Errorf("the ccm may not %s tenantstates in its namespace", verb)
		}
	}

	// Real writes with the ccm's token: a forged listener port and address are refused.
	lb := loadBalancer(ns, "forger")
	expectAllowed(t, "create LoadBalancer", ccm.Create(bg, lb))
	defer func() { _ = admin.Delete(bg, lb) }()
	lb.Status.Service.Ports = []kubelbv1alpha1.ServicePort{{ServicePort: corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP}, UpstreamTargetPort: 10001}}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.0.0.9"}}
	expectForbidden(t, "update LoadBalancer status", ccm.Status().Update(bg, lb))
	expectForbidden(t, "patch LoadBalancer status", ccm.Status().Patch(bg, lb,
		client.RawPatch(types.MergePatchType, []byte(`{"status":{"service":{"ports":[{"port":80,"upstreamTargetPort":10001}]}}}`))))
	for _, obj := range []client.Object{
		&kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "forger", Namespace: ns}},
		&kubelbv1alpha1.SyncSecret{ObjectMeta: metav1.ObjectMeta{Name: "forger", Namespace: ns}},
		&kubelbv1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: "forger", Namespace: ns}},
	} {
		kind := fmt.Sprintf("%T", obj)
		expectForbidden(t, "patch "+kind+" status", ccm.Status().Patch(bg, obj,
			client.RawPatch(types.MergePatchType, []byte(`{"status":{"conditions":[]}}`))))
	}
	// Status sent with the object itself is dropped by the API server (status subresource).
	got := &kubelbv1alpha1.LoadBalancer{}
	if err := admin.Get(bg, client.ObjectKeyFromObject(lb), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Service.Ports) > 0 || len(got.Status.LoadBalancer.Ingress) > 0 {
		t.Errorf("the ccm's status reached the hub: %+v", got.Status)
	}
}

// checkForbidden tries, with the ccm's credentials, what a tenant must never do.
func checkForbidden(t *testing.T, ccm client.WithWatch) {
	expectForbidden(t, "list LoadBalancers in tenant-b", ccm.List(bg, &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace("tenant-b")))
	expectForbidden(t, "create a LoadBalancer in tenant-b", ccm.Create(bg, loadBalancer("tenant-b", "intruder")))
	expectForbidden(t, "list LoadBalancers in all namespaces", ccm.List(bg, &kubelbv1alpha1.LoadBalancerList{}))
	expectForbidden(t, "get TenantState of tenant-b", ccm.Get(bg, types.NamespacedName{Namespace: "tenant-b", Name: hubnames.TenantStateName}, &kubelbv1alpha1.TenantState{}))
	expectForbidden(t, "read its own kubeconfig Secret", ccm.Get(bg, types.NamespacedName{Namespace: "tenant-a", Name: kubelbv1alpha1.CCMKubeconfigSecretName}, &corev1.Secret{}))
	expectForbidden(t, "list Secrets in tenant-a", ccm.List(bg, &corev1.SecretList{}, client.InNamespace("tenant-a")))
	expectForbidden(t, "list Secrets in tenant-b", ccm.List(bg, &corev1.SecretList{}, client.InNamespace("tenant-b")))
	expectForbidden(t, "list Secrets in all namespaces", ccm.List(bg, &corev1.SecretList{}))
	expectForbidden(t, "list Services in tenant-a", ccm.List(bg, &corev1.ServiceList{}, client.InNamespace("tenant-a")))
	expectForbidden(t, "create a Service in tenant-a", ccm.Create(bg, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "tenant-a"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}))
	expectForbidden(t, "list Services in all namespaces", ccm.List(bg, &corev1.ServiceList{}))
	expectForbidden(t, "create a Tenant", ccm.Create(bg, tenantObj("evil")))
	expectForbidden(t, "list Tenants", ccm.List(bg, &kubelbv1alpha1.TenantList{}))
	expectForbidden(t, "update its Tenant", ccm.Update(bg, tenantObj("a")))
	expectForbidden(t, "list Nodes", ccm.List(bg, &corev1.NodeList{}))
	expectForbidden(t, "list Namespaces", ccm.List(bg, &corev1.NamespaceList{}))
	expectForbidden(t, "get its Namespace", ccm.Get(bg, types.NamespacedName{Name: "tenant-a"}, &corev1.Namespace{}))
	expectForbidden(t, "create a Namespace", ccm.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-evil"}}))
	expectForbidden(t, "read the Config", ccm.Get(bg, types.NamespacedName{Namespace: managerNS, Name: kubelbv1alpha1.DefaultConfigName}, &kubelbv1alpha1.Config{}))
	expectForbidden(t, "create a TenantState", ccm.Create(bg, &kubelbv1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "tenant-a"}}))
	ts := &kubelbv1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantStateName, Namespace: "tenant-a"}}
	expectForbidden(t, "update its TenantState status", ccm.Status().Patch(bg, ts, client.RawPatch(types.MergePatchType, []byte(`{"status":{"loadBalancer":{"disable":false}}}`))))
	expectForbidden(t, "delete its RoleBinding", ccm.Delete(bg, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: RoleBindingName, Namespace: "tenant-a"}}))
	expectForbidden(t, "widen its Role", ccm.Patch(bg, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: RoleName, Namespace: "tenant-a"}},
		client.RawPatch(types.MergePatchType, []byte(`{"rules":[{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}]}`))))
	expectForbidden(t, "create Events", ccm.Create(bg, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "tenant-a"}}))
	expectForbidden(t, "list Deployments (the Envoy fleet)", ccm.List(bg, &appsv1.DeploymentList{}, client.InNamespace("tenant-a")))
	expectForbidden(t, "delete all LoadBalancers at once", ccm.DeleteAllOf(bg, &kubelbv1alpha1.LoadBalancer{}, client.InNamespace("tenant-a")))
	// Its own ServiceAccount only: no token for any other identity, in its namespace or another.
	for _, sa := range []*corev1.ServiceAccount{
		{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "tenant-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kubelb-envoy", Namespace: "tenant-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountName, Namespace: "tenant-b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kubelb", Namespace: managerNS}},
	} {
		expectForbidden(t, "request a token for ServiceAccount "+sa.Namespace+"/"+sa.Name,
			ccm.SubResource("token").Create(bg, sa, &authenticationv1.TokenRequest{}))
	}
	expectForbidden(t, "create a ServiceAccount", ccm.Create(bg, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "tenant-a"}}))
	expectForbidden(t, "get its ServiceAccount", ccm.Get(bg, types.NamespacedName{Namespace: "tenant-a", Name: ServiceAccountName}, &corev1.ServiceAccount{}))
}

// checkExactRules asks the API server what the ccm may do in its namespace (what
// "kubectl auth can-i --list" shows): the Role's rules (kubelb's kinds, and a token for its
// own ServiceAccount), plus only the self-review rules every authenticated user has.
func checkExactRules(t *testing.T, ccm client.WithWatch) {
	review := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "tenant-a"}}
	if err := ccm.Create(bg, review); err != nil {
		t.Fatal(err)
	}
	var kubelb []string
	for _, r := range review.Status.ResourceRules {
		for _, g := range r.APIGroups {
			switch g {
			case kubelbv1alpha1.GroupVersion.Group, corev1.GroupName:
				kubelb = append(kubelb, fmt.Sprint(g, r.Resources, r.ResourceNames, r.Verbs))
			case authorizationv1.GroupName, authenticationv1.GroupName:
				// selfsubjectaccessreviews, selfsubjectrulesreviews, selfsubjectreviews
				for _, res := range r.Resources {
					if !strings.HasPrefix(res, "selfsubject") {
						t.Errorf("unexpected rule %v", r)
					}
				}
			default:
				t.Errorf("unexpected rule %v", r)
			}
		}
	}
	var want []string
	for _, r := range CCMRules() {
		want = append(want, fmt.Sprint(r.APIGroups[0], r.Resources, r.ResourceNames, r.Verbs))
	}
	slices.Sort(kubelb)
	slices.Sort(want)
	if !slices.Equal(kubelb, want) {
		t.Errorf("rules of the ccm:\n got %v\nwant %v", kubelb, want)
	}
	if len(review.Status.NonResourceRules) > 0 {
		t.Logf("non-resource rules every authenticated user has: %v", review.Status.NonResourceRules)
	}
}

// checkTokenRotation: a token due for refresh is replaced, a deleted Secret is re-made, and a
// re-created ServiceAccount (which invalidates every old token) gets a new token at once.
func checkTokenRotation(t *testing.T, s *hubSetup, ccm client.WithWatch) {
	c := s.hub.Client
	ns := "tenant-a"
	tokenOf := func() (string, *corev1.Secret) {
		sec := &corev1.Secret{}
		if err := c.Get(bg, types.NamespacedName{Namespace: ns, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, sec); err != nil {
			return "", nil
		}
		return kubeconfigToken(sec.Data[kubelbv1alpha1.CCMKubeconfigSecretKey]), sec
	}
	waitNewToken := func(old string) *corev1.Secret {
		t.Helper()
		var sec *corev1.Secret
		testsupport.Eventually(t, 20*time.Second, "a new token", func() error {
			var tok string
			tok, sec = tokenOf()
			if tok == "" || tok == old {
				return fmt.Errorf("token unchanged")
			}
			return nil
		})
		return sec
	}
	works := func(what string, sec *corev1.Secret) {
		t.Helper()
		fresh, _, _ := ccmClient(t, sec)
		expectAllowed(t, what, fresh.List(bg, &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace(ns)))
	}

	// 1. The recorded lifetime says 80% has passed: the next reconcile replaces the token.
	tok0, sec := tokenOf()
	update(t, c, sec, func(sec *corev1.Secret) {
		sec.Annotations[AnnotationTokenIssuedAt] = time.Now().Add(-23 * time.Hour).UTC().Format(time.RFC3339)
		sec.Annotations[AnnotationTokenExpiresAt] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	})
	sec = waitNewToken(tok0)
	life, _ := lifetimeFromAnnotations(sec.Annotations)
	if in := RefreshIn(time.Now(), life.IssuedAt, life.ExpiresAt); in < 19*time.Hour {
		t.Errorf("the new token is due for refresh in %s", in)
	}
	works("the rotated kubeconfig", sec)
	expectAllowed(t, "the previous token until it expires", ccm.List(bg, &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace(ns)))

	// 2. Deleting the Secret forces a new one.
	tok1, sec := tokenOf()
	if err := c.Delete(bg, sec); err != nil {
		t.Fatal(err)
	}
	sec = waitNewToken(tok1)
	works("the re-made kubeconfig", sec)

	// 3. A re-created ServiceAccount invalidates old tokens; the manager notices by UID. It
	// re-creates the ServiceAccount only once the API server has stopped accepting the old
	// tokens (it caches them for 10 s): a revoked token, which may request tokens for its
	// ServiceAccount by name, never gets one for the new ServiceAccount.
	tok2, _ := tokenOf()
	old, _, _ := ccmClient(t, sec)
	oldSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountName, Namespace: ns}}
	expectAllowed(t, "the token before revocation", old.List(bg, &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace(ns)))
	if err := c.Delete(bg, oldSA); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	sawRevoked := false
	testsupport.Eventually(t, 30*time.Second, "a new token for the re-created ServiceAccount", func() error {
		tr := &authenticationv1.TokenRequest{}
		if err := old.SubResource("token").Create(bg, oldSA, tr); err == nil {
			t.Errorf("%s after revocation, the revoked token got a new token", time.Since(deleted).Round(time.Millisecond))
		}
		if tn := tenantObj("a"); c.Get(bg, client.ObjectKeyFromObject(tn), tn) == nil {
			if cond := meta.FindStatusCondition(tn.Status.Conditions, ConditionReady); cond != nil && cond.Reason == ReasonServiceAccountRevoked {
				sawRevoked = true
			}
		}
		if tok, _ := tokenOf(); tok == "" || tok == tok2 {
			return fmt.Errorf("token unchanged")
		}
		return nil
	})
	_, sec = tokenOf()
	t.Logf("new token %s after the ServiceAccount was deleted", time.Since(deleted).Round(time.Millisecond))
	if time.Since(deleted) < serviceAccountRecreateDelay {
		t.Errorf("the ServiceAccount was re-created %s after its deletion, before %s", time.Since(deleted), serviceAccountRecreateDelay)
	}
	if !sawRevoked {
		t.Errorf("the Tenant never showed reason %s while waiting", ReasonServiceAccountRevoked)
	}
	testsupport.Eventually(t, 30*time.Second, "the old token to be rejected (the API server caches valid tokens for 10s)", func() error {
		err := old.List(bg, &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace(ns))
		if !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("old token: %v", err)
		}
		return nil
	})
	works("the kubeconfig of the re-created ServiceAccount", sec)
	waitReady(t, c, "a")
}

// watchEvent is one watch event of an object in the tenant namespace, with the etcd revision it
// happened at, so the order of deletions across kinds can be compared exactly.
type watchEvent struct {
	kind, name string
	typ        watch.EventType
	deleting   bool
	rv         uint64
}

type recorder struct {
	mu     sync.Mutex
	events []watchEvent
}

func (r *recorder) watch(t *testing.T, c client.WithWatch, kind string, list client.ObjectList, opts ...client.ListOption) {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	w, err := c.Watch(ctx, list, opts...)
	if err != nil {
		t.Fatalf("watching %s: %v", kind, err)
	}
	t.Cleanup(func() { cancel(); w.Stop() })
	go func() {
		for e := range w.ResultChan() {
			obj, ok := e.Object.(client.Object)
			if !ok {
				continue
			}
			rv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
			r.mu.Lock()
			r.events = append(r.events, watchEvent{kind: kind, name: obj.GetName(), typ: e.Type, deleting: !obj.GetDeletionTimestamp().IsZero(), rv: rv})
			r.mu.Unlock()
		}
	}()
}

// first returns the revision of the first event of kind matching, or 0.
func (r *recorder) first(kind string, match func(watchEvent) bool) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.kind == kind && match(e) {
			return e.rv
		}
	}
	return 0
}

// last returns the revision of the last event of kind matching, or 0.
func (r *recorder) last(kind string, match func(watchEvent) bool) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var rv uint64
	for _, e := range r.events {
		if e.kind == kind && match(e) && e.rv > rv {
			rv = e.rv
		}
	}
	return rv
}

func deleted(e watchEvent) bool  { return e.typ == watch.Deleted }
func deleting(e watchEvent) bool { return e.typ == watch.Modified && e.deleting }

// checkDeletion deletes Tenant a while it has LoadBalancers (held by their finalizer) and an
// Envoy fleet, and proves the order of the cleanup and that tenant b is untouched.
func checkDeletion(t *testing.T, s *hubSetup) {
	c := s.hub.Client
	create(t, c,
		loadBalancer("tenant-a", "lb-1", kubelbv1alpha1.CleanupFinalizer),
		loadBalancer("tenant-a", "lb-2", kubelbv1alpha1.CleanupFinalizer),
		loadBalancer("tenant-b", "lb-1", kubelbv1alpha1.CleanupFinalizer),
		&kubelbv1alpha1.SyncSecret{ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "tenant-a"}, Data: map[string][]byte{"k": []byte("v")}},
	)
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		testsupport.Eventually(t, 20*time.Second, "the Envoy fleet of "+ns, func() error {
			return c.Get(bg, types.NamespacedName{Namespace: ns, Name: envoyfleet.WorkloadName}, &appsv1.Deployment{})
		})
	}
	testenv.WaitControllerIdle(t, controllerName, 0)
	tenantB := allObjects(t, c, "tenant-b")

	wc, err := client.NewWithWatch(s.hub.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	in := client.InNamespace("tenant-a")
	rec.watch(t, wc, "LoadBalancer", &kubelbv1alpha1.LoadBalancerList{}, in)
	rec.watch(t, wc, "SyncSecret", &kubelbv1alpha1.SyncSecretList{}, in)
	rec.watch(t, wc, "Deployment", &appsv1.DeploymentList{}, in)
	rec.watch(t, wc, "ConfigMap", &corev1.ConfigMapList{}, in)
	rec.watch(t, wc, "RoleBinding", &rbacv1.RoleBindingList{}, in)
	rec.watch(t, wc, "Role", &rbacv1.RoleList{}, in)
	rec.watch(t, wc, "ServiceAccount", &corev1.ServiceAccountList{}, in)
	rec.watch(t, wc, "Secret", &corev1.SecretList{}, in)
	rec.watch(t, wc, "TenantState", &kubelbv1alpha1.TenantStateList{}, in)
	rec.watch(t, wc, "Namespace", &corev1.NamespaceList{}, client.MatchingFields{"metadata.name": "tenant-a"})

	ccm, _, _ := ccmClient(t, kubeconfigSecret(t, c, "a"))
	if err := c.Delete(bg, tenantObj("a")); err != nil {
		t.Fatal(err)
	}

	// While the LoadBalancers' finalizers hold, the Tenant waits and says why; the ccm has
	// lost its access; the fleet, the rest of the RBAC and the namespace are still there.
	waitForTenantObjects(t, c, "a", func(message string) error {
		t.Logf("while waiting: %s", message)
		return nil
	})
	expectForbidden(t, "the ccm of a terminating tenant lists LoadBalancers", ccm.List(bg, &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace("tenant-a")))
	for name, obj := range map[string]client.Object{
		"Deployment": &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: envoyfleet.WorkloadName, Namespace: "tenant-a"}},
		"Role":       &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: RoleName, Namespace: "tenant-a"}},
		"Secret":     &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.CCMKubeconfigSecretName, Namespace: "tenant-a"}},
		"Namespace":  &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}},
	} {
		if err := c.Get(bg, client.ObjectKeyFromObject(obj), obj); err != nil || !obj.GetDeletionTimestamp().IsZero() {
			t.Errorf("%s went before the LoadBalancers: %v", name, err)
		}
	}

	start := time.Now()
	s.lbs.release.Store(true)
	testsupport.Eventually(t, 30*time.Second, "Tenant a to be gone", func() error { return gone(c, tenantObj("a")) })
	testsupport.Eventually(t, 10*time.Second, "namespace tenant-a to be gone", func() error {
		return gone(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}})
	})
	t.Logf("Tenant a gone %s after its LoadBalancers were released", time.Since(start).Round(time.Millisecond))
	if left := s.namespaces.left(); len(left) > 0 {
		t.Errorf("the namespace was deleted with kubelb objects still in it: %v", left)
	}

	// The order, by etcd revision.
	rbGone := rec.first("RoleBinding", deleted)
	lbsDeleting := rec.first("LoadBalancer", deleting)
	lbsGone := max(rec.last("LoadBalancer", deleted), rec.last("SyncSecret", deleted))
	fleetGone := min(rec.first("Deployment", deleted), rec.first("ConfigMap", deleted))
	fleetLast := max(rec.last("Deployment", deleted), rec.last("ConfigMap", deleted))
	accessGone := min(rec.first("Role", deleted), rec.first("ServiceAccount", deleted), rec.first("Secret", deleted), rec.first("TenantState", deleted))
	accessLast := max(rec.last("Role", deleted), rec.last("ServiceAccount", deleted), rec.last("Secret", deleted), rec.last("TenantState", deleted))
	nsDeleting := rec.first("Namespace", deleting)
	order := []struct {
		step string
		rv   uint64
	}{
		{"ccm access revoked (RoleBinding deleted)", rbGone},
		{"LoadBalancers marked for deletion", lbsDeleting},
		{"LoadBalancers and SyncSecrets gone", lbsGone},
		{"Envoy fleet deletion starts", fleetGone},
		{"Envoy fleet gone", fleetLast},
		{"RBAC, kubeconfig and TenantState deletion starts", accessGone},
		{"RBAC, kubeconfig and TenantState gone", accessLast},
		{"namespace deletion starts", nsDeleting},
	}
	for _, o := range order {
		if o.rv == 0 {
			t.Errorf("step %q was not observed", o.step)
		}
		t.Logf("revision %d: %s", o.rv, o.step)
	}
	// Within a step (e.g. the fleet's Deployment and ConfigMap) any order is fine; between
	// steps, each starts only after the previous one is complete.
	for _, pair := range [][2]int{{0, 1}, {1, 2}, {2, 3}, {4, 5}, {6, 7}} {
		before, after := order[pair[0]], order[pair[1]]
		if before.rv >= after.rv {
			t.Errorf("%q (revision %d) did not happen before %q (revision %d)", before.step, before.rv, after.step, after.rv)
		}
	}

	// Tenant b: not a single write.
	if got := allObjects(t, c, "tenant-b"); fmt.Sprint(got) != fmt.Sprint(tenantB) {
		t.Errorf("tenant-b was touched:\nbefore %v\nafter  %v", tenantB, got)
	}
	// The gauge is set by the reconcile that finds the Tenant gone, which may run after the
	// API server already answered that it is.
	testsupport.Eventually(t, 30*time.Second, "kubelb_manager_tenants_total to count one Tenant", func() error {
		if got := testutil.ToFloat64(metrics.ManagerTenants); got != 1 {
			return fmt.Errorf("kubelb_manager_tenants_total = %v, want 1", got)
		}
		return nil
	})
}

// allObjects maps "kind/name" to "uid/resourceVersion" for everything in a namespace that
// kubelb makes or the ccm mirrors, and the namespace itself.
func allObjects(t *testing.T, c client.Client, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	nsObj := &corev1.Namespace{}
	if err := c.Get(bg, types.NamespacedName{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	out["Namespace"] = string(nsObj.UID) + "/" + nsObj.ResourceVersion
	for _, list := range []client.ObjectList{
		&kubelbv1alpha1.LoadBalancerList{}, &kubelbv1alpha1.TenantStateList{}, &appsv1.DeploymentList{},
		&corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
	} {
		if err := c.List(bg, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		items, _ := meta.ExtractList(list)
		for _, item := range items {
			o := item.(client.Object)
			out[fmt.Sprintf("%T/%s", list, o.GetName())] = string(o.GetUID()) + "/" + o.GetResourceVersion()
		}
	}
	return out
}

// tenantResourceVersions is allObjects for several tenants plus their Tenant objects.
func tenantResourceVersions(t *testing.T, c client.Client, tenants ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range tenants {
		for k, v := range allObjects(t, c, "tenant-"+name) {
			out[name+"/"+k] = v
		}
		tn := tenantObj(name)
		if err := c.Get(bg, client.ObjectKeyFromObject(tn), tn); err != nil {
			t.Fatal(err)
		}
		out[name+"/Tenant"] = tn.ResourceVersion
	}
	return out
}

// TestTenantKubeconfigFromClusterInfo: without --tenant-kubeconfig-server the Tenant says
// what is missing (condition and Event); once kube-public/cluster-info is published as kubeadm
// does, the kubeconfig takes server and CA from it and works.
func TestTenantKubeconfigFromClusterInfo(t *testing.T) {
	s := startHub(t, false)
	c := s.hub.Client
	create(t, c, tenantObj("x"))
	testsupport.Eventually(t, 20*time.Second, "Tenant x to report the missing server URL", func() error {
		tn := tenantObj("x")
		if err := c.Get(bg, client.ObjectKeyFromObject(tn), tn); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(tn.Status.Conditions, ConditionReady)
		if tn.Status.Phase != kubelbv1alpha1.TenantPhaseFailed || cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonNoHubServerURL {
			return fmt.Errorf("phase %q condition %+v", tn.Status.Phase, cond)
		}
		return nil
	})
	testsupport.Eventually(t, 10*time.Second, "a Warning Event NoHubServerURL", func() error {
		var evs eventsv1.EventList
		if err := c.List(bg, &evs); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Tenant" && e.Regarding.Name == "x" && e.Reason == ReasonNoHubServerURL && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no such Event among %d", len(evs.Items))
	})
	// The namespace, RBAC and TenantState exist already; only the kubeconfig is missing.
	if err := c.Get(bg, types.NamespacedName{Namespace: "tenant-x", Name: hubnames.TenantStateName}, &kubelbv1alpha1.TenantState{}); err != nil {
		t.Errorf("TenantState: %v", err)
	}

	// Publish cluster-info the way kubeadm does: a kubeconfig with one unnamed cluster.
	info := clientcmdapi.NewConfig()
	info.Clusters[""] = &clientcmdapi.Cluster{Server: s.hub.Config.Host, CertificateAuthorityData: s.hub.Config.CAData}
	raw, err := clientcmd.Write(*info)
	if err != nil {
		t.Fatal(err)
	}
	create(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ClusterInfoNamespace, Name: ClusterInfoName},
		Data: map[string]string{"kubeconfig": string(raw)}})
	waitReady(t, c, "x")
	secret := kubeconfigSecret(t, c, "x")
	ccm, cfg, _ := ccmClient(t, secret)
	if cfg.Host != s.hub.Config.Host || string(cfg.CAData) != string(s.hub.Config.CAData) {
		t.Errorf("kubeconfig server %q CA match %v", cfg.Host, string(cfg.CAData) == string(s.hub.Config.CAData))
	}
	expectAllowed(t, "create a LoadBalancer with the cluster-info kubeconfig", ccm.Create(bg, loadBalancer("tenant-x", "lb")))
	expectForbidden(t, "list Secrets with the cluster-info kubeconfig", ccm.List(bg, &corev1.SecretList{}, client.InNamespace("tenant-x")))

	// The ccm's own cache setup (cmd/ccm: only its namespace) syncs with these credentials.
	ccmCache, err := cache.New(cfg, cache.Options{Scheme: testenv.Scheme(), DefaultNamespaces: map[string]cache.Config{"tenant-x": {}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	go func() { _ = ccmCache.Start(ctx) }()
	for _, obj := range []client.Object{&kubelbv1alpha1.LoadBalancer{}, &kubelbv1alpha1.TenantState{}} {
		if _, err := ccmCache.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, 20*time.Second)
	defer syncCancel()
	if !ccmCache.WaitForCacheSync(syncCtx) {
		t.Fatal("the ccm's namespaced cache does not sync with its credentials")
	}
	if err := ccmCache.Get(ctx, types.NamespacedName{Namespace: "tenant-x", Name: hubnames.TenantStateName}, &kubelbv1alpha1.TenantState{}); err != nil {
		t.Errorf("TenantState from the ccm's cache: %v", err)
	}
}
