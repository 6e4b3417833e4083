package translate_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// bytesource turns fuzzer bytes into choices; it yields zeros once the bytes run out.
type bytesource struct {
	b []byte
}

func (s *bytesource) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	v := s.b[0]
	s.b = s.b[1:]
	return v
}

func (s *bytesource) intn(n int) int { return int(s.byte()) % n }

func pick[T any](s *bytesource, options ...T) T { return options[s.intn(len(options))] }

// port yields mostly valid ports from a small set (so that collisions happen), sometimes
// zero, negative or out of range.
func (s *bytesource) port() int32 {
	return pick[int32](s, 80, 443, 53, 20001, 20002, 20003, 30000, 31080, 0, -1, 65535, 65536, 1, 8080)
}

func (s *bytesource) address() v1alpha1.EndpointAddress {
	switch s.intn(10) {
	case 0:
		return v1alpha1.EndpointAddress{Hostname: pick(s, "node-1", "node-2.example.com", "Node-3.", "bad_host", "", "-x-", "a..b")}
	case 1:
		return v1alpha1.EndpointAddress{IP: pick(s, "not-an-ip", "0.0.0.0", "::", "fe80::1%eth0", "::ffff:10.1.2.3", "fd00::1", "256.1.1.1", " 10.0.0.1",
			"127.0.0.1", "::ffff:127.0.0.2", "169.254.169.254", "10.96.0.1")}
	case 2:
		return v1alpha1.EndpointAddress{}
	case 3:
		return v1alpha1.EndpointAddress{IP: "10.0.0.1", Hostname: "both"}
	default:
		return v1alpha1.EndpointAddress{IP: fmt.Sprintf("10.0.%d.%d", s.intn(3), s.intn(5)+1)}
	}
}

func (s *bytesource) protocol() corev1.Protocol {
	return pick[corev1.Protocol](s, "", corev1.ProtocolTCP, corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolUDP, corev1.ProtocolSCTP, "tcp")
}

// input builds a random tenant: a few Addresses objects and up to 8 LoadBalancers with
// random ports, statuses, endpoint groups, annotations, persistence and names.
func (s *bytesource) input() translate.Input {
	in := translate.Input{Tenant: "tenant-fuzz", Addresses: map[string]v1alpha1.Addresses{}}
	for i, n := 0, s.intn(3); i < n; i++ {
		a := v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: pick(s, "default", "other", "")}}
		for j, m := 0, s.intn(5); j < m; j++ {
			a.Spec.Addresses = append(a.Spec.Addresses, s.address())
		}
		in.Addresses[a.Name] = a
	}
	in.Options.ListenerAddress = pick(s, "", "", "127.0.0.1", "::")
	if s.intn(2) == 0 {
		in.Policy.Allow = []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}
		in.Policy.Deny = []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.2/32"), Source: translate.SourceTenantDeny}}
		in.Policy.Hub = []translate.PolicyRule{{Prefix: netip.MustParsePrefix("10.96.0.0/12"), Source: translate.SourceHubServiceCIDR}}
	}
	// What the manager resolved for some of the hostnames: nothing, allowed and denied
	// addresses (IPv4-mapped loopback, metadata), or an error.
	in.Resolved = map[string]translate.Resolved{}
	for _, name := range []string{"node-1", "node-2.example.com", "node-3"} {
		switch s.intn(4) {
		case 0:
		case 1:
			in.Resolved[name] = translate.Resolved{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("::ffff:127.0.0.2")}}
		case 2:
			in.Resolved[name] = translate.Resolved{Addrs: []netip.Addr{netip.MustParseAddr("169.254.169.254"), {}}}
		default:
			in.Resolved[name] = translate.Resolved{Error: "no such host"}
		}
	}
	in.Options.HealthCheck.Disabled = s.intn(4) == 0
	in.Options.HealthCheck.Interval = time.Duration(s.intn(3)) * time.Second
	for i, n := 0, s.intn(9); i < n; i++ {
		lb := v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{
			Name:              pick(s, fmt.Sprintf("lb-%d", i), fmt.Sprintf("lb-%d", i), "lb-0", "Bad_Name", "", "a.b", "x-tcp-80"),
			CreationTimestamp: metav1.NewTime(time.Unix(int64(s.intn(3)), 0)),
			Labels: pick(s, map[string]string(nil),
				map[string]string{v1alpha1.LabelOriginNamespace: "ns", v1alpha1.LabelOriginName: "svc.x"},
				map[string]string{v1alpha1.LabelOriginNamespace: "bad value!", v1alpha1.LabelOriginName: "svc"}),
			Annotations: pick(s, map[string]string(nil),
				map[string]string{v1alpha1.AnnotationProxyProtocol: pick(s, "v2", "true", "v1", "false", "")}),
		}}
		if s.intn(3) == 0 {
			lb.Spec.Persistence = &v1alpha1.Persistence{Type: pick[v1alpha1.PersistenceType](s, "SourceIP", "", "Cookie")}
		}
		for j, m := 0, s.intn(4); j < m; j++ {
			p := v1alpha1.LoadBalancerPort{Name: pick(s, "", "", "http", "dns"), Protocol: s.protocol(), Port: s.port()}
			lb.Spec.Ports = append(lb.Spec.Ports, p)
			if s.intn(4) != 0 {
				sp := v1alpha1.ServicePort{UpstreamTargetPort: s.port()}
				sp.Name, sp.Port, sp.Protocol = p.Name, p.Port, p.Protocol
				if s.intn(5) == 0 {
					sp.Name, sp.Protocol = pick(s, "", "dns", "http"), s.protocol()
				}
				lb.Status.Service.Ports = append(lb.Status.Service.Ports, sp)
			}
		}
		for j, m := 0, s.intn(3)+s.intn(2); j < m; j++ {
			g := v1alpha1.LoadBalancerEndpoints{}
			switch s.intn(3) {
			case 0:
				g.AddressesReference = &corev1.ObjectReference{Name: pick(s, "default", "missing", ""), Namespace: pick(s, "", "tenant-fuzz", "elsewhere")}
			default:
				for k, o := 0, s.intn(4); k < o; k++ {
					g.Addresses = append(g.Addresses, s.address())
				}
			}
			for k, o := 0, s.intn(4); k < o; k++ {
				g.Ports = append(g.Ports, v1alpha1.EndpointPort{Name: pick(s, "", "http", "dns"), Port: s.port(), Protocol: s.protocol()})
			}
			lb.Spec.Endpoints = append(lb.Spec.Endpoints, g)
		}
		in.LoadBalancers = append(in.LoadBalancers, lb)
	}
	// Last, so that the seeds' earlier choices stay as they were.
	in.Options.MaxEndpointsPerCluster = s.intn(4)
	in.Options.MaxEndpoints = pick(s, 0, 0, 2, 5)
	// externalTrafficPolicy Local: a healthCheckNodePort, in range or not.
	for i := range in.LoadBalancers {
		in.LoadBalancers[i].Spec.HealthCheckNodePort = pick[int32](s, 0, 0, 32000, 70000, -1)
	}
	// Source ranges: none, valid ones in any form (host bits, spaces, leading zeros, IPv6,
	// repeats), or some that are not CIDRs.
	for i := range in.LoadBalancers {
		for j, n := 0, s.intn(4); j < n; j++ {
			in.LoadBalancers[i].Spec.SourceRanges = append(in.LoadBalancers[i].Spec.SourceRanges,
				pick(s, "10.0.0.0/8", " 10.1.2.3/16 ", "010.0.0.0/8", "2001:DB8::/32", "0.0.0.0/0", "10.0.0.0/8", "office", "10.0.0.0/33", "fe80::1%eth0/64", ""))
		}
	}
	// The hub's load balancer sends PROXY protocol headers (spec.loadBalancer.proxyProtocol):
	// off, required or optional.
	in.Options.LoadBalancerProxyProtocol = pick(s, translate.HubProxyProtocol{}, translate.HubProxyProtocol{Enabled: true},
		translate.HubProxyProtocol{Enabled: true, Optional: true})
	in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
	return in
}

