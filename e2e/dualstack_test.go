package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestDualStack: IPv6 and dual-stack through the whole system, with the real kubelb and ccm
// binaries, dual-stack hub and tenant API servers and a real Envoy. The tenant has a node on
// an IPv4 address and one on ::1 (IPv6). A tenant Service asking for PreferDualStack gets
// both families from its API server; the ccm carries them to the hub LoadBalancer, whose hub
// Service is dual-stack; the played hub load balancer gives it an IPv4 and an IPv6 address,
// and the tenant Service shows both. Envoy listens on the listener port in both families
// (--envoy-listener-address 127.0.0.1, --envoy-listener-address-ipv6 ::1). The node on ::1
// is IPv6 loopback, which the endpoint policy denies by default: allowing 127.0.0.0/8 does
// not open it, and until the Tenant allows ::1/128 explicitly only the IPv4 node gets
// traffic; then requests over IPv4 and over IPv6, TCP and UDP, reach the backends on both
// nodes, including the one on [::1]:<NodePort>.
func TestDualStack(t *testing.T) {
	pair := testenv.StartPairWith(t, testenv.PairOptions{DualStack: true})
	sys := framework.StartSystem(t, pair.Hub, framework.Options{ExtraManagerArgs: []string{"--envoy-listener-address-ipv6", "::1"}})
	// The Tenant allows 127.0.0.0/8 only, for now.
	a := sys.AddTenantWith("a", pair.Tenant, framework.TenantOptions{Nodes: 1, ExtraNodeAddresses: []string{"::1"},
		EndpointAllow: []string{framework.LoopbackCIDR}})
	ctx := context.Background()
	hub := pair.Hub.Client

	svc := a.CreateService(framework.LBService{Name: "web",
		Ports: []corev1.ServicePort{framework.TCPPort("http", 80), {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}},
		Mutate: func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
		}})
	if !slices.Equal(svc.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}) {
		t.Fatalf("the tenant API server gave ipFamilies %v, want [IPv4 IPv6]", svc.Spec.IPFamilies)
	}
	a.StartBackends(svc)
	a.StartEnvoy(framework.EnvoyBootstrap)
	ports := a.ListenerPorts(svc)
	v4, v6 := fmt.Sprintf("127.0.0.1:%d", ports["http"]), fmt.Sprintf("[::1]:%d", ports["http"])
	udp4, udp6 := fmt.Sprintf("127.0.0.1:%d", ports["dns"]), fmt.Sprintf("[::1]:%d", ports["dns"])

	t.Run("the hub Service is dual-stack and the tenant Service shows an address of each family", func(t *testing.T) {
		lb := &kubelbv1alpha1.LoadBalancer{}
		testsupport.Eventually(t, time.Minute, "the families on the LoadBalancer", func() error {
			if err := hub.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: string(svc.UID)}, lb); err != nil {
				return err
			}
			if ptr.Deref(lb.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicyPreferDualStack ||
				!slices.Equal(lb.Spec.IPFamilies, svc.Spec.IPFamilies) {
				return fmt.Errorf("spec ipFamilyPolicy %v, ipFamilies %v", ptr.Deref(lb.Spec.IPFamilyPolicy, ""), lb.Spec.IPFamilies)
			}
			if !slices.Equal(lb.Status.Service.IPFamilies, svc.Spec.IPFamilies) {
				return fmt.Errorf("status.service.ipFamilies %v", lb.Status.Service.IPFamilies)
			}
			return nil
		})
		hubSvc := &corev1.Service{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: hubnames.LoadBalancerServiceName(string(svc.UID))}, hubSvc); err != nil {
			t.Fatal(err)
		}
		if len(hubSvc.Spec.ClusterIPs) != 2 {
			t.Errorf("hub Service cluster IPs %v, want one of each family", hubSvc.Spec.ClusterIPs)
		}
		ips := a.WaitAddresses("web", 2, addressTimeout)
		if a4, a6 := netip.MustParseAddr(ips[0]), netip.MustParseAddr(ips[1]); !a4.Is4() || !a6.Is6() {
			t.Errorf("tenant Service addresses %v, want an IPv4 then an IPv6 one", ips)
		}
	})

	t.Run("::1 is denied until the Tenant allows it explicitly", func(t *testing.T) {
		framework.WaitServes(t, v4, "a-node-0")
		framework.WaitServes(t, v6, "a-node-0") // the IPv6 listener serves, with the IPv4 node
		testsupport.Eventually(t, time.Minute, "the denied endpoint in Programmed", func() error {
			lb := &kubelbv1alpha1.LoadBalancer{}
			if err := hub.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: string(svc.UID)}, lb); err != nil {
				return err
			}
			c := meta.FindStatusCondition(lb.Status.Conditions, "Programmed")
			if c == nil || !strings.Contains(c.Message, "endpoint address ::1 is denied by the hub's endpoint policy") {
				return fmt.Errorf("Programmed %+v", c)
			}
			return nil
		})
	})

	t.Run("allowed, IPv4 and IPv6 clients reach both nodes, TCP and UDP", func(t *testing.T) {
		testsupport.Eventually(t, 30*time.Second, "allowing ::1/128 in Tenant a", func() error {
			tn := &kubelbv1alpha1.Tenant{}
			if err := hub.Get(ctx, client.ObjectKey{Name: "a"}, tn); err != nil {
				return err
			}
			tn.Spec.EndpointPolicy.Allow = []string{framework.LoopbackCIDR, framework.LoopbackIPv6CIDR}
			return hub.Update(ctx, tn)
		})
		framework.WaitServes(t, v4, "a-node-0", "a-node-1")
		framework.WaitServes(t, v6, "a-node-0", "a-node-1")
		for _, target := range []string{udp4, udp6} {
			testsupport.Eventually(t, time.Minute, "UDP echoes from both nodes through "+target, func() error {
				seen := map[string]bool{}
				for i := 0; i < 16; i++ {
					reply, err := testsupport.UDPRoundTrip(target, fmt.Sprintf("dgram-%d", i))
					if err != nil {
						return err
					}
					seen[reply.Node] = true
				}
				if !seen["a-node-0"] || !seen["a-node-1"] {
					return fmt.Errorf("answered by %v", seen)
				}
				return nil
			})
		}
	})
}
