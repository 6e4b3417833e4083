package translate_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestHubProxyProtocolThroughEnvoy: the platform team's spec.loadBalancer.proxyProtocol,
// through a real Envoy fed over xDS, from loopback. LoadBalancer office has
// spec.sourceRanges [192.0.2.0/24] and sends PROXY protocol v2 to the tenant's nodes (its
// annotation); LoadBalancer open has neither. A TCP client whose connection starts with a
// PROXY v2 header naming 192.0.2.7, as the hub's load balancer writes it, is served by office
// (echoed by the loopback backend, which gets 192.0.2.7 in Envoy's own header: the client's
// address travels on); a header naming 198.51.100.9 (outside the ranges) is refused (no filter
// chain matches), and so is a connection without a header (the listener filter closes it),
// on open too. With optional: true, a connection without a header is served as from its peer
// (127.0.0.1): by open, not by office, whose ranges judge that address. The access log names
// the header's client. A UDP port with source ranges is told that they are judged by the
// datagrams' source (ClientAddressUnknown).
func TestHubProxyProtocolThroughEnvoy(t *testing.T) {
	backend := testsupport.StartTCPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "echo"})
	backendPort := int32(netip.MustParseAddrPort(backend.Addr).Port())
	for _, optional := range []bool{false, true} {
		t.Run(fmt.Sprintf("optional %v", optional), func(t *testing.T) {
			tenant := "tenant-hub-proxy"
			if optional {
				tenant += "-optional"
			}
			officePort, dnsPort, openPort := testsupport.FreePort(t), testsupport.FreePort(t), testsupport.FreePort(t)
			lb := func(name string, ranges []string, ports ...v1alpha1.LoadBalancerPort) v1alpha1.LoadBalancer {
				eps := make([]v1alpha1.EndpointPort, 0, len(ports))
				for _, p := range ports {
					eps = append(eps, v1alpha1.EndpointPort{Name: p.Name, Protocol: p.Protocol, Port: backendPort})
				}
				return v1alpha1.LoadBalancer{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelOriginName: name, v1alpha1.LabelOriginNamespace: "shop"}},
					Spec: v1alpha1.LoadBalancerSpec{Type: corev1.ServiceTypeLoadBalancer, SourceRanges: ranges, Ports: ports,
						Endpoints: []v1alpha1.LoadBalancerEndpoints{{AddressesReference: &corev1.ObjectReference{Name: "default"}, Ports: eps}}},
				}
			}
			hubService := func(name string, ports ...corev1.ServicePort) *corev1.Service {
				return &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: "envoy-" + name, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelLoadBalancerName: name}},
					Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Ports: ports},
				}
			}
			office := lb("office", []string{"192.0.2.0/24"},
				v1alpha1.LoadBalancerPort{Name: "echo", Protocol: corev1.ProtocolTCP, Port: 7},
				v1alpha1.LoadBalancerPort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
			office.Annotations = map[string]string{v1alpha1.AnnotationProxyProtocol: "v2"}
			open := lb("open", nil, v1alpha1.LoadBalancerPort{Name: "echo", Protocol: corev1.ProtocolTCP, Port: 7})
			in := translate.Input{
				Tenant:    tenant,
				Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}},
				Options: translate.Options{ListenerAddress: "127.0.0.1", HealthCheck: translate.HealthCheck{Disabled: true}, AccessLog: true,
					LoadBalancerProxyProtocol: translate.HubProxyProtocol{Enabled: true, Optional: optional}},
				Policy:        translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
				LoadBalancers: []v1alpha1.LoadBalancer{office, open},
				HubServices: map[string]*corev1.Service{
					"office": hubService("office", corev1.ServicePort{Name: "echo", Protocol: corev1.ProtocolTCP, Port: 7, TargetPort: intstr.FromInt(officePort)},
						corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt(dnsPort)}),
					"open": hubService("open", corev1.ServicePort{Name: "echo", Protocol: corev1.ProtocolTCP, Port: 7, TargetPort: intstr.FromInt(openPort)}),
				},
			}
			_, problems, res, err := translatetest.Pipeline(in)
			if err != nil {
				t.Fatal(err)
			}
			// office's UDP port: its annotation's PROXY protocol towards the nodes is not spoken
			// there (as without the setting), and its ranges cannot use the hub's header.
			var reasons []string
			for _, p := range problems {
				if p.Severity != ir.SeverityWarning || p.Object.Section != "UDP/53 (dns)" ||
					(p.Reason == translate.ReasonClientAddressUnknown) != strings.Contains(p.Message, "cannot read on UDP") {
					t.Errorf("unexpected problem %v", p)
				}
				reasons = append(reasons, p.Reason)
			}
			if slices.Sort(reasons); !slices.Equal(reasons, []string{translate.ReasonClientAddressUnknown, translate.ReasonProxyProtocolUnsupported}) {
				t.Errorf("problems %v, want ClientAddressUnknown and ProxyProtocolUnsupported on office's UDP port", problems)
			}
			envoy := xdsenvoy.Start(t, "hub-proxy", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1,
				Args: []string{"--file-flush-interval-msec", "100"}}) // access logs
			officeAddr, openAddr := testsupport.Loopback(officePort), testsupport.Loopback(openPort)
			testsupport.Eventually(t, 30*time.Second, "Envoy to serve a client behind the hub's PROXY header", func() error {
				for _, addr := range []string{officeAddr, openAddr} {
					if err := testsupport.ProxiedRoundTrip(addr, testsupport.ProxyV2Header("192.0.2.7"), "ready"); err != nil {
						return err
					}
				}
				return nil
			})

			before := len(backend.ProxySources())
			for _, tc := range []struct {
				name   string
				addr   string
				header []byte
				served bool
			}{
				{"office, a header naming 192.0.2.7", officeAddr, testsupport.ProxyV2Header("192.0.2.7"), true},
				{"office, a v1 header naming 192.0.2.8", officeAddr, []byte("PROXY TCP4 192.0.2.8 127.0.0.1 40000 80\r\n"), true},
				{"office, a header naming 198.51.100.9", officeAddr, testsupport.ProxyV2Header("198.51.100.9"), false},
				{"office, no header (127.0.0.1)", officeAddr, nil, false},
				{"open, a header naming 198.51.100.9", openAddr, testsupport.ProxyV2Header("198.51.100.9"), true},
				{"open, no header", openAddr, nil, optional},
			} {
				err := testsupport.ProxiedRoundTrip(tc.addr, tc.header, "hello")
				if (err == nil) != tc.served {
					t.Errorf("%s: error %v, want served %v", tc.name, err, tc.served)
				}
			}
			// office's backend got the client's address in Envoy's PROXY header: the one the
			// hub's header named, never Envoy's peer.
			if got, want := backend.ProxySources()[before:], []string{"192.0.2.7:40000", "192.0.2.8:40000"}; !slices.Equal(got, want) {
				t.Errorf("the backend got PROXY headers from %v, want %v", got, want)
			}
			stats, err := envoy.Stats("no_filter_chain_match")
			if err != nil {
				t.Fatal(err)
			}
			// 198.51.100.9's connection matched no chain; with optional, so did 127.0.0.1's.
			want := int64(1)
			if optional {
				want = 2
			}
			if got := stats["listener.shop/office/tcp-7.no_filter_chain_match"]; got != want {
				t.Errorf("office's connections refused by the ranges: %d, want %d", got, want)
			}
			// The access log names the client the header gave.
			testsupport.Eventually(t, 30*time.Second, "an access log line of office naming 192.0.2.8", func() error {
				for _, l := range accessLogLines(t, envoy.Output()) {
					if l["listener"] == "shop/office/tcp-7" && l["client"] == "192.0.2.8:40000" {
						return nil
					}
				}
				return errNotYet
			})
		})
	}
}
