package ipam

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// svc is a LoadBalancer Service of namespace apps created at epoch+age seconds, IPv4
// single-stack, with TCP ports, changed by the options.
func svc(name string, age int, opts ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name,
		CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Second))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack), Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	for _, o := range opts {
		o(s)
	}
	return s
}

func ports(ps ...int32) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Ports = nil
		for _, p := range ps {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: p, Protocol: corev1.ProtocolTCP})
		}
	}
}

func annotate(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func status(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

func families(policy corev1.IPFamilyPolicy, fs ...corev1.IPFamily) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &policy, fs }
}

func inNamespace(ns string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Namespace = ns }
}

// outcome renders a verdict: the addresses, or "Reason: message".
func outcome(v lbaddress.Verdict) string {
	if v.Pending() {
		return v.Reason + ": " + v.Message
	}
	var s []string
	for _, a := range v.Addresses {
		s = append(s, a.String())
	}
	return strings.Join(s, ",")
}

func requests(svcs ...*corev1.Service) []Request {
	var out []Request
	for _, s := range svcs {
		out = append(out, Request{Service: s, Pool: s.Annotations[kubelbv1alpha1.AnnotationAddressPool]})
	}
	return out
}

func TestAllocate(t *testing.T) {
	v4pool := addressPool("v4", true, "10.0.0.0/30")
	dual := addressPool("dual", false, "10.1.0.0/29", "fd00::/120")
	v6 := addressPool("v6", false, "fd00:6::/64")
	pools := []kubelbv1alpha1.AddressPool{v4pool, dual, v6}
	dualStack := func(p corev1.IPFamilyPolicy) func(*corev1.Service) {
		return families(p, corev1.IPv4Protocol, corev1.IPv6Protocol)
	}
	inDual := annotate(kubelbv1alpha1.AnnotationAddressPool, "dual")
	share := func(k string) func(*corev1.Service) { return annotate(kubelbv1alpha1.AnnotationAllowSharedIP, k) }
	ask := func(ips string) func(*corev1.Service) { return annotate(kubelbv1alpha1.AnnotationLoadBalancerIPs, ips) }
	for _, tc := range []struct {
		name     string
		pools    []kubelbv1alpha1.AddressPool
		hub      bool
		services []*corev1.Service
		want     map[string]string // name → outcome prefix
	}{
		{name: "lowest free address first, in creation order (not list order)",
			services: []*corev1.Service{svc("b", 2), svc("a", 1), svc("c", 3)},
			want:     map[string]string{"a": "10.0.0.0", "b": "10.0.0.1", "c": "10.0.0.2"}},
		{name: "a Service keeps the address in its status (a restart rebuilds the same result)",
			services: []*corev1.Service{svc("a", 1, status("10.0.0.3")), svc("b", 2)},
			want:     map[string]string{"a": "10.0.0.3", "b": "10.0.0.0"}},
		{name: "an address in two statuses stays with the earlier Service; a later one keeps its own against an earlier newcomer",
			services: []*corev1.Service{svc("a", 1, status("10.0.0.1")), svc("b", 2, status("10.0.0.1")), svc("c", 3, status("10.0.0.0")), svc("new", 0)},
			want:     map[string]string{"new": "10.0.0.2", "a": "10.0.0.1", "b": "10.0.0.3", "c": "10.0.0.0"}},
		{name: "a status address outside the pool is replaced",
			services: []*corev1.Service{svc("a", 1, status("192.0.2.1"))},
			want:     map[string]string{"a": "10.0.0.0"}},
		{name: "exhaustion: the pool's name and size, and nothing held",
			services: []*corev1.Service{svc("a", 1), svc("b", 2), svc("c", 3), svc("d", 4), svc("e", 5)},
			want: map[string]string{"a": "10.0.0.0", "d": "10.0.0.3",
				"e": `AddressPoolExhausted: AddressPool "v4" has no free IPv4 address: all 4 are held`}},
		{name: "named pool, missing pool, invalid pool name",
			services: []*corev1.Service{svc("a", 1, inDual), svc("b", 2, annotate(kubelbv1alpha1.AnnotationAddressPool, "gone"))},
			want:     map[string]string{"a": "10.1.0.0", "b": `AddressPoolNotFound: AddressPool "gone" does not exist`}},
		{name: "no default pool",
			pools:    []kubelbv1alpha1.AddressPool{dual},
			services: []*corev1.Service{svc("a", 1)},
			want:     map[string]string{"a": "NoAddressPool: No AddressPool has spec.default: true, and the Service names no pool (annotation kubelb.k8c.io/address-pool)"}},
		{name: "several default pools: the oldest wins",
			pools: []kubelbv1alpha1.AddressPool{
				func() kubelbv1alpha1.AddressPool {
					p := addressPool("newer", true, "10.9.0.0/30")
					p.CreationTimestamp = metav1.NewTime(epoch.Add(time.Hour))
					return p
				}(),
				func() kubelbv1alpha1.AddressPool {
					p := addressPool("older", true, "10.8.0.0/30")
					p.CreationTimestamp = metav1.NewTime(epoch)
					return p
				}()},
			services: []*corev1.Service{svc("a", 1)},
			want:     map[string]string{"a": "10.8.0.0"}},
		{name: "requested address honoured when free, refused when held, not in pool, or unreadable",
			services: []*corev1.Service{
				svc("a", 1, ask("10.0.0.2")), svc("b", 2, func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.0.2" }),
				svc("c", 3, ask("10.0.0.9")), svc("d", 4, ask("10.0.0.1,nope")), svc("e", 5, ask("10.0.0.1,10.0.0.3")),
				svc("f", 6, ask("fd00::1")), svc("g", 7, ask("10.0.0.1"), func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.0.3" }),
				svc("h", 8)},
			want: map[string]string{"a": "10.0.0.2",
				"b": "AddressInUse: The requested address 10.0.0.2 is held by Service apps/a",
				"c": `AddressNotInPool: The requested address 10.0.0.9 is not in AddressPool "v4"`,
				"d": `InvalidAddressRequest: The annotation kubelb.k8c.io/load-balancer-ips must list IP addresses, comma-separated; "nope" is not one`,
				"e": "InvalidAddressRequest: The annotation kubelb.k8c.io/load-balancer-ips lists two IPv4 addresses",
				"f": "InvalidAddressRequest: The requested address fd00::1 is not of the Service's IP families [IPv4]",
				"g": "InvalidAddressRequest: spec.loadBalancerIP 10.0.0.3 is not one of the addresses",
				"h": "10.0.0.0"}},
		{name: "a requested address is not taken from the Service that holds it in its status, even by an older one",
			services: []*corev1.Service{svc("old", 1, ask("10.0.0.3")), svc("young", 2, status("10.0.0.3"))},
			want:     map[string]string{"young": "10.0.0.3", "old": "AddressInUse: The requested address 10.0.0.3 is held by Service apps/young"}},
		{name: "a changed request moves the Service",
			services: []*corev1.Service{svc("a", 1, status("10.0.0.0"), ask("10.0.0.2"))},
			want:     map[string]string{"a": "10.0.0.2"}},
		{name: "sharing by key when ports differ; a new address when they overlap; other keys never share",
			services: []*corev1.Service{svc("web", 1, share("k"), ports(80, 443)), svc("dns", 2, share("k"), ports(53)),
				svc("web2", 3, share("k"), ports(443)), svc("other", 4, share("x"), ports(8080)), svc("plain", 5, ports(9090))},
			want: map[string]string{"web": "10.0.0.0", "dns": "10.0.0.0", "web2": "10.0.0.1", "other": "10.0.0.2", "plain": "10.0.0.3"}},
		{name: "a requested shared address with overlapping ports is a port conflict",
			services: []*corev1.Service{svc("web", 1, share("k"), ask("10.0.0.1")), svc("web2", 2, share("k"), ask("10.0.0.1")),
				svc("dns", 3, share("k"), ask("10.0.0.1"), ports(53))},
			want: map[string]string{"web": "10.0.0.1", "dns": "10.0.0.1",
				"web2": `PortConflict: The requested address 10.0.0.1 is shared under key "k" by Service apps/web, which uses one of the Service's ports too`}},
		{name: "the same protocol matters: 53/UDP and 53/TCP share",
			services: []*corev1.Service{svc("tcp", 1, share("k"), ports(53)), svc("udp", 2, share("k"), func(s *corev1.Service) {
				s.Spec.Ports = []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}}
			})},
			want: map[string]string{"tcp": "10.0.0.0", "udp": "10.0.0.0"}},
		{name: "dual-stack families against an IPv4 pool and a dual pool",
			services: []*corev1.Service{
				svc("require-v4pool", 1, dualStack(corev1.IPFamilyPolicyRequireDualStack)),
				svc("prefer-v4pool", 2, dualStack(corev1.IPFamilyPolicyPreferDualStack)),
				svc("require-dual", 3, dualStack(corev1.IPFamilyPolicyRequireDualStack), inDual),
				svc("prefer-dual", 4, dualStack(corev1.IPFamilyPolicyPreferDualStack), inDual),
				svc("single-v6-first", 5, families(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol), inDual),
				svc("single-v6-v4pool", 6, families(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol)),
				svc("prefer-on-single-stack-cluster", 7, families(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv4Protocol), inDual),
			},
			want: map[string]string{
				"require-v4pool":                 `IPFamilyNotInPool: The Service needs an IPv6 address (ipFamilyPolicy RequireDualStack, ipFamilies [IPv4 IPv6]) and AddressPool "v4" has none`,
				"prefer-v4pool":                  "10.0.0.0",
				"require-dual":                   "10.1.0.0,fd00::",
				"prefer-dual":                    "10.1.0.1,fd00::1",
				"single-v6-first":                "fd00::2",
				"single-v6-v4pool":               `IPFamilyNotInPool: The Service needs an IPv6 address (ipFamilyPolicy SingleStack, ipFamilies [IPv6]) and AddressPool "v4" has none`,
				"prefer-on-single-stack-cluster": "10.1.0.2"}},
		{name: "a Service pending in one family holds nothing in the other",
			pools: []kubelbv1alpha1.AddressPool{addressPool("tiny", true, "10.2.0.0/31", "fd00:2::/128")},
			services: []*corev1.Service{svc("a", 1, dualStack(corev1.IPFamilyPolicyRequireDualStack)),
				svc("b", 2, dualStack(corev1.IPFamilyPolicyRequireDualStack), status("10.2.0.1")), svc("c", 3)},
			want: map[string]string{"a": "10.2.0.0,fd00:2::", "b": `AddressPoolExhausted: AddressPool "tiny" has no free IPv6 address: all 1 are held`,
				"c": "10.2.0.1"}},
		{name: "a huge IPv6 pool",
			services: []*corev1.Service{svc("a", 1, families(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol), annotate(kubelbv1alpha1.AnnotationAddressPool, "v6")),
				svc("b", 2, families(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol), annotate(kubelbv1alpha1.AnnotationAddressPool, "v6"), ask("fd00:6::ffff:ffff:ffff:ffff"))},
			want: map[string]string{"a": "fd00:6::", "b": "fd00:6::ffff:ffff:ffff:ffff"}},
		{name: "overlapping pools never hand out one address twice",
			pools: []kubelbv1alpha1.AddressPool{addressPool("p1", true, "10.3.0.0/31"), addressPool("p2", false, "10.3.0.0/30")},
			services: []*corev1.Service{svc("a", 1), svc("b", 2, annotate(kubelbv1alpha1.AnnotationAddressPool, "p2")),
				svc("c", 3, annotate(kubelbv1alpha1.AnnotationAddressPool, "p2"))},
			want: map[string]string{"a": "10.3.0.0", "b": "10.3.0.1", "c": "10.3.0.2"}},
		{name: "a pool of some namespaces: others stay pending, named or as the default",
			pools: []kubelbv1alpha1.AddressPool{func() kubelbv1alpha1.AddressPool {
				p := addressPool("apps-only", true, "10.4.0.0/30")
				p.Spec.AllowedNamespaces = []string{"apps"}
				return p
			}()},
			services: []*corev1.Service{svc("a", 1), svc("b", 2, inNamespace("other")), svc("c", 3, inNamespace("other"), annotate(kubelbv1alpha1.AnnotationAddressPool, "apps-only"))},
			want:     map[string]string{"a": "10.4.0.0"}},
		{name: "hub: requested addresses (annotation) and sharing keys are not read",
			hub: true,
			services: []*corev1.Service{svc("a", 1, ask("10.0.0.3"), share("k")), svc("b", 2, share("k"), ports(53)),
				svc("c", 3, annotate(kubelbv1alpha1.AnnotationAddressPool, "dual"))},
			want: map[string]string{"a": "10.0.0.0", "b": "10.0.0.1", "c": "10.0.0.2"}},
		{name: "hub: spec.loadBalancerIP (a granted static Gateway address, set by the manager) is given; outside the pool, pending",
			hub: true,
			services: []*corev1.Service{svc("a", 1), svc("gw", 2, func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.0.3" }),
				svc("out", 3, func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.1" })},
			want: map[string]string{"a": "10.0.0.0", "gw": "10.0.0.3",
				"out": `AddressNotInPool: The requested address 192.0.2.1 is not in AddressPool "v4"`}},
		{name: "hub: no default pool says where the pool is chosen",
			hub: true, pools: []kubelbv1alpha1.AddressPool{dual},
			services: []*corev1.Service{svc("a", 1)},
			want:     map[string]string{"a": "NoAddressPool: No AddressPool has spec.default: true, and the Service names no pool (the tenant's spec.loadBalancer.addressPool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := tc.pools
			if ps == nil {
				ps = pools
			}
			reqs := requests(tc.services...)
			if tc.hub {
				for i := range reqs {
					reqs[i].Pool = "" // the hub's pools come from the tenant's settings
				}
			}
			res := Allocate(Input{Services: reqs, Pools: ps, Hub: tc.hub})
			for name, want := range tc.want {
				got := outcome(res.Verdicts[types.NamespacedName{Namespace: "apps", Name: name}])
				if !strings.HasPrefix(got, want) {
					t.Errorf("%s:\n got %s\nwant %s...", name, got, want)
				}
			}
			// Deterministic: any input order gives the same verdicts.
			for range 5 {
				rand.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
				again := Allocate(Input{Services: reqs, Pools: ps, Hub: tc.hub})
				if d := cmp.Diff(res.Verdicts, again.Verdicts, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
					t.Fatalf("another input order changes the verdicts:\n%s", d)
				}
			}
			// Never one address twice, unless shared by key.
			seen := map[netip.Addr]string{}
			for _, s := range tc.services {
				v := res.Verdicts[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}]
				for _, a := range v.Addresses {
					key := s.Annotations[kubelbv1alpha1.AnnotationAllowSharedIP]
					if other, ok := seen[a]; ok && (tc.hub || key == "" || other != key) && !v.Pending() {
						t.Errorf("%s given to %s and another Service", a, s.Name)
					}
					seen[a] = key
				}
			}
		})
	}
}

// TestAllocateAllowedNamespaces: a Service outside a pool's spec.allowedNamespaces is
// pending, whether it names the pool or the pool is the default.
func TestAllocateAllowedNamespaces(t *testing.T) {
	p := addressPool("apps-only", true, "10.4.0.0/30")
	p.Spec.AllowedNamespaces = []string{"apps", "tools"}
	res := Allocate(Input{Pools: []kubelbv1alpha1.AddressPool{p}, Services: requests(
		svc("a", 1), svc("t", 2, inNamespace("tools")), svc("b", 3, inNamespace("other")),
		svc("c", 4, inNamespace("other"), annotate(kubelbv1alpha1.AnnotationAddressPool, "apps-only")))})
	for key, want := range map[types.NamespacedName]string{
		{Namespace: "apps", Name: "a"}:  "10.4.0.0",
		{Namespace: "tools", Name: "t"}: "10.4.0.1",
		{Namespace: "other", Name: "b"}: `AddressPoolNotAllowed: AddressPool "apps-only" does not serve namespace other (spec.allowedNamespaces)`,
		{Namespace: "other", Name: "c"}: `AddressPoolNotAllowed: AddressPool "apps-only" does not serve namespace other`,
	} {
		if got := outcome(res.Verdicts[key]); !strings.HasPrefix(got, want) {
			t.Errorf("%s: got %s, want %s...", key, got, want)
		}
	}
}

// TestAllocateHubHidesOtherTenants: in the hub a message never names a Service of another
// namespace. (A hub Service requests no address, so the case is built by hand.)
func TestAllocateHubHidesOtherTenants(t *testing.T) {
	d := &decision{in: Input{Hub: true}}
	c := &claimant{key: types.NamespacedName{Namespace: "tenant-a", Name: "x"}}
	other := types.NamespacedName{Namespace: "tenant-b", Name: "secret-name"}
	if got := d.holderText(c, other); got != "a Service of another tenant" || d.named(c, other) != (types.NamespacedName{}) {
		t.Errorf("hub names %q, %v", got, d.named(c, other))
	}
	same := types.NamespacedName{Namespace: "tenant-a", Name: "y"}
	if got := d.holderText(c, same); got != "Service tenant-a/y" || d.named(c, same) != same {
		t.Errorf("hub, same tenant: %q", got)
	}
}

// TestAllocateCounts: the use per pool and family counts a shared address once.
func TestAllocateCounts(t *testing.T) {
	share := annotate(kubelbv1alpha1.AnnotationAllowSharedIP, "k")
	res := Allocate(Input{Pools: []kubelbv1alpha1.AddressPool{addressPool("d", true, "10.0.0.0/24", "fd00::/64")},
		Services: requests(svc("a", 1, share), svc("b", 2, share, ports(53)), svc("c", 3, families(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)))})
	if got := *res.Allocated["d"]; got != [2]int64{2, 1} {
		t.Errorf("allocated %v, want [2 1]", got)
	}
	if res.Default != "d" {
		t.Errorf("default %q", res.Default)
	}
}

// BenchmarkAllocate is one decision over 1000 Services: 500 IPv4 Services of an IPv4 /20 and
// 500 dual-stack Services of a pool with an IPv4 /20 and an IPv6 /64; half of them keep
// the addresses already in their status (a settled cluster after a restart), the others are
// new. docs/modes.md has the figures.
func BenchmarkAllocate(b *testing.B) {
	pools := []kubelbv1alpha1.AddressPool{addressPool("v4", true, "10.0.0.0/20"), addressPool("dual", false, "10.16.0.0/20", "fd00::/64")}
	var svcs []*corev1.Service
	for i := range 1000 {
		var opts []func(*corev1.Service)
		if i%2 == 1 {
			opts = append(opts, annotate(kubelbv1alpha1.AnnotationAddressPool, "dual"),
				families(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol))
		}
		if i < 500 {
			if i%2 == 1 {
				opts = append(opts, status(fmt.Sprintf("10.16.%d.%d", i/256, i%256), fmt.Sprintf("fd00::%x", i)))
			} else {
				opts = append(opts, status(fmt.Sprintf("10.0.%d.%d", i/256, i%256)))
			}
		}
		svcs = append(svcs, svc(fmt.Sprintf("s%04d", i), i, append(opts, ports(80, 443))...))
	}
	in := Input{Services: requests(svcs...), Pools: pools}
	b.ReportAllocs()
	for b.Loop() {
		res := Allocate(in)
		if len(res.Verdicts) != 1000 {
			b.Fatal(len(res.Verdicts))
		}
	}
}
