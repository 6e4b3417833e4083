package tenantside

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/cli/checkhub"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// nobodysClass is a load-balancer class no implementation on the test's hub serves.
const nobodysClass = "example.com/nobody"

// TestBrokenSetups builds four of issue 27's broken setups on real control planes with the
// real manager and ccm (and a real Envoy for the NACK), runs kubectl kubelb as the persona
// would, and checks that the output names the problem and says what to do. The hub gives
// addresses with the manager's IPAM (a pool for Services without a class); tenant "bare"
// asks for a class nobody serves.
//   - no load balancer on the hub: the app team's `status svc/web` and the platform team's
//     `check hub`;
//   - a missing certificate on an Ingress: `status ing/shop`;
//   - a NACKed listener (its port taken on the Envoy host): `status svc/blocked` and
//     `check hub`;
//   - an expired tenant token in the ccm's Secret: `check tenant` and `status svc/web`.
//
// Each output is logged whole (it goes into the closing note).
func TestBrokenSetups(t *testing.T) {
	pair := testenv.StartPair(t)
	bareCluster := testenv.Start(t, "bare", testenv.Options{GatewayAPIChannel: "standard", WithoutKubelbCRDs: true})
	hub := pair.Hub
	ctx := t.Context()
	if err := hub.Client.Create(ctx, &kubelbv1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: kubelbv1alpha1.AddressPoolSpec{Default: true, Addresses: []string{"127.0.93.1-127.0.93.8"}}}); err != nil {
		t.Fatal(err)
	}
	sys := framework.StartSystem(t, hub, framework.Options{ExtraManagerArgs: []string{"--address-provider=ipam"},
		HubLB: framework.HubLBOptions{KubeProxyOnly: true}})
	playManagerDeployment(t, hub.Client, sys.ManagerArgs)
	shop := sys.AddTenant("shop", pair.Tenant, 1, "--enable-gateway-api")
	bare := sys.AddTenant("bare", bareCluster, 1)
	for _, tn := range []*framework.Tenant{shop, bare} {
		installHubKubeconfig(t, hub.Client, tn, nil)
	}

	t.Run("no load balancer on the hub", func(t *testing.T) {
		tenant := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: bare.Name}}
		objects.Update(t, hub.Client, tenant, func(tenant *kubelbv1alpha1.Tenant) {
			tenant.Spec.LoadBalancer.Class = ptr.To(nobodysClass)
		})
		testsupport.Eventually(t, time.Minute, "the manager to see the Tenant's class", func() error {
			if err := hub.Client.Get(ctx, client.ObjectKey{Name: bare.Name}, tenant); err != nil {
				return err
			}
			if tenant.Status.ObservedGeneration != tenant.Generation {
				return fmt.Errorf("generation %d observed %d", tenant.Generation, tenant.Status.ObservedGeneration)
			}
			return nil
		})
		web := bare.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
		waitConditionIs(t, hub.Client, bare.Namespace, string(web.UID), "Ready", metav1.ConditionFalse, reasonWaitingForAddress)
		out, err := run("--kubeconfig", bare.Cluster.Kubeconfig, "-n", "default", "status", "svc/web")
		t.Log("app team: kubectl kubelb status svc/web\n" + out)
		wantFailure(t, out, err, "✗ hub accepted: Ready=False WaitingForAddress", `load-balancer class "`+nobodysClass+`"`, "✗ hub address: no address",
			"first failing step: hub accepted", "--address-provider-class="+nobodysClass, "spec.loadBalancer.class of your Tenant")
		// The tenant's Envoy fleet comes with its first LoadBalancer.
		testsupport.Eventually(t, time.Minute, "the Envoy fleet of "+bare.Namespace, func() error {
			deps := &appsv1.DeploymentList{}
			if err := hub.Client.List(ctx, deps, client.InNamespace(bare.Namespace)); err != nil || len(deps.Items) == 0 {
				return fmt.Errorf("no Deployment yet (%v)", err)
			}
			return nil
		})
		out, err = runCheckHub(t, hub.Client, hub.Kubeconfig)
		t.Log("platform team: kubectl kubelb check hub\n" + out)
		wantFailure(t, out, err, "✓ tenant bare: Ready", "✗ hub Service addresses: 1 hub Service of class "+nobodysClass+" waiting for an address",
			"nobody serves Services of class "+nobodysClass, "run a load balancer for them on the hub")
	})

	web := shop.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	shop.WaitAddress(web.Name, time.Minute)

	t.Run("a NACKed listener", func(t *testing.T) {
		blocked := shop.CreateService(framework.LBService{Name: "blocked", Ports: []corev1.ServicePort{framework.TCPPort("http", 8080)}})
		shop.WaitAddress(blocked.Name, time.Minute)
		// The listener's port is taken on the Envoy host before the tenant's Envoy starts:
		// Envoy cannot bind it and rejects the listener (e2e/faults TestPartialNACK).
		port := shop.ListenerPorts(blocked)["http"]
		hold, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatalf("taking the listener port %d: %v", port, err)
		}
		defer hold.Close()
		shop.StartEnvoy(framework.EnvoyBootstrap)
		waitConditionIs(t, hub.Client, shop.Namespace, string(blocked.UID), "Programmed", metav1.ConditionFalse, "Rejected")
		out, err := run("--kubeconfig", shop.Cluster.Kubeconfig, "-n", "default", "status", "svc/blocked")
		t.Log("app team: kubectl kubelb status svc/blocked\n" + out)
		wantFailure(t, out, err, "✓ hub accepted", "✓ hub address", "✗ Envoy accepted: Programmed=False Rejected",
			fmt.Sprint(port), "Envoy rejection: proxy ", "first failing step: Envoy accepted", "tell the platform team")
		out, err = runCheckHub(t, hub.Client, hub.Kubeconfig)
		t.Log("platform team: kubectl kubelb check hub\n" + out)
		wantFailure(t, out, err, "✓ tenant shop: Ready", "✗ rejected configurations: "+shop.Namespace+": envoy-shop rejected Listener", "cannot bind")
	})

	t.Run("a missing certificate on an Ingress", func(t *testing.T) {
		create(t, shop.Cluster.Client, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop"},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(kubelbv1alpha1.DefaultClass),
				TLS: []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}},
				Rules: []networkingv1.IngressRule{{Host: "shop.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
				}}}}}})
		var out string
		var err error
		// Until the hub judged the Route and the ccm copied the address onto the Ingress.
		testsupport.Eventually(t, time.Minute, "status to name the missing certificate", func() error {
			out, err = run("--kubeconfig", shop.Cluster.Kubeconfig, "-n", "default", "status", "ing/shop")
			if !strings.Contains(out, "shop-tls") || !strings.Contains(out, "✓ hub address") {
				return fmt.Errorf("output:\n%s", out)
			}
			return nil
		})
		t.Log("app team: kubectl kubelb status ing/shop\n" + out)
		wantFailure(t, out, err, "✓ hub Route", "✓ hub accepted", "✗ Envoy accepted: Programmed=False CertificateNotFound", "Secret default/shop-tls",
			"create the TLS Secret", "first failing step: Envoy accepted")
		if strings.Contains(out, "rejected the configuration") || strings.Contains(out, "Envoy rejection:") {
			t.Error("status blames an Envoy rejection (of another object) for a missing certificate")
		}
	})

	t.Run("an expired tenant token", func(t *testing.T) {
		// The ccm's Secret holds a token the hub no longer accepts (it expired an hour ago).
		installHubKubeconfig(t, hub.Client, shop, func(raw []byte) []byte { return withToken(t, raw, expiredJWT()) })
		out, err := run("--kubeconfig", shop.Cluster.Kubeconfig, "check", "tenant")
		t.Log("tenant admin: kubectl kubelb check tenant\n" + out)
		wantFailure(t, out, err, "✗ hub token: expired", "✗ hub reachable", "does not accept the token", "fresh copy of the hub's Secret", "✓ GatewayClass")
		out, err = run("--kubeconfig", shop.Cluster.Kubeconfig, "-n", "default", "status", "svc/web")
		t.Log("app team: kubectl kubelb status svc/web\n" + out)
		wantFailure(t, out, err, "✗ hub LoadBalancer", "provide credentials", "does not accept the token", "first failing step: hub LoadBalancer")
	})
}

