package envoyadmin_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/cli/envoyadmin"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

const tenant = "tenant-shop"

// webLB is the LoadBalancer the ccm mirrors Service shop/web to: port 80 to NodePort
// nodePort on 127.0.0.1, listener port listener.
func webLB(nodePort, listener int32) v1alpha1.LoadBalancer {
	return v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "0b1c", Namespace: tenant,
			Labels: map[string]string{v1alpha1.LabelOriginNamespace: "shop", v1alpha1.LabelOriginName: "web", v1alpha1.LabelOriginResourceKind: "Service"}},
		Spec: v1alpha1.LoadBalancerSpec{
			Endpoints: []v1alpha1.LoadBalancerEndpoints{{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}},
				Ports: []v1alpha1.EndpointPort{{Port: nodePort, Protocol: corev1.ProtocolTCP}}}},
			Ports: []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
		Status: v1alpha1.LoadBalancerStatus{Service: v1alpha1.ServiceStatus{Ports: []v1alpha1.ServicePort{{
			ServicePort: corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP}, UpstreamTargetPort: listener}}}},
	}
}

// TestFetchAndMap serves a LoadBalancer whose NodePort does not answer to a REAL Envoy from
// the real xDS server and reads Envoy's admin interface: the config, the clusters (the host
// unhealthy, exit code) and the stats, each named after the Service it serves.
func TestFetchAndMap(t *testing.T) {
	// A NodePort nobody answers: a port that was free a moment ago.
	dead := testsupport.FreePort(t)
	listener := testsupport.FreePort(t)
	lb := webLB(int32(dead), int32(listener))

	srv := xds.NewServer(testr.New(t), xdstest.New(t).ServerTLS())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = srv.Serve(ctx, lis) }()

	in := translate.Input{Tenant: tenant, LoadBalancers: []v1alpha1.LoadBalancer{lb},
		HubServices: map[string]*corev1.Service{lb.Name: hubService(lb, int32(listener))},
		Options:     translate.Options{ListenerAddress: "127.0.0.1", HealthCheck: translate.HealthCheck{Interval: time.Second, Timeout: 500 * time.Millisecond, UnhealthyThreshold: 1}},
		Policy: translate.EndpointPolicy{Allow: []translate.PolicyRule{
			{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
	}
	if _, err := srv.SetTenant(ctx, tenant, translatetest.Resources(t, in)); err != nil {
		t.Fatal(err)
	}
	b := xdstest.New(t).Bootstrap(t, bootstrap.Options{Tenant: tenant, XDSAddress: lis.Addr().String(), AdminAddress: "127.0.0.1:0"})
	envoy := testsupport.StartEnvoy(t, "envoy-0", b, testsupport.EnvoyOptions{Node: "envoy-0", Concurrency: 1})
	envoy.WaitReady(t, 30*time.Second)
	admin := envoyadmin.HTTPAdmin{BaseURL: "http://" + envoy.AdminAddr}
	names := envoyadmin.NewNames([]v1alpha1.LoadBalancer{lb}, nil)
	const owner = "(LoadBalancer 0b1c (Service shop/web) port tcp-80)"

	testsupport.Eventually(t, 30*time.Second, "the config names the Service", func() error {
		var out bytes.Buffer
		if err := envoyadmin.Config(ctx, admin, names, false, &out); err != nil {
			return err
		}
		for _, want := range []string{"listener 0b1c-tcp-80  " + owner + "  version ", "cluster 0b1c-tcp-80  " + owner} {
			if !strings.Contains(out.String(), want) {
				return fmt.Errorf("config lacks %q:\n%s", want, out.String())
			}
		}
		return nil
	})
	testsupport.Eventually(t, 30*time.Second, "the dead NodePort is unhealthy", func() error {
		var out bytes.Buffer
		bad, err := envoyadmin.Clusters(ctx, admin, names, &out)
		if err != nil {
			return err
		}
		want := "  ✗ 127.0.0.1:" + strconv.Itoa(dead) + " unhealthy (failed_active_health_check)"
		if bad != 1 || !strings.Contains(out.String(), "cluster 0b1c-tcp-80  "+owner) || !strings.Contains(out.String(), want) {
			return fmt.Errorf("%d unhealthy, want 1 and %q:\n%s", bad, want, out.String())
		}
		return nil
	})
	var out bytes.Buffer
	if err := envoyadmin.Stats(ctx, admin, names, "health_check.failure", &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "cluster.shop/web/tcp-80.health_check.failure: ") || !strings.Contains(out.String(), owner) {
		t.Errorf("stats:\n%s", out.String())
	}
	var raw bytes.Buffer
	if err := envoyadmin.Config(ctx, admin, names, true, &raw); err != nil || !strings.Contains(raw.String(), `"configs"`) {
		t.Errorf("raw config dump: %v", err)
	}
	if _, err := admin.Get(ctx, "/no-such-page"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing page: %v", err)
	}
}

func hubService(lb v1alpha1.LoadBalancer, listener int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "envoy-" + lb.Name, Namespace: tenant},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(listener)}}}}
}

