package tenantside

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// run runs kubectl kubelb with args and returns its output and error.
func run(args ...string) (string, error) {
	var out bytes.Buffer
	root := cli.NewRoot(cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out},
		StatusCommand, cli.Group("check", "checks", CheckTenantCommand))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestTenantSide runs status and check tenant against a real hub and tenant control plane
// with the real manager and ccm: a Service the hub serves, one its limits refuse, an Ingress,
// and the ccm's hub kubeconfig good and with a token the hub does not accept.
func TestTenantSide(t *testing.T) {
	pair := testenv.StartPair(t)
	hub, tc := pair.Hub, pair.Tenant
	sys := framework.StartSystem(t, hub, framework.Options{})
	tn := sys.AddTenant("shop", tc, 1, "--leader-election-namespace", "kube-system", "--enable-gateway-api")
	ctx := t.Context()
	kc := tc.Kubeconfig

	// As the kubelb-ccm chart installs the ccm: its hub kubeconfig in Secret kubelb/kubelb-cluster,
	// its Deployment (with the flags the test's ccm runs with; envtest runs no Pods, so the
	// test plays its ready replica), and the IngressClass kubelb.
	hubSecret := &corev1.Secret{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: tn.Namespace, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, hubSecret); err != nil {
		t.Fatal(err)
	}
	raw := hubSecret.Data[kubelbv1alpha1.CCMKubeconfigSecretKey]
	create(t, tc.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: defaultCCMNamespace}})
	create(t, tc.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: defaultCCMNamespace, Name: "hub-kubeconfig"},
		Data: map[string][]byte{"kubeconfig": raw}})
	playCCMDeployment(t, tc.Client, tn.Namespace)
	create(t, tc.Client, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultClass},
		Spec: networkingv1.IngressClassSpec{Controller: "kubelb.k8c.io/ingress-controller"}})

	web := tn.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}})
	tn.WaitAddress(web.Name, time.Minute)
	waitCondition(t, hub.Client, tn.Namespace, string(web.UID), "Programmed")

	t.Run("status of a served Service: every step ok", func(t *testing.T) {
		out, err := run("--kubeconfig", kc, "-n", "default", "status", "svc/web")
		t.Log("\n" + out)
		if err != nil {
			t.Fatalf("status failed: %v", err)
		}
		for _, want := range []string{"✓ hub LoadBalancer", "✓ hub accepted", "✓ listener ports: 80/TCP→", "✓ hub address", "✓ Envoy accepted", "✓ endpoints", "✓ tenant address", "Ready=True", "every step is ok"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
	})

	t.Run("status of a Service the hub has no reachability verdict on: pending, not failed", func(t *testing.T) {
		// The leader, played: it writes Unknown when its proxies have not reported on the
		// endpoints yet, or when the tenant has more endpoints than they check.
		for _, v := range []reach.Verdict{unknownVerdict(nil), unknownVerdict(map[string][]string{"other": fakeEndpoints(reach.MaxCheckedEndpoints)})} {
			setHubCondition(t, hub.Client, tn.Namespace, string(web.UID), metav1.Condition{Type: condReachable, Status: metav1.ConditionStatus(v.Status), Reason: v.Reason, Message: v.Message})
			var out string
			testsupport.Eventually(t, time.Minute, "status with BackendsReachable "+v.Reason, func() error {
				var err error
				out, err = run("--kubeconfig", kc, "-n", "default", "status", "svc/web")
				for _, want := range []string{"? endpoints: BackendsReachable=Unknown " + v.Reason, "    hint: " + v.Message, "no step fails; unknown: endpoints",
					"kubelb.k8c.io/BackendsReachable=Unknown " + v.Reason} { // the ccm's copy on the Service
					if err != nil || !strings.Contains(out, want) {
						return fmt.Errorf("err %v, output lacks %q:\n%s", err, want, out)
					}
				}
				if strings.Contains(out, "✓ endpoints") || strings.Contains(out, "every step is ok") {
					return fmt.Errorf("output says the endpoints are ok:\n%s", out)
				}
				return nil
			})
			t.Log("\n" + out)
		}
		setHubCondition(t, hub.Client, tn.Namespace, string(web.UID), metav1.Condition{Type: condReachable})
	})

	t.Run("status of a Service over the tenant's limit: the first failing step is the hub's", func(t *testing.T) {
		objects.Update(t, hub.Client, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name}}, func(tenant *kubelbv1alpha1.Tenant) {
			tenant.Spec.Limits.LoadBalancers = ptr.To[int32](1)
		})
		// The hub ranks a tenant's objects by creationTimestamp (whole seconds), then name:
		// "over" must be created in a later second than "web"'s LoadBalancer to be the younger.
		webLB := &kubelbv1alpha1.LoadBalancer{}
		if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: tn.Namespace, Name: string(web.UID)}, webLB); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(webLB.CreationTimestamp.Add(1100 * time.Millisecond)))
		over := tn.CreateService(framework.LBService{Name: "over", Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}})
		// The manager may judge the new LoadBalancer before it sees the lowered limit; the
		// Tenant's change then judges it again.
		waitConditionIs(t, hub.Client, tn.Namespace, string(over.UID), "Ready", metav1.ConditionFalse, "QuotaExceeded")
		out, err := run("--kubeconfig", kc, "-n", "default", "status", "service/over")
		t.Log("\n" + out)
		if err == nil {
			t.Fatal("status succeeded for a Service the hub refuses")
		}
		for _, want := range []string{"✓ hub LoadBalancer", "✗ hub accepted: Ready=False QuotaExceeded", "first failing step: hub accepted", "raise spec.limits"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
	})

	t.Run("status of a Service that does not exist", func(t *testing.T) {
		out, err := run("--kubeconfig", kc, "-n", "default", "status", "svc/nope")
		if err == nil || !strings.Contains(out, "first failing step: tenant Service") {
			t.Fatalf("err %v, output:\n%s", err, out)
		}
	})

	t.Run("status of an Ingress: followed to its hub Route", func(t *testing.T) {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop"},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(kubelbv1alpha1.DefaultClass),
				DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
		create(t, tc.Client, ing)
		var out string
		testsupport.Eventually(t, time.Minute, "the Ingress's hub Route", func() error {
			out, _ = run("--kubeconfig", kc, "-n", "default", "status", "ing/shop")
			if !strings.Contains(out, "✓ hub Route") || !strings.Contains(out, "✓ Envoy accepted") || !strings.Contains(out, "✓ hub address") {
				return fmt.Errorf("output:\n%s", out)
			}
			return nil
		})
		t.Log("\n" + out)
	})

	t.Run("status of a Gateway and an HTTPRoute: followed to their hub Routes", func(t *testing.T) {
		gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"},
			Spec: gwapiv1.GatewaySpec{GatewayClassName: kubelbv1alpha1.DefaultClass, Listeners: []gwapiv1.Listener{{Name: "http", Protocol: gwapiv1.HTTPProtocolType, Port: 80}}}}
		create(t, tc.Client, gw)
		create(t, tc.Client, &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: gwapiv1.HTTPRouteSpec{CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: "gw"}}},
				Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{
					BackendObjectReference: gwapiv1.BackendObjectReference{Name: "web", Port: ptr.To[gwapiv1.PortNumber](80)}}}}}}}})
		for _, c := range []struct{ arg, want string }{
			{"gtw/gw", "✓ hub address"},
			{"httproute/web", "- hub address"},
		} {
			var out string
			testsupport.Eventually(t, time.Minute, c.arg+" followed to the hub", func() error {
				var err error
				out, err = run("--kubeconfig", kc, "-n", "default", "status", c.arg)
				if err != nil || !strings.Contains(out, "✓ hub Route") || !strings.Contains(out, "✓ Envoy accepted") || !strings.Contains(out, c.want) {
					return fmt.Errorf("err %v, output:\n%s", err, out)
				}
				return nil
			})
			t.Log("\n" + out)
		}
	})

	t.Run("check tenant with the ccm's hub kubeconfig: every check ok", func(t *testing.T) {
		out, err := run("--kubeconfig", kc, "check", "tenant")
		t.Log("\n" + out)
		if err != nil {
			t.Fatalf("check tenant failed: %v", err)
		}
		for _, want := range []string{"✓ ccm Deployment", "✓ hub kubeconfig: Secret kubelb/hub-kubeconfig", "✓ hub token: expires in", "✓ hub reachable", "✓ hub permissions", "✓ ccm lease", "✓ node addresses: all 1 serving node(s) have an InternalIP", "✓ IngressClass kubelb", "✓ Gateway API CRDs: Gateway v1.6", "✓ GatewayClass: kubelb"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
	})

	t.Run("check tenant --pre with a token the hub does not accept", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "hub.kubeconfig")
		if err := os.WriteFile(bad, withToken(t, raw, expiredJWT()), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := run("--kubeconfig", kc, "--hub-kubeconfig", bad, "check", "tenant", "--pre")
		t.Log("\n" + out)
		if err == nil {
			t.Fatal("check tenant --pre succeeded with a bad token")
		}
		for _, want := range []string{"✗ hub token: expired", "✗ hub reachable", "does not accept the token", "hint:", "✓ node addresses"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if strings.Contains(out, "ccm lease") {
			t.Error("--pre checked the ccm's lease")
		}
	})
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// playCCMDeployment creates the kubelb-ccm chart's Deployment with the flags the test's ccm
// runs with, and plays its one ready replica.
func playCCMDeployment(t *testing.T, c client.Client, hubNamespace string) {
	t.Helper()
	labels := map[string]string{"app.kubernetes.io/name": ccmAppName, "app.kubernetes.io/instance": "kubelb-ccm"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: defaultCCMNamespace, Name: "kubelb-ccm", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: ccmContainer, Image: "kubelb-ccm", Args: []string{
					"--cluster-name=" + hubNamespace, "--node-address-type=InternalIP", "--leader-election-namespace", "kube-system",
					"--kubelb-kubeconfig=/etc/kubelb/kubeconfig", "--enable-gateway-api"}}},
				Volumes: []corev1.Volume{{Name: ccmKubeconfigVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "hub-kubeconfig", Items: []corev1.KeyToPath{{Key: "kubeconfig", Path: "kubeconfig"}}}}}},
			}}}}
	create(t, c, d)
	d.Status.Replicas, d.Status.ReadyReplicas = 1, 1
	if err := c.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// waitCondition waits until the hub LoadBalancer has a condition of type cond.
