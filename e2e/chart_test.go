package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"

	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/e2e/helm"
	"kubelb.dev/kubelb/e2e/prom"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestL4AsInstalledByHelm installs both Helm charts into real API servers, runs the real
// binaries with exactly the permissions the charts grant (impersonating the charts'
// ServiceAccounts) through an L4 scenario with real traffic, while a real Prometheus scrapes
// both; then every query of every Grafana dashboard must return data.
func TestL4AsInstalledByHelm(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{GatewayAPIChannel: "standard", WithoutKubelbCRDs: true})
	tenant := testenv.Start(t, "tenant", testenv.Options{GatewayAPIChannel: "standard", WithoutKubelbCRDs: true})

	// The manager chart installs the CRDs, the RBAC and Config "default".
	helm.Install(t, hub, "kubelb-manager", "kubelb-manager", framework.ManagerNamespace)
	sys := framework.StartSystem(t, hub, framework.Options{
		ManagerKubeconfig: helm.ImpersonatedKubeconfig(t, hub, framework.ManagerNamespace, "kubelb-manager"),
	})

	helm.Install(t, tenant, "kubelb-ccm", "kubelb-ccm", "kubelb", "--set", "kubelb.tenantName=a")
	a := sys.AddTenantWith("a", tenant, framework.TenantOptions{
		Nodes:                   2,
		Kubeconfig:              helm.ImpersonatedKubeconfig(t, tenant, "kubelb", "kubelb-ccm"),
		LeaderElectionNamespace: "kubelb",
	})

	p := prom.Start(t, map[string][]string{"kubelb": {sys.MetricsAddr}, "ccm": {a.MetricsAddr}})
	p.WaitTargetsUp(t, time.Minute)

	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{tcpPort("http", 80)}})
	a.StartBackends(web)
	a.StartEnvoy(framework.EnvoyBootstrap)
	a.WaitAddress("web", addressTimeout)
	target := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(web)["http"])
	waitServes(t, target, "a-node-0", "a-node-1")

	// A TLS Secret of an Ingress of class kubelb reaches the hub (ccm → SyncSecret → manager →
	// Secret) with the permissions the charts grant; it feeds the Secret panels.
	waitTLSSecretOnHub(t, hub, a)
	// A Route, as a ccm mirrors a tenant Ingress, so that the Route controller's panels
	// have data: it gets the tenant's shared Ingress Service.
	ingress := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: "e2e-ingress"}}
	ingress.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"spec":     map[string]any{"ingressClassName": "kubelb"},
	}}}
	if err := hub.Client.Create(context.Background(), ingress); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, addressTimeout, "the shared Ingress Service", func() error {
		return hub.Client.Get(context.Background(), client.ObjectKey{Namespace: a.Namespace, Name: kubelbv1alpha1.IngressServiceName}, &corev1.Service{})
	})

	// Every dashboard query must find the series the running binaries export.
	prom.CheckDashboards(t, testsupport.RepoRoot(), p.URL, prom.CheckOptions{Timeout: time.Minute})
}
