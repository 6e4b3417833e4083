package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

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
		// The chart's admission webhook, reached by URL instead of the chart's Service; the
		// manager keeps its CA bundle with the chart's RBAC.
		AdmissionWebhook: true,
	})

	helm.Install(t, tenant, "kubelb-ccm", "kubelb-ccm", "kubelb", "--set", "kubelb.tenantName=a", "--set", "kubelb.gatewayAPI.enabled=true")
	a := sys.AddTenantWith("a", tenant, framework.TenantOptions{
		Nodes:                   2,
		Kubeconfig:              helm.ImpersonatedKubeconfig(t, tenant, "kubelb", "kubelb-ccm"),
		LeaderElectionNamespace: "kubelb",
		Args:                    []string{"--enable-gateway-api"}, // as the chart passes it for gatewayAPI.enabled
	})

	p := prom.Start(t, map[string][]string{"kubelb": {sys.MetricsAddr}, "ccm": {a.MetricsAddr}})
	p.WaitTargetsUp(t, time.Minute)

	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	a.StartBackends(web)
	a.StartEnvoy(framework.EnvoyBootstrap)
	a.WaitAddress("web", addressTimeout)
	target := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(web)["http"])
	framework.WaitServes(t, target, "a-node-0", "a-node-1")

	// A TLS Secret of an Ingress of class kubelb reaches the hub (ccm → SyncSecret → manager →
	// Secret) with the permissions the charts grant; it feeds the Secret panels.
	waitTLSSecretOnHub(t, hub, a)
	// The Gateway API as the chart enables it: a Gateway and one route of every kind are
	// mirrored (feeding the Layer 7 panels of both dashboards, the Route controller's too).
	waitGatewayAPIOnHub(t, hub, a)

	// Every dashboard query must find the series the running binaries export.
	// The address provider rows stay empty: the charts' defaults turn no provider on (the
	// provider e2es check those rows, TestL4HubNodeIP, TestStandaloneServesOnPoolAddress, ...).
	// The Envoy data plane dashboard reads Envoy's own metrics, which this Prometheus does not
	// scrape (prom.TestDataPlaneDashboardOnRealEnvoy proves it on a real Envoy).
	prom.CheckDashboards(t, testsupport.RepoRoot(), p.URL, prom.CheckOptions{Timeout: time.Minute,
		AllowEmpty: func(q prom.Query) bool {
			return q.Row == managerProvidersRow || q.Row == ccmProvidersRow || q.Dashboard == prom.DataPlaneDashboard
		}})
}

// waitGatewayAPIOnHub creates, in the tenant's namespace shop, a Gateway of class kubelb with
// HTTP, TLS, TCP and UDP listeners, a ListenerSet adding one to it, and one route of every
// kind, and waits until the hub holds a Route for each of them.
func waitGatewayAPIOnHub(t *testing.T, hub *testenv.Cluster, a *framework.Tenant) {
	t.Helper()
	ctx := t.Context()
	backend := func(port int32) gwv1.BackendRef {
		return gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr.To(gwv1.PortNumber(port))}}
	}
	parent := func(section string) gwv1.CommonRouteSpec {
		return gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw", SectionName: ptr.To(gwv1.SectionName(section))}}}
	}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "shop"} }
	objs := []client.Object{
		&corev1.Service{ObjectMeta: meta("web"), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{framework.TCPPort("http", 80), {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}},
		&gwv1.Gateway{ObjectMeta: meta("gw"), Spec: gwv1.GatewaySpec{GatewayClassName: kubelbv1alpha1.DefaultClass,
			AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}}, Listeners: []gwv1.Listener{
				{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80},
				{Name: "tls", Protocol: gwv1.TLSProtocolType, Port: 8443, Hostname: ptr.To(gwv1.Hostname("tls.example.com")),
					TLS: &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModePassthrough)}},
				{Name: "tcp", Protocol: gwv1.TCPProtocolType, Port: 7000},
				{Name: "udp", Protocol: gwv1.UDPProtocolType, Port: 5353},
			}}},
		// A ListenerSet adding a listener to the Gateway (the ccm's ListenerSet panels).
		&gwv1.ListenerSet{ObjectMeta: meta("more"), Spec: gwv1.ListenerSetSpec{ParentRef: gwv1.ParentGatewayReference{Name: "gw"},
			Listeners: []gwv1.ListenerEntry{{Name: "extra", Protocol: gwv1.HTTPProtocolType, Port: 8080, Hostname: ptr.To(gwv1.Hostname("more.example.com"))}}}},
		&gwv1.HTTPRoute{ObjectMeta: meta("web"), Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: parent("http"),
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: backend(80)}}}}}},
		&gwv1.GRPCRoute{ObjectMeta: meta("grpc"), Spec: gwv1.GRPCRouteSpec{CommonRouteSpec: parent("http"), Hostnames: []gwv1.Hostname{"grpc.example.com"},
			Rules: []gwv1.GRPCRouteRule{{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: backend(80)}}}}}},
		&gwv1.TLSRoute{ObjectMeta: meta("tls"), Spec: gwv1.TLSRouteSpec{CommonRouteSpec: parent("tls"), Hostnames: []gwv1.Hostname{"tls.example.com"},
			Rules: []gwv1.TLSRouteRule{{BackendRefs: []gwv1.BackendRef{backend(80)}}}}},
		&gwv1.TCPRoute{ObjectMeta: meta("tcp"), Spec: gwv1.TCPRouteSpec{CommonRouteSpec: parent("tcp"),
			Rules: []gwv1.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{backend(80)}}}}},
		&gwv1.UDPRoute{ObjectMeta: meta("udp"), Spec: gwv1.UDPRouteSpec{CommonRouteSpec: parent("udp"),
			Rules: []gwv1.UDPRouteRule{{BackendRefs: []gwv1.BackendRef{backend(53)}}}}},
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		if err := a.Cluster.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T shop/%s: %v", o, o.GetName(), err)
		}
		if _, ok := o.(*corev1.Service); !ok {
			kinds[fmt.Sprintf("%T", o)[len("*v1."):]] = true
		}
	}
	testsupport.Eventually(t, 2*time.Minute, "a hub Route for the Gateway and every route kind", func() error {
		var routes kubelbv1alpha1.RouteList
		if err := hub.Client.List(ctx, &routes, client.InNamespace(a.Namespace)); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, r := range routes.Items {
			if src := r.Spec.Source.Kubernetes; src != nil {
				seen[src.Route.GetKind()] = true
			}
		}
		for k := range kinds {
			if !seen[k] {
				return fmt.Errorf("no Route of a %s yet (have %v)", k, seen)
			}
		}
		return nil
	})
}