func waitCondition(t *testing.T, hub client.Client, ns, name, cond string) {
	t.Helper()
	waitConditionIs(t, hub, ns, name, cond, "", "")
}

// waitConditionIs waits until the LoadBalancer has the condition, with status and reason
// when they are given.
func waitConditionIs(t *testing.T, hub client.Client, ns, name, cond string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("condition %s %s %s on LoadBalancer %s", cond, status, reason, name), func() error {
		lb := &kubelbv1alpha1.LoadBalancer{}
		if err := hub.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, lb); err != nil {
			return err
		}
		for _, c := range lb.Status.Conditions {
			if c.Type == cond && (status == "" || c.Status == status) && (reason == "" || c.Reason == reason) {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", lb.Status.Conditions)
	})
}

// unknownVerdict is the hub's verdict on a LoadBalancer with one cluster of 8 endpoints
// nobody reported on, in a tenant that also has the other clusters (which come first).
func unknownVerdict(other map[string][]string) reach.Verdict {
	clusters := map[string][]string{"web": fakeEndpoints(8)}
	all := map[string][]string{"web": clusters["web"]}
	for c, eps := range other {
		all[c] = eps
	}
	return reach.Decide(clusters, nil, reach.PlanChecks(all))
}

// fakeEndpoints are n endpoint addresses.
func fakeEndpoints(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.9.%d.%d:30080", i/250, i%250)
	}
	return out
}

