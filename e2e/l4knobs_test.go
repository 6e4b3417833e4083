package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestL4UpstreamSettingsAndIPMode: with the real kubelb and ccm binaries and a real Envoy,
//   - the Tenant's spec.upstream (connect timeout, health check) reaches the tenant's Envoy
//     clusters, and a Service's annotations override it for that Service; an annotation
//     that is not understood is told to the app team as a Warning Event on the Service,
//     and the Tenant's value applies;
//   - a Service with PROXY protocol shows status.loadBalancer.ingress[].ipMode Proxy (the
//     tenant's kube-proxy then sends in-cluster traffic through Envoy, which speaks PROXY
//     protocol), the others VIP; the Service's kubelb.k8c.io/ip-mode annotation and the
//     Tenant's spec.loadBalancer.ipMode choose otherwise.
func TestL4UpstreamSettingsAndIPMode(t *testing.T) {
	pair := testenv.StartPair(t)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 1)
	ctx := context.Background()
	hub, tenant := pair.Hub.Client, pair.Tenant.Client

	updateTenant := func(change func(*kubelbv1alpha1.Tenant)) {
		t.Helper()
		updateTenant(t, hub, "a", change)
	}
	updateTenant(func(tn *kubelbv1alpha1.Tenant) {
		tn.Spec.Upstream = kubelbv1alpha1.UpstreamSettings{
			ConnectTimeout: &metav1.Duration{Duration: 3 * time.Second},
			HealthCheck:    kubelbv1alpha1.UpstreamHealthCheck{Interval: &metav1.Duration{Duration: 7 * time.Second}},
		}
	})

	annotated := func(name string, annotations map[string]string) *corev1.Service {
		return a.CreateService(framework.LBService{Name: name, Ports: []corev1.ServicePort{framework.TCPPort("tcp", 80)},
			Mutate: func(s *corev1.Service) { s.Annotations = annotations }})
	}
	plain := annotated("plain", nil)
	annotated("proxied", map[string]string{kubelbv1alpha1.AnnotationProxyProtocol: "v2"})
	annotated("proxied-vip", map[string]string{kubelbv1alpha1.AnnotationProxyProtocol: "v2", kubelbv1alpha1.AnnotationIPMode: "VIP"})
	tuned := annotated("tuned", map[string]string{
		kubelbv1alpha1.AnnotationConnectTimeout: "250ms", kubelbv1alpha1.AnnotationHealthCheckInterval: "2s"})
	wrong := annotated("wrong", map[string]string{kubelbv1alpha1.AnnotationHealthCheckInterval: "fast"})
	for _, s := range []string{"plain", "proxied", "proxied-vip", "tuned", "wrong"} {
		a.WaitAddress(s, addressTimeout)
	}

	waitIPMode := func(name string, want corev1.LoadBalancerIPMode) {
		t.Helper()
		testsupport.Eventually(t, time.Minute, fmt.Sprintf("ipMode %s on Service %s", want, name), func() error {
			svc := &corev1.Service{}
			if err := tenant.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
				return err
			}
			ing := svc.Status.LoadBalancer.Ingress
			if len(ing) == 0 || ing[0].IP == "" {
				return fmt.Errorf("ingress %+v", ing)
			}
			for _, i := range ing {
				if i.IPMode == nil || *i.IPMode != want {
					return fmt.Errorf("ingress %s has ipMode %v", i.IP, ptr.Deref(i.IPMode, ""))
				}
			}
			return nil
		})
	}

	t.Run("PROXY protocol gives ipMode Proxy, the annotation chooses otherwise", func(t *testing.T) {
		waitIPMode("plain", corev1.LoadBalancerIPModeVIP)
		waitIPMode("proxied", corev1.LoadBalancerIPModeProxy)
		waitIPMode("proxied-vip", corev1.LoadBalancerIPModeVIP)
	})

	t.Run("the Tenant's ipMode applies to Services without the annotation", func(t *testing.T) {
		updateTenant(func(tn *kubelbv1alpha1.Tenant) { tn.Spec.LoadBalancer.IPMode = ptr.To(corev1.LoadBalancerIPModeProxy) })
		waitIPMode("plain", corev1.LoadBalancerIPModeProxy)
		waitIPMode("proxied-vip", corev1.LoadBalancerIPModeVIP)
		updateTenant(func(tn *kubelbv1alpha1.Tenant) { tn.Spec.LoadBalancer.IPMode = nil })
		waitIPMode("plain", corev1.LoadBalancerIPModeVIP)
	})

	t.Run("the Tenant's upstream settings and the Service's annotations reach Envoy", func(t *testing.T) {
		envoy := a.StartEnvoy(framework.EnvoyBootstrap)
		type clusterDump struct {
			Name           string `json:"name"`
			ConnectTimeout string `json:"connect_timeout"`
			HealthChecks   []struct {
				Interval string `json:"interval"`
			} `json:"health_checks"`
		}
		want := map[string][2]string{ // Service → connect timeout, health check interval
			"plain": {"3s", "7s"},
			"tuned": {"0.250s", "2s"},
			"wrong": {"3s", "7s"},
		}
		uids := map[string]string{string(plain.UID): "plain", string(tuned.UID): "tuned", string(wrong.UID): "wrong"}
		testsupport.Eventually(t, time.Minute, "the clusters' options in Envoy", func() error {
			var dump struct { // with ?resource=, each config is one dynamic cluster
				Configs []struct {
					Cluster clusterDump `json:"cluster"`
				} `json:"configs"`
			}
			if err := envoy.ConfigDump("?resource=dynamic_active_clusters", &dump); err != nil {
				return err
			}
			got := map[string][2]string{}
			for _, d := range dump.Configs {
				svc, ok := uids[strings.SplitN(d.Cluster.Name, "-tcp-", 2)[0]]
				if !ok || len(d.Cluster.HealthChecks) != 1 {
					continue
				}
				got[svc] = [2]string{d.Cluster.ConnectTimeout, d.Cluster.HealthChecks[0].Interval}
			}
			for svc, w := range want {
				if got[svc] != w {
					return fmt.Errorf("Service %s: connect timeout, interval %v; want %v", svc, got[svc], w)
				}
			}
			return nil
		})
	})

	t.Run("an annotation that is not understood is a Warning Event on the Service", func(t *testing.T) {
		testsupport.Eventually(t, time.Minute, "a Warning Event naming the annotation on Service wrong", func() error {
			evs := &eventsv1.EventList{}
			if err := tenant.List(ctx, evs, client.InNamespace("default")); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Regarding.Name == "wrong" && e.Type == corev1.EventTypeWarning &&
					strings.Contains(e.Note, kubelbv1alpha1.AnnotationHealthCheckInterval) && strings.Contains(e.Note, "7s applies") {
					return nil
				}
			}
			return fmt.Errorf("no such Event among %d", len(evs.Items))
		})
	})
}

// updateTenant applies change to Tenant name on the hub, retrying conflicts.
func updateTenant(t *testing.T, hub client.Client, name string, change func(*kubelbv1alpha1.Tenant)) {
	t.Helper()
	testsupport.Eventually(t, 30*time.Second, "updating Tenant "+name, func() error {
		tn := &kubelbv1alpha1.Tenant{}
		if err := hub.Get(context.Background(), client.ObjectKey{Name: name}, tn); err != nil {
			return err
		}
		change(tn)
		return hub.Update(context.Background(), tn)
	})
}
