package envoyfleet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

const managerNS = "kubelb"

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	objects.Create(t, c, objs...)
}

func tenantNamespace(name string) *corev1.Namespace {
	return objects.ManagedNamespace("tenant-" + name)
}

func loadBalancer(ns, name string) *kubelbv1alpha1.LoadBalancer {
	return &kubelbv1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{
				AddressesReference: &corev1.ObjectReference{Name: kubelbv1alpha1.DefaultAddressesName},
				Ports:              []kubelbv1alpha1.EndpointPort{{Port: 30080, Protocol: corev1.ProtocolTCP}},
			}},
			Ports: []kubelbv1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// update re-reads obj, applies change and writes it, retrying on conflicts.
func update[T client.Object](t *testing.T, c client.Client, obj T, change func(T)) {
	t.Helper()
	testsupport.Eventually(t, 10*time.Second, "updating "+obj.GetName(), func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return c.Update(context.Background(), obj)
	})
}

func getDeployment(c client.Client, ns string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: WorkloadName}, d)
}

// validateWithEnvoy runs the real Envoy in validate mode on a bootstrap, as the pods start it,
// with the fleet's client Secret mounted.
func validateWithEnvoy(t *testing.T, c client.Client, bootstrap []byte, cluster string) {
	t.Helper()
	sec := &corev1.Secret{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: cluster, Name: pki.ClientSecretName}, sec); err != nil {
		t.Fatalf("the fleet's client Secret: %v", err)
	}
	bootstrap = xdstest.Mount(t, bootstrap, sec.Data)
	if err := testsupport.ValidateEnvoy(t, bootstrap, "--service-node", "envoy-0", "--service-cluster", cluster); err != nil {
		t.Fatalf("Envoy rejects the bootstrap: %v\n--- bootstrap ---\n%s", err, bootstrap)
	}
}

