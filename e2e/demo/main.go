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
	tenant := sys.AddTenant("demo", pair.Tenant, 2)

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
	fmt.Printf("\nEnvoy admin: http://%s  (try /listeners, /clusters)\n", envoy.AdminAddr)
	fmt.Printf("tenant cluster:  %s --kubeconfig %s get svc\n", kubectl, pair.Tenant.Kubeconfig)
	fmt.Printf("hub cluster:     %s --kubeconfig %s get lb,svc -A\n", kubectl, pair.Hub.Kubeconfig)
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