// TestPickPod picks the first Ready Envoy pod of the tenant's fleet by name on a real API
// server, and says what to do when there is none.
func TestPickPod(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	c := hub.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil {
		t.Fatal(err)
	}
	if _, err := envoyadmin.PickPod(ctx, c, tenant); err == nil || !strings.Contains(err.Error(), "no Envoy pod in tenant-shop") {
		t.Fatalf("no pods: %v", err)
	}
	pod := func(name string, labels map[string]string, isReady bool) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "envoy", Image: "envoy"}}}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		st := corev1.ConditionFalse
		if isReady {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	envoyLabels := hubnames.EnvoyPodLabels(tenant)
	pod("envoy-a", envoyLabels, false)
	if _, err := envoyadmin.PickPod(ctx, c, tenant); err == nil || !strings.Contains(err.Error(), "none of the 1 Envoy pods of tenant-shop is Ready") {
		t.Fatalf("no Ready pod: %v", err)
	}
	pod("app-b", map[string]string{"app": "web"}, true)
	pod("envoy-c", envoyLabels, true)
	pod("envoy-b", envoyLabels, true)
	got, err := envoyadmin.PickPod(ctx, c, tenant)
	if err != nil || got.Name != "envoy-b" {
		t.Fatalf("picked %v, %v; want envoy-b", got, err)
	}
	if envoyadmin.TenantNamespace("shop") != tenant || envoyadmin.TenantNamespace(tenant) != tenant {
		t.Error("TenantNamespace")
	}
}

// statsAdmin answers /stats with fixed lines.
type statsAdmin string

func (s statsAdmin) Get(context.Context, string) ([]byte, error) { return []byte(s), nil }

// TestStatsOwners: the stats of a LoadBalancer's listener and TCP proxy, and of a Gateway's
// listener and its HTTP connection manager (stat prefix "<ns>/<gateway>/<port>"), name their
// tenant object; Envoy's own stats name none.
func TestStatsOwners(t *testing.T) {
	lb := v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: "0b1c",
		Labels: map[string]string{v1alpha1.LabelOriginNamespace: "shop", v1alpha1.LabelOriginName: "web"}}}
	gw := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "9d2e", Labels: map[string]string{v1alpha1.LabelOriginNamespace: "shop",
		v1alpha1.LabelOriginName: "gw", v1alpha1.LabelOriginResourceKind: "Gateway.gateway.networking.k8s.io"}}}
	names := envoyadmin.NewNames([]v1alpha1.LoadBalancer{lb}, []v1alpha1.Route{gw})
	var out bytes.Buffer
	stats := "listener.shop/web/tcp-80.downstream_cx_total: 2\ntcp.shop/web/tcp-80.downstream_cx_total: 2\n" +
		"http.shop/gw/tcp-8080.downstream_cx_total: 1\nlistener.shop/gw/tcp-8080.downstream_cx_total: 1\nhttp.admin.downstream_cx_total: 5\n"
	if err := envoyadmin.Stats(context.Background(), statsAdmin(stats), names, "", &out); err != nil {
		t.Fatal(err)
	}
	lbOwner, gwOwner := "  (LoadBalancer 0b1c (Service shop/web) port tcp-80)", "  (Route 9d2e (Gateway.gateway.networking.k8s.io shop/gw) tcp-8080)"
	want := "listener.shop/web/tcp-80.downstream_cx_total: 2" + lbOwner + "\ntcp.shop/web/tcp-80.downstream_cx_total: 2" + lbOwner +
		"\nhttp.shop/gw/tcp-8080.downstream_cx_total: 1" + gwOwner + "\nlistener.shop/gw/tcp-8080.downstream_cx_total: 1" + gwOwner +
		"\nhttp.admin.downstream_cx_total: 5\n"
	if out.String() != want {
		t.Errorf("stats:\n%s\nwant:\n%s", out.String(), want)
	}
}