// setHubCondition sets (or, with only a type, removes) a condition of the hub LoadBalancer,
// as the manager would.
func setHubCondition(t *testing.T, hub client.Client, ns, name string, cond metav1.Condition) {
	t.Helper()
	testsupport.Eventually(t, time.Minute, "setting "+cond.Type+" of LoadBalancer "+name, func() error {
		lb := &kubelbv1alpha1.LoadBalancer{}
		if err := hub.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, lb); err != nil {
			return err
		}
		if cond.Status == "" {
			meta.RemoveStatusCondition(&lb.Status.Conditions, cond.Type)
		} else {
			cond.ObservedGeneration = lb.Generation
			meta.SetStatusCondition(&lb.Status.Conditions, cond)
		}
		return hub.Status().Update(context.Background(), lb)
	})
}

// expiredJWT is// expiredJWT is an unsigned JWT whose exp is an hour ago.
func expiredJWT() string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(fmt.Sprintf(`{"exp":%d}`, time.Now().Add(-time.Hour).Unix()))) + "." + enc([]byte("sig"))
}

// withToken replaces the token of every user of a kubeconfig.
func withToken(t *testing.T, raw []byte, token string) []byte {
	t.Helper()
	kc, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range kc.AuthInfos {
		u.Token = token
	}
	out, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTokenExpiryAndFlags(t *testing.T) {
	if _, found := TokenExpiry("not-a-jwt"); found {
		t.Error("an expiry read from a token that is no JWT")
	}
	exp, found := TokenExpiry(expiredJWT())
	if !found || time.Since(exp) < 59*time.Minute {
		t.Errorf("expiry %v %v", exp, found)
	}
	got := ParseFlags([]string{"/ccm", "--a=1", "--b", "2", "--c", "-d"})
	want := map[string]string{"--a": "1", "--b": "2", "--c": "true", "--d": "true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseFlags = %v, want %v", got, want)
	}
	if _, err := ParseTarget("deployment/x", "default"); err == nil {
		t.Error("deployment/x accepted")
	}
	if got, err := ParseTarget("lset/extra", "shop"); err != nil || got != (Target{Kind: routekind.ListenerSet, Namespace: "shop", Name: "extra"}) {
		t.Errorf("lset/extra = %+v, %v; want the ListenerSet shop/extra", got, err)
	}
	if step := hubServiceStep(routekind.ListenerSet, nil); !strings.Contains(step.Detail+step.Hint, "Gateway's hub Service") {
		t.Errorf("a ListenerSet's hub Service step = %+v; want it to point to its Gateway's", step)
	}
}
