package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestHubProxyProtocol: with the real kubelb and ccm binaries and a real Envoy, the platform
// team's Tenant spec.loadBalancer.proxyProtocol (the hub's load balancer, played by the test,
// starts every connection with a PROXY protocol header naming the client):
//   - Service office, with loadBalancerSourceRanges [192.0.2.0/24] and PROXY protocol towards
//     its pods (kubelb.k8c.io/proxy-protocol: v2), serves a connection whose header names
//     192.0.2.7 — its pod gets 192.0.2.7 in Envoy's header —, and refuses one naming
//     198.51.100.9 and one without a header;
//   - Service dns, UDP with source ranges, gets a Warning Event ClientAddressUnknown: Envoy
//     cannot read PROXY protocol on UDP;
//   - the Tenant turning it off reaches Envoy: Service open (no ranges) then serves
//     connections without a header.
func TestHubProxyProtocol(t *testing.T) {
	pair := testenv.StartPair(t)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 1)
	ctx := context.Background()
	hub, tenant := pair.Hub.Client, pair.Tenant.Client

	setProxyProtocol := func(enabled bool) {
		t.Helper()
		updateTenant(t, hub, "a", func(tn *kubelbv1alpha1.Tenant) {
			tn.Spec.LoadBalancer.ProxyProtocol = &kubelbv1alpha1.LoadBalancerProxyProtocol{Enabled: ptr.To(enabled)}
		})
	}
	setProxyProtocol(true)

	office := a.CreateService(framework.LBService{Name: "office", Ports: []corev1.ServicePort{framework.TCPPort("tcp", 80)},
		Mutate: func(s *corev1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
			s.Annotations = map[string]string{kubelbv1alpha1.AnnotationProxyProtocol: "v2"}
		}})
	a.CreateService(framework.LBService{Name: "dns", Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}},
		Mutate: func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"} }})
	open := a.CreateService(framework.LBService{Name: "open", Ports: []corev1.ServicePort{framework.TCPPort("tcp", 80)}})
	pods := a.StartBackends(office)["tcp"]
	a.StartBackends(open)
	for _, s := range []string{"office", "dns", "open"} {
		a.WaitAddress(s, addressTimeout)
	}
	a.StartEnvoy(framework.EnvoyBootstrap)
	officeAddr := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(office)["tcp"])
	openAddr := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(open)["tcp"])

	t.Run("the header's client is the one the source ranges judge and the pods get", func(t *testing.T) {
		testsupport.Eventually(t, time.Minute, "Service office serving the client the hub's header names", func() error {
			return testsupport.ProxiedRoundTrip(officeAddr, testsupport.ProxyV2Header("192.0.2.7"), "ready")
		})
		var before int
		for _, p := range pods {
			before += len(p.ProxySources())
		}
		for _, tc := range []struct {
			name   string
			addr   string
			header []byte
			served bool
		}{
			{"office, a header naming 192.0.2.7", officeAddr, testsupport.ProxyV2Header("192.0.2.7"), true},
			{"office, a header naming 198.51.100.9", officeAddr, testsupport.ProxyV2Header("198.51.100.9"), false},
			{"office, no header", officeAddr, nil, false},
			{"open, a header naming 198.51.100.9", openAddr, testsupport.ProxyV2Header("198.51.100.9"), true},
			{"open, no header", openAddr, nil, false},
		} {
			if err := testsupport.ProxiedRoundTrip(tc.addr, tc.header, "hello"); (err == nil) != tc.served {
				t.Errorf("%s: error %v, want served %v", tc.name, err, tc.served)
			}
		}
		var got []string
		for _, p := range pods {
			got = append(got, p.ProxySources()...)
		}
		if got = got[before:]; !slices.Equal(got, []string{"192.0.2.7:40000"}) {
			t.Errorf("Service office's pods got PROXY headers from %v, want the client 192.0.2.7 once", got)
		}
	})

	t.Run("a UDP Service with source ranges is told they cannot use the header", func(t *testing.T) {
		testsupport.Eventually(t, time.Minute, "a Warning Event ClientAddressUnknown on Service dns", func() error {
			evs := &eventsv1.EventList{}
			if err := tenant.List(ctx, evs, client.InNamespace("default")); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Regarding.Name == "dns" && e.Type == corev1.EventTypeWarning &&
					strings.Contains(e.Note, "ClientAddressUnknown") && strings.Contains(e.Note, "cannot read on UDP") {
					return nil
				}
			}
			return fmt.Errorf("no such Event among %d", len(evs.Items))
		})
	})

	t.Run("the Tenant turning it off reaches Envoy", func(t *testing.T) {
		setProxyProtocol(false)
		testsupport.Eventually(t, time.Minute, "Service open serving a connection without a header", func() error {
			return testsupport.ProxiedRoundTrip(openAddr, nil, "plain")
		})
	})
}
