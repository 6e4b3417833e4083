// Command demo is `make demo`: it starts a local hub and tenant control plane, the kubelb
// manager, the ccm and a real Envoy, onboards a tenant, creates a LoadBalancer Service with a
// backend, and shows the Service's address and a request that went through Envoy. It tears
// everything down on Ctrl-C (or at once with --exit, as its test does).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

func main() {
	exit := flag.Bool("exit", false, "tear down right after the request instead of waiting for Ctrl-C")
	flag.Parse()
	tb := &demoTB{}
	defer tb.teardown()
	if err := run(tb, *exit); err != nil {
		tb.Fatal(err)
	}
}

func run(tb testenv.TB, exit bool) error {
	step("starting the hub and tenant control planes (kube-apiserver + etcd)")
	pair := testenv.StartPair(tb)
	step("starting the kubelb manager on the hub")
	sys := framework.StartSystem(tb, pair.Hub, framework.Options{})
	step("onboarding tenant \"demo\" (Tenant object → namespace, RBAC, kubeconfig) and starting its ccm")
	tenant := sys.AddTenant("demo", pair.Tenant, 2, "--enable-gateway-api")

	step("creating Service default/echo of type LoadBalancer in the tenant cluster")
	svc := tenant.CreateService(framework.LBService{Name: "echo", Ports: []corev1.ServicePort{{Name: "tcp", Port: 80, Protocol: corev1.ProtocolTCP}}})
	step(fmt.Sprintf("starting echo backends on the nodes %v, NodePort %d (what kube-proxy and the pods do)", tenant.NodeIPs, svc.Spec.Ports[0].NodePort))
	tenant.StartBackends(svc)
	step("starting Envoy with the bootstrap the manager generated for the tenant")
	envoy := tenant.StartEnvoy(framework.EnvoyBootstrap)

	address := tenant.WaitAddress("echo", 2*time.Minute)
	listener := tenant.ListenerPorts(svc)["tcp"]
	step("the tenant Service has an address:")
	kubectl := filepath.Join(testenv.AssetsDir(tb), "kubectl")
	out, _ := exec.Command(kubectl, "--kubeconfig", pair.Tenant.Kubeconfig, "get", "service", "echo", "-o", "wide").CombinedOutput()
	fmt.Print(string(out))

	target := fmt.Sprintf("127.0.0.1:%d", listener)
	step(fmt.Sprintf("sending a request through Envoy (hub address %s:80 → Envoy listener %s → node:NodePort)", address, target))
	var reply testsupport.Reply
	var err error
	for i := 0; i < 50; i++ {
		if reply, err = testsupport.TCPRoundTrip(target, "hello kubelb"); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("request through Envoy: %w", err)
	}
	fmt.Printf("    request:  hello kubelb\n    response: %q from Pod %s on node %s\n", reply.Message, reply.Pod, reply.Node)

	if err := httpRoute(tb, pair, tenant, kubectl); err != nil {
		return err
	}
	fmt.Printf("\nEnvoy admin: http://%s  (try /listeners, /clusters)\n", envoy.AdminAddr)
	fmt.Printf("tenant cluster:  %s --kubeconfig %s get svc\n", kubectl, pair.Tenant.Kubeconfig)
	step("kubelb's objects on the hub (kubectl get kubelb -A):")
	out, _ = exec.Command(kubectl, "--kubeconfig", pair.Hub.Kubeconfig, "get", "kubelb", "-A").CombinedOutput()
	fmt.Print(string(out))
	fmt.Printf("hub cluster:     %s --kubeconfig %s get kubelb,svc -A\n", kubectl, pair.Hub.Kubeconfig)
	if exit {
		return nil
	}
	fmt.Println("\nPress Ctrl-C to tear everything down.")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	step("tearing down")
	return nil
}

func step(msg string) { fmt.Printf("==> %s\n", msg) }

// httpRoute shows Layer 7: a Gateway of class kubelb and an HTTPRoute to a ClusterIP Service,
// answered through the same Envoy.
func httpRoute(tb testenv.TB, pair *testenv.Pair, tenant *framework.Tenant, kubectl string) error {
	ctx := context.Background()
	c := pair.Tenant.Client
	step("creating Service default/web (ClusterIP), Gateway default/demo (class kubelb, HTTP :80) and HTTPRoute default/web for demo.example.com")
	tenant.CreateBackendService("default", "web", corev1.ServicePort{Name: "http", Port: 80})
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"},
		Spec: gwv1.GatewaySpec{GatewayClassName: "kubelb", Listeners: []gwv1.Listener{{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80}}}}
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "demo"}}},
			Hostnames:       []gwv1.Hostname{"demo.example.com"},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr.To(gwv1.PortNumber(80))}}}}}},
		}}
	for _, o := range []client.Object{gw, route} {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	step("starting HTTP backends on the NodePort of web-nodeport, the twin the ccm made for the ClusterIP Service")
	tenant.ServeBackend("default", "web", 80, testsupport.StartHTTPBackend)
	if err := c.Get(ctx, client.ObjectKeyFromObject(gw), gw); err != nil {
		return err
	}
	port := tenant.GatewayPorts(string(gw.UID), 80)[80]
	target := testsupport.Loopback(int(port))
	var res framework.HTTPResult
	var err error
	for i := 0; i < 100; i++ {
		if res, err = framework.HTTPRequest(target, "demo.example.com", "/hello", nil, nil); err == nil && res.Status == 200 {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err != nil || res.Status != 200 {
		return fmt.Errorf("HTTP request through Envoy: status %d, %v", res.Status, err)
	}
	step("waiting until the Gateway is Programmed (the hub's verdict, copied back by the ccm)")
	testsupport.Eventually(tb, 2*time.Minute, "Gateway default/demo to be Programmed", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(gw), gw); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions %v", gw.Status.Conditions)
		}
		return nil
	})
	step("the Gateway and the HTTPRoute as the app team sees them:")
	out, _ := exec.Command(kubectl, "--kubeconfig", pair.Tenant.Kubeconfig, "get", "gateway,httproute", "-n", "default").CombinedOutput()
	fmt.Print(string(out))
	step(fmt.Sprintf("GET http://demo.example.com/hello through Envoy (listener %s)", target))
	fmt.Printf("    response: %d %q from Pod %s on node %s\n", res.Status, res.Body, res.Pod, res.Node)
	return nil
}