// FuzzTranslate checks that any input translates without panicking into an IR that
// validates and into Envoy resources Envoy accepts (every resource validates, the snapshot is
// consistent, no two listeners share a port), that the back end never has to leave anything
// out, that translation is deterministic, and that every port either has a listener or an
// Error problem on its LoadBalancer.
func FuzzTranslate(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice over, with ports and addresses"))
	f.Add([]byte{2, 4, 0, 0, 3, 3, 3, 3, 8, 0, 0, 0, 3, 1, 2, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240, 239, 238})
	// The hub's PROXY protocol (optional) on TCP and UDP listeners with source ranges.
	f.Add([]byte{5, 3, 1, 3, 2, 4, 3, 2, 6, 7, 2, 4, 4, 5, 2, 5, 3, 7, 5, 2, 2, 1, 6, 2, 6, 1, 0, 6, 2, 3, 1, 5, 5, 4, 4, 3, 7, 3, 7, 1, 2, 0, 3,
		5, 7, 0, 5, 7, 3, 4, 1, 4, 1, 5, 4, 5, 6, 7, 3, 6, 1, 2, 0, 5, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := (&bytesource{b: data}).input()
		cfg, problems, err := translate.Translate(in)
		if err != nil {
			t.Fatalf("Translate: %v", err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("invalid IR: %v", err)
		}
		_, all, res, err := translatetest.Pipeline(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(problems) {
			t.Fatalf("the back end left out resources: %v", all)
		}
		if err := translatetest.Check(res); err != nil {
			t.Fatal(err)
		}
		again, _, _ := translate.Translate((&bytesource{b: data}).input())
		if !cfg.Equal(again) {
			t.Fatal("Translate is not deterministic")
		}
		// The endpoint limits hold.
		total := 0
		for _, c := range cfg.Clusters {
			if max := in.Options.MaxEndpointsPerCluster; max > 0 && len(c.Endpoints) > max {
				t.Fatalf("cluster %s has %d endpoints, over MaxEndpointsPerCluster %d", c.Name, len(c.Endpoints), max)
			}
			total += len(c.Endpoints)
		}
		if max := in.Options.MaxEndpoints; max > 0 && total > max {
			t.Fatalf("%d endpoints in all, over MaxEndpoints %d", total, max)
		}
		// Every LoadBalancer port either has a listener, or an Error problem explaining why
		// not, or waits for its listener port (the Warning PortPending: no hub Service port
		// yet).
		listeners := map[string]bool{}
		for _, l := range cfg.Listeners {
			listeners[l.Name] = true
		}
		failed := map[string]bool{}
		for _, p := range problems {
			if p.Severity == ir.SeverityError || p.Reason == translate.ReasonPortPending {
				failed[p.Object.Name] = true
			}
		}
		for _, lb := range in.LoadBalancers {
			for _, p := range lb.Spec.Ports {
				proto := v1alpha1.ProtocolOrTCP(p.Protocol)
				name := fmt.Sprintf("%s-%s-%d", lb.Name, map[corev1.Protocol]string{"TCP": "tcp", "UDP": "udp"}[proto], p.Port)
				if !listeners[name] && !failed[lb.Name] {
					t.Fatalf("port %s of %q has neither a listener nor an Error problem", p.Protocol, lb.Name)
				}
			}
		}
	})
}