// TestFleetFollowsLoadBalancersAndSettings runs the controller against a real API server:
// a fleet appears with a tenant's first LoadBalancer, takes replicas, resources and node
// selector from Config and the Tenant, switches to a DaemonSet, writes nothing when nothing
// changed, and goes with the last LoadBalancer; the bootstrap it writes passes the real
// Envoy's validation.
func TestFleetFollowsLoadBalancersAndSettings(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	cpu := resource.MustParse("200m")
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}},
		&kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultConfigName, Namespace: managerNS},
			Spec: kubelbv1alpha1.ConfigSpec{EnvoyProxy: kubelbv1alpha1.EnvoyProxy{
				Replicas:     2,
				NodeSelector: map[string]string{"kubelb.k8c.io/envoy": "true"},
				Resources:    &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}},
			}}},
		tenantNamespace("a"), tenantNamespace("b"),
		&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	)
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		return SetupWithManager(mgr, Options{Namespace: managerNS, XDSAddress: "127.0.0.1:18001"})
	})

	// Tenant b gets a LoadBalancer first; tenant a, without one, gets no fleet.
	create(t, c, loadBalancer("tenant-b", "lb-b"))
	testsupport.Eventually(t, 20*time.Second, "the fleet of tenant-b", func() error {
		_, err := getDeployment(c, "tenant-b")
		return err
	})
	testenv.WaitControllerIdle(t, controllerName, 1)
	if _, err := getDeployment(c, "tenant-a"); !apierrors.IsNotFound(err) {
		t.Fatalf("tenant-a has no LoadBalancer but a fleet: %v", err)
	}

	start := time.Now()
	create(t, c, loadBalancer("tenant-a", "lb-a"))
	var dep *appsv1.Deployment
	testsupport.Eventually(t, 20*time.Second, "the fleet of tenant-a", func() error {
		var err error
		dep, err = getDeployment(c, "tenant-a")
		return err
	})
	t.Logf("Envoy Deployment %s after the first LoadBalancer", time.Since(start).Round(time.Millisecond))
	pod := dep.Spec.Template.Spec
	if *dep.Spec.Replicas != 2 || pod.NodeSelector["kubelb.k8c.io/envoy"] != "true" ||
		!pod.Containers[0].Resources.Requests.Cpu().Equal(cpu) {
		t.Errorf("the Deployment does not follow the Config: replicas %d, nodeSelector %v, resources %v",
			*dep.Spec.Replicas, pod.NodeSelector, pod.Containers[0].Resources)
	}
	if dep.Spec.Template.Labels["app.kubernetes.io/name"] != "envoy" || dep.Spec.Template.Labels["kubelb.k8c.io/tenant"] != "a" {
		t.Errorf("pod labels %v", dep.Spec.Template.Labels)
	}
	if got := testutil.ToFloat64(metrics.ManagerEnvoyProxies.WithLabelValues("a")); got != 2 {
		t.Errorf("kubelb_manager_envoy_proxies_total{tenant=a} = %v, want 2", got)
	}

	// The bootstrap in the ConfigMap is what the real Envoy accepts, for this tenant.
	bootstrap, err := BootstrapFor(ctx, c, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	// Delta xDS unless --envoy-xds-protocol says otherwise (TestOptionsDefaults).
	for _, want := range []string{"cluster: tenant-a", "address: 127.0.0.1", "port_value: 18001", "port_value: 9901", "port_value: 9903", "envoy-ready",
		"port_value: 9904", "envoy-stats", "/stats/prometheus",
		"api_type: DELTA_GRPC"} {
		if !strings.Contains(string(bootstrap), want) {
			t.Errorf("bootstrap lacks %q:\n%s", want, bootstrap)
		}
	}
	validateWithEnvoy(t, c, bootstrap, "tenant-a")

	// The Tenant overrides replicas and resources for itself only.
	depB, _ := getDeployment(c, "tenant-b")
	mem := resource.MustParse("512Mi")
	update(t, c, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, func(tn *kubelbv1alpha1.Tenant) {
		tn.Spec.EnvoyProxy = kubelbv1alpha1.TenantEnvoyProxy{Replicas: ptr.To[int32](4),
			Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: mem}}}
	})
	testsupport.Eventually(t, 20*time.Second, "the Tenant's replicas and resources", func() error {
		d, err := getDeployment(c, "tenant-a")
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 4 || !d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().Equal(mem) {
			return fmt.Errorf("replicas %d resources %v", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Resources)
		}
		return nil
	})
	// Someone scales the Deployment by hand: the manager puts its replicas back.
	update(t, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: WorkloadName, Namespace: "tenant-a"}}, func(d *appsv1.Deployment) {
		d.Spec.Replicas = ptr.To[int32](9)
	})
	testsupport.Eventually(t, 20*time.Second, "the replicas to be restored", func() error {
		d, err := getDeployment(c, "tenant-a")
		if err == nil && *d.Spec.Replicas != 4 {
			err = fmt.Errorf("replicas %d", *d.Spec.Replicas)
		}
		return err
	})

	// A Config change that does not concern the fleet is reconciled without a single write.
	before := testenv.WaitControllerIdle(t, controllerName, 0)
	snapshot := resourceVersions(t, c, "tenant-a", "tenant-b")
	if snapshot["tenant-b/Deployment"] != depB.ResourceVersion {
		t.Errorf("tenant-b's Deployment was written when tenant-a's settings changed")
	}
	update(t, c, &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultConfigName, Namespace: managerNS}},
		func(cfg *kubelbv1alpha1.Config) { cfg.Spec.LoadBalancer.Class = ptr.To("metallb") })
	after := testenv.WaitControllerIdle(t, controllerName, before+2)
	if got := resourceVersions(t, c, "tenant-a", "tenant-b"); fmt.Sprint(got) != fmt.Sprint(snapshot) {
		t.Errorf("%v reconciles wrote objects although nothing changed:\nbefore %v\nafter  %v", after-before, snapshot, got)
	}

	// More LoadBalancers in a tenant that has its fleet leave the fleet alone: not one
	// reconcile (a burst of thousands would otherwise rebuild it once per LoadBalancer).
	before = testenv.WaitControllerIdle(t, controllerName, 0)
	for i := range 5 {
		create(t, c, loadBalancer("tenant-b", fmt.Sprintf("more-%d", i)))
	}
	if after := testenv.WaitControllerIdle(t, controllerName, before); after != before {
		t.Errorf("%v fleet reconciles for 5 more LoadBalancers in a tenant that has its fleet, want none", after-before)
	}

	// DaemonSet mode replaces the Deployments.
	update(t, c, &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultConfigName, Namespace: managerNS}},
		func(cfg *kubelbv1alpha1.Config) { cfg.Spec.EnvoyProxy.UseDaemonset = true })
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		testsupport.Eventually(t, 20*time.Second, "a DaemonSet in "+ns, func() error {
			ds := &appsv1.DaemonSet{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: WorkloadName}, ds); err != nil {
				return err
			}
			if ds.Spec.Template.Labels["kubelb.k8c.io/tenant"] != strings.TrimPrefix(ns, "tenant-") {
				return fmt.Errorf("labels %v", ds.Spec.Template.Labels)
			}
			return objects.Gone(c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: WorkloadName, Namespace: ns}})
		})
	}

	// The last LoadBalancer goes, and the fleet with it; tenant b keeps its own.
	if err := c.Delete(ctx, loadBalancer("tenant-a", "lb-a")); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 20*time.Second, "tenant-a's fleet to be removed", func() error {
		if err := objects.Gone(c, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: WorkloadName, Namespace: "tenant-a"}}); err != nil {
			return err
		}
		if err := objects.Gone(c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: pki.ClientSecretName, Namespace: "tenant-a"}}); err != nil {
			return err
		}
		return objects.Gone(c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: BootstrapConfigMapName, Namespace: "tenant-a"}})
	})
	if err := c.Get(ctx, types.NamespacedName{Namespace: "tenant-b", Name: WorkloadName}, &appsv1.DaemonSet{}); err != nil {
		t.Errorf("tenant-b lost its fleet: %v", err)
	}
	if n := testutil.CollectAndCount(metrics.ManagerEnvoyProxies, "kubelb_manager_envoy_proxies_total"); n != 1 {
		t.Errorf("kubelb_manager_envoy_proxies_total has %d series, want tenant b's only", n)
	}
}

// resourceVersions maps "<namespace>/<kind>" to the resourceVersion of each fleet object.
func resourceVersions(t *testing.T, c client.Client, namespaces ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range namespaces {
		for kind, obj := range map[string]client.Object{
			"ConfigMap":  &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: BootstrapConfigMapName, Namespace: ns}},
			"Deployment": &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: WorkloadName, Namespace: ns}},
			"Secret":     &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: pki.ClientSecretName, Namespace: ns}},
		} {
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Fatalf("%s/%s: %v", ns, kind, err)
			}
			out[ns+"/"+kind] = obj.GetResourceVersion()
		}
	}
	return out
}
