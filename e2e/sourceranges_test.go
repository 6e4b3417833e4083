package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestLoadBalancerSourceRanges: a tenant Service with loadBalancerSourceRanges, through the
// real ccm, manager and a real Envoy. Clients bind their sockets to loopback addresses: from
// 127.0.0.2 (inside the ranges) every TCP connection and UDP datagram reaches the tenant's
// nodes, from 127.0.0.3 none does; the hub Service keeps the clients' addresses
// (externalTrafficPolicy Local, though the tenant Service asks for Cluster). A change of the
// ranges on the Service reaches Envoy, and a Service without ranges serves everyone.
func TestLoadBalancerSourceRanges(t *testing.T) {
	pair := testenv.StartPair(t)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 1)
	ctx := context.Background()

	office := a.CreateService(framework.LBService{Name: "office",
		Ports: []corev1.ServicePort{framework.TCPPort("tcp", 80), {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}},
		Mutate: func(s *corev1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"127.0.0.2/32"}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}})
	open := a.CreateService(framework.LBService{Name: "open", Ports: []corev1.ServicePort{framework.TCPPort("tcp", 80)}})
	a.StartBackends(office)
	a.StartBackends(open)
	a.WaitAddress("office", addressTimeout)
	a.WaitAddress("open", addressTimeout)
	a.StartEnvoy(framework.EnvoyBootstrap)
	ports := a.ListenerPorts(office)
	tcpTarget := fmt.Sprintf("127.0.0.1:%d", ports["tcp"])
	udpTarget := fmt.Sprintf("127.0.0.1:%d", ports["dns"])
	openTarget := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(open)["tcp"])

	served := func(src string) (tcp, udp bool) {
		_, err := testsupport.TCPRoundTripFrom(src, tcpTarget, "hello-"+src)
		_, uerr := testsupport.UDPRoundTripFrom(src, udpTarget, "hello-"+src, time.Second)
		return err == nil, uerr == nil
	}
	waitServed := func(t *testing.T, want map[string]bool) {
		t.Helper()
		testsupport.Eventually(t, time.Minute, fmt.Sprintf("served %v", want), func() error {
			for src, ok := range want {
				if tcp, udp := served(src); tcp != ok || udp != ok {
					return fmt.Errorf("from %s: TCP served %v, UDP served %v; want %v", src, tcp, udp, ok)
				}
			}
			return nil
		})
	}

	t.Run("the hub Service keeps the client address", func(t *testing.T) {
		testsupport.Eventually(t, time.Minute, "externalTrafficPolicy Local on the hub Service", func() error {
			svc := &corev1.Service{}
			if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: hubnames.LoadBalancerServiceName(string(office.UID))}, svc); err != nil {
				return err
			}
			if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
				return fmt.Errorf("externalTrafficPolicy %q", svc.Spec.ExternalTrafficPolicy)
			}
			return nil
		})
	})

	t.Run("only clients inside the ranges are served", func(t *testing.T) {
		waitServed(t, map[string]bool{"127.0.0.2": true, "127.0.0.3": false})
		// Counted once the configuration is in place: every try from inside, none from outside.
		counts := map[string]int{}
		for range 5 {
			for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
				tcp, udp := served(src)
				counts[src+"/tcp"] += b2i(tcp)
				counts[src+"/udp"] += b2i(udp)
			}
		}
		want := map[string]int{"127.0.0.2/tcp": 5, "127.0.0.2/udp": 5, "127.0.0.3/tcp": 0, "127.0.0.3/udp": 0}
		for k, w := range want {
			if counts[k] != w {
				t.Errorf("%s: %d of 5 served, want %d", k, counts[k], w)
			}
		}
		for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
			if _, err := testsupport.TCPRoundTripFrom(src, openTarget, "open"); err != nil {
				t.Errorf("the Service without ranges refused %s: %v", src, err)
			}
		}
	})

	t.Run("a change of the ranges on the Service reaches Envoy", func(t *testing.T) {
		testsupport.Eventually(t, 30*time.Second, "updating Service office", func() error {
			cur := &corev1.Service{}
			if err := pair.Tenant.Client.Get(ctx, client.ObjectKeyFromObject(office), cur); err != nil {
				return err
			}
			cur.Spec.LoadBalancerSourceRanges = []string{"127.0.0.3/32"}
			return pair.Tenant.Client.Update(ctx, cur)
		})
		waitServed(t, map[string]bool{"127.0.0.2": false, "127.0.0.3": true})
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
