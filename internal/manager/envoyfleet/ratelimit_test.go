package envoyfleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// getObj re-reads obj.
func getObj[T client.Object](t *testing.T, c client.Client, obj T) T {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("getting %T %s: %v", obj, obj.GetName(), err)
	}
	return obj
}

// TestRateLimitServiceFollowsTheStore runs the controller against a real API server: a
// tenant with a fleet gets a rate-limit service (Deployment and ClusterIP Service
// kubelb-ratelimit) once Config "default" has a rate-limit store, running the configured
// image with the Redis address, the manager's xDS address and the fleet's client certificate;
// the API server refuses a store whose redisURL is not host:port; a changed image rolls the
// Deployment, an unrelated Config change writes nothing, and the service goes when the store
// is removed and, with the rest of the fleet, when the tenant's last LoadBalancer goes. The
// Envoy pods' hub Services never select the rate-limit pods (other labels).
func TestRateLimitServiceFollowsTheStore(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	cfgKey := &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultConfigName, Namespace: managerNS}}
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}},
		&kubelbv1alpha1.Config{ObjectMeta: cfgKey.ObjectMeta,
			Spec: kubelbv1alpha1.ConfigSpec{EnvoyProxy: kubelbv1alpha1.EnvoyProxy{Replicas: 2, NodeSelector: map[string]string{"kubelb.k8c.io/envoy": "true"}}}},
		tenantNamespace("a"),
	)
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		return SetupWithManager(mgr, Options{Namespace: managerNS, XDSAddress: "xds.kubelb.test:18001"})
	})
	create(t, c, loadBalancer("tenant-a", "lb-a"))
	testsupport.Eventually(t, 20*time.Second, "the fleet of tenant-a", func() error {
		_, err := getDeployment(c, "tenant-a")
		return err
	})
	testenv.WaitControllerIdle(t, controllerName, 1)
	rlDep := func() *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: RateLimitName, Namespace: "tenant-a"}}
	}
	rlSvc := func() *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: RateLimitName, Namespace: "tenant-a"}}
	}
	if err := objects.Gone(c, rlDep()); err != nil {
		t.Fatalf("a rate-limit service without a store: %v", err)
	}

	// The API server refuses a store that is not host:port.
	bad := cfgKey.DeepCopy()
	if err := c.Get(ctx, types.NamespacedName{Namespace: managerNS, Name: bad.Name}, bad); err != nil {
		t.Fatal(err)
	}
	bad.Spec.RateLimit = &kubelbv1alpha1.RateLimitStore{Image: "envoyproxy/ratelimit:3fb70258", RedisURL: "redis://redis:6379"}
	if err := c.Update(ctx, bad); err == nil {
		t.Fatal("the API server took redisURL redis://redis:6379")
	}

	update(t, c, cfgKey.DeepCopy(), func(cfg *kubelbv1alpha1.Config) {
		cfg.Spec.RateLimit = &kubelbv1alpha1.RateLimitStore{Image: "envoyproxy/ratelimit:3fb70258", RedisURL: "redis.kubelb.svc:6379"}
	})
	var dep *appsv1.Deployment
	svc := rlSvc()
	testsupport.Eventually(t, 20*time.Second, "the rate-limit service of tenant-a", func() error {
		dep = rlDep()
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			return err
		}
		return c.Get(ctx, client.ObjectKeyFromObject(svc), svc)
	})
	pod := dep.Spec.Template.Spec
	ctr := pod.Containers[0]
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{
		"REDIS_URL": "redis.kubelb.svc:6379", "REDIS_SOCKET_TYPE": "tcp", "BACKEND_TYPE": "redis",
		"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": "xds.kubelb.test:18001",
		"CONFIG_GRPC_XDS_SERVER_TLS_SAN": "xds.kubelb.test", "CONFIG_GRPC_XDS_NODE_ID": "$(POD_NAME)",
		"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/etc/envoy-xds-tls/tls.crt",
		"GRPC_PORT": "8081",
	} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}
	if ctr.Image != "envoyproxy/ratelimit:3fb70258" || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != pki.ClientSecretName ||
		pod.NodeSelector["kubelb.k8c.io/envoy"] != "true" || *dep.Spec.Replicas != 1 {
		t.Errorf("image %s, volumes %v, node selector %v, replicas %d", ctr.Image, pod.Volumes, pod.NodeSelector, *dep.Spec.Replicas)
	}
	if !ctr.Resources.Limits.Memory().Equal(resource.MustParse("256Mi")) || ctr.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources %v, want the bounded defaults", ctr.Resources)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.ClusterIP == "" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != RateLimitGRPCPort ||
		!IsRateLimitService(svc) {
		t.Errorf("Service %+v", svc.Spec)
	}
	envoyPods := hubnames.EnvoyPodLabels("tenant-a")
	if hubnames.HasAll(dep.Spec.Template.Labels, envoyPods) {
		t.Errorf("the rate-limit pods carry the Envoy pods' labels %v: hub Services would select them", envoyPods)
	}

	// An unrelated Config change writes nothing.
	before := testenv.WaitControllerIdle(t, controllerName, 0)
	dep, svc = getObj(t, c, rlDep()), getObj(t, c, rlSvc())
	update(t, c, cfgKey.DeepCopy(), func(cfg *kubelbv1alpha1.Config) { cfg.Spec.LoadBalancer.Class = ptr.To("metallb") })
	testenv.WaitControllerIdle(t, controllerName, before+1)
	if d, s := getObj(t, c, rlDep()), getObj(t, c, rlSvc()); d.ResourceVersion != dep.ResourceVersion || s.ResourceVersion != svc.ResourceVersion {
		t.Error("the rate-limit service was written although nothing of it changed")
	}

	// A new image rolls the Deployment.
	update(t, c, cfgKey.DeepCopy(), func(cfg *kubelbv1alpha1.Config) { cfg.Spec.RateLimit.Image = "registry.example/ratelimit:v2" })
	testsupport.Eventually(t, 20*time.Second, "the new image", func() error {
		if img := getObj(t, c, rlDep()).Spec.Template.Spec.Containers[0].Image; img != "registry.example/ratelimit:v2" {
			return fmt.Errorf("image %s", img)
		}
		return nil
	})

	// No store: the service goes, the Envoy fleet stays.
	update(t, c, cfgKey.DeepCopy(), func(cfg *kubelbv1alpha1.Config) { cfg.Spec.RateLimit = nil })
	testsupport.Eventually(t, 20*time.Second, "the rate-limit service to be removed", func() error {
		if err := objects.Gone(c, rlDep()); err != nil {
			return err
		}
		return objects.Gone(c, rlSvc())
	})
	if _, err := getDeployment(c, "tenant-a"); err != nil {
		t.Errorf("the Envoy fleet went with the rate-limit service: %v", err)
	}

	// A store again, then the last LoadBalancer goes: everything goes.
	update(t, c, cfgKey.DeepCopy(), func(cfg *kubelbv1alpha1.Config) {
		cfg.Spec.RateLimit = &kubelbv1alpha1.RateLimitStore{Image: "envoyproxy/ratelimit:3fb70258", RedisURL: "[fd00::1]:6379"}
	})
	testsupport.Eventually(t, 20*time.Second, "the rate-limit service again", func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(rlSvc()), rlSvc())
	})
	if err := c.Delete(ctx, loadBalancer("tenant-a", "lb-a")); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 20*time.Second, "the whole fleet to be removed", func() error {
		if err := objects.Gone(c, rlDep()); err != nil {
			return err
		}
		if err := objects.Gone(c, rlSvc()); err != nil {
			return err
		}
		return objects.Gone(c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: WorkloadName, Namespace: "tenant-a"}})
	})
}