// installHubKubeconfig does what the kubelb-ccm chart does in the tenant cluster: the ccm's
// hub kubeconfig in Secret kubelb/hub-kubeconfig (changed by edit, when given) and the ccm's
// Deployment naming it, with one played ready replica.
func installHubKubeconfig(t *testing.T, hub client.Client, tn *framework.Tenant, edit func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	src := &corev1.Secret{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: tn.Namespace, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, src); err != nil {
		t.Fatal(err)
	}
	raw := src.Data[kubelbv1alpha1.CCMKubeconfigSecretKey]
	if edit != nil {
		raw = edit(raw)
	}
	c := tn.Cluster.Client
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: defaultCCMNamespace, Name: "hub-kubeconfig"}}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sec), sec); err == nil {
		sec.Data = map[string][]byte{"kubeconfig": raw}
		if err := c.Update(ctx, sec); err != nil {
			t.Fatal(err)
		}
		return
	}
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: defaultCCMNamespace}})
	sec.Data = map[string][]byte{"kubeconfig": raw}
	create(t, c, sec)
	playCCMDeployment(t, c, tn.Namespace)
}

// playManagerDeployment creates the Deployment the kubelb chart would make for the manager
// process the test runs, with the status a kubelet would give it.
func playManagerDeployment(t *testing.T, c client.Client, args []string) {
	t.Helper()
	labels := map[string]string{"app.kubernetes.io/name": "kubelb-manager"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: "kubelb-manager"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "kubelb-manager:test", Args: args}}}}}}
	create(t, c, dep)
	dep.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	if err := c.Status().Update(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
}

// runCheckHub runs `kubectl kubelb check hub` with the hub's admin kubeconfig, after playing
// the kubelet for the tenants' Envoy fleets (envtest runs no pods): every replica ready.
func runCheckHub(t *testing.T, hub client.Client, kubeconfig string) (string, error) {
	t.Helper()
	deps := &appsv1.DeploymentList{}
	if err := hub.List(context.Background(), deps); err != nil {
		t.Fatal(err)
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		if !hubnames.IsTenantNamespace(d.Namespace) {
			continue
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, ReadyReplicas: n, AvailableReplicas: n, UpdatedReplicas: n}
		if err := hub.Status().Update(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	root := cli.NewRoot(cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, cli.Group("check", "checks", checkhub.Command))
	root.SetArgs([]string{"check", "hub", "--kubeconfig", kubeconfig, "--manager-namespace", framework.ManagerNamespace})
	err := root.Execute()
	return out.String(), err
}

// wantFailure checks that a command failed and that its output holds each of want.
func wantFailure(t *testing.T, out string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Error("the command succeeded")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
}
