package translate_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// badAddressesTenant is a tenant of k LoadBalancers, each with 16 ports and four endpoint
// groups referencing Addresses/default, which holds 8 usable addresses and 64·k that are
// denied (loopback) or not addresses at all. Its input grows linearly with k, and so does
// what a correct translation makes of it: 16·k clusters of 8 endpoints, and a bounded number
// of problems per LoadBalancer.
func badAddressesTenant(k int) translate.Input {
	addrs := make([]v1alpha1.EndpointAddress, 0, 8+64*k)
	for i := range 8 {
		addrs = append(addrs, v1alpha1.EndpointAddress{IP: fmt.Sprintf("10.0.0.%d", i+1)})
	}
	for i := range 64 * k {
		if i%2 == 0 {
			addrs = append(addrs, v1alpha1.EndpointAddress{IP: fmt.Sprintf("127.0.%d.%d", i/250, i%250+1)})
		} else {
			addrs = append(addrs, v1alpha1.EndpointAddress{IP: fmt.Sprintf("not-an-ip-%d", i)})
		}
	}
	in := translate.Input{
		Tenant:    "tenant-linear",
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: addrs}}},
	}
	for i := range k {
		lb := v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lb-%d", i)}}
		var eports []v1alpha1.EndpointPort
		for p := range 16 {
			lb.Spec.Ports = append(lb.Spec.Ports, v1alpha1.LoadBalancerPort{Port: int32(1000 + p), Protocol: corev1.ProtocolTCP})
			eports = append(eports, v1alpha1.EndpointPort{Port: int32(30000 + p), Protocol: corev1.ProtocolTCP})
			sp := v1alpha1.ServicePort{UpstreamTargetPort: int32(10000 + i*16 + p)}
			sp.Port, sp.Protocol = int32(1000+p), corev1.ProtocolTCP
			lb.Status.Service.Ports = append(lb.Status.Service.Ports, sp)
		}
		for range 4 {
			lb.Spec.Endpoints = append(lb.Spec.Endpoints, v1alpha1.LoadBalancerEndpoints{
				AddressesReference: &corev1.ObjectReference{Name: "default"}, Ports: eports,
			})
		}
		in.LoadBalancers = append(in.LoadBalancers, lb)
	}
	in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
	return in
}

// TestTranslationCostIsLinear: when a tenant makes its input four times larger, translation
// allocates about four times more, not sixteen. An Addresses object shared by every port of
// every LoadBalancer is parsed and checked once, and its problems are reported once per
// LoadBalancer, bounded. Allocation counts are deterministic, so this holds on any machine;
// time is measured by BenchmarkLargestTenant instead.
func TestTranslationCostIsLinear(t *testing.T) {
	allocs := func(k int) float64 {
		in := badAddressesTenant(k)
		r, err := translate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(r.Config.Clusters), 16*k; got != want {
			t.Fatalf("k=%d: %d clusters, want %d", k, got, want)
		}
		for _, c := range r.Config.Clusters {
			if len(c.Endpoints) != 8 {
				t.Fatalf("k=%d: cluster %s has %d endpoints, want the 8 usable addresses", k, c.Name, len(c.Endpoints))
			}
		}
		perLB := len(r.Problems) / k
		if perLB > 20 {
			t.Errorf("k=%d: %d problems per LoadBalancer; the problems of one Addresses object must be bounded", k, perLB)
		}
		return testing.AllocsPerRun(2, func() {
			if _, err := translate.Run(in); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(4), allocs(16)
	t.Logf("allocations: %.0f at k=4, %.0f at k=16 (×%.1f for ×4 input)", small, large, large/small)
	if large > 6*small {
		t.Errorf("translating 4 times the input allocates %.1f times more (%.0f → %.0f); the cost must be linear", large/small, small, large)
	}
}

// TestEndpointsMergedAndCut: a cluster's endpoints are the union of its groups' addresses ×
// ports, sorted and unique, whichever way the groups share Addresses objects and ports; with
// MaxEndpointsPerCluster only the first ones are kept and the LoadBalancer is told.
func TestEndpointsMergedAndCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	for round := range 200 {
		in := translate.Input{Tenant: "tenant-merge", Addresses: map[string]v1alpha1.Addresses{}}
		lists := map[string][]string{}
		for a := range 3 {
			name := fmt.Sprintf("a%d", a)
			var addrs []v1alpha1.EndpointAddress
			for range rng.IntN(6) {
				ip := fmt.Sprintf("10.0.%d.%d", rng.IntN(2), rng.IntN(8)+1) // overlapping, repeated
				addrs = append(addrs, v1alpha1.EndpointAddress{IP: ip})
				lists[name] = append(lists[name], ip)
			}
			in.Addresses[name] = v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.AddressesSpec{Addresses: addrs}}
		}
		lb := v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: "lb"}}
		lb.Spec.Ports = []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}}
		sp := v1alpha1.ServicePort{UpstreamTargetPort: 20000}
		sp.Port, sp.Protocol = 80, corev1.ProtocolTCP
		lb.Status.Service.Ports = []v1alpha1.ServicePort{sp}
		want := map[string]bool{}
		for range rng.IntN(4) + 1 {
			name, port := fmt.Sprintf("a%d", rng.IntN(3)), int32(30000+rng.IntN(2))
			lb.Spec.Endpoints = append(lb.Spec.Endpoints, v1alpha1.LoadBalancerEndpoints{
				AddressesReference: &corev1.ObjectReference{Name: name},
				Ports:              []v1alpha1.EndpointPort{{Port: port, Protocol: corev1.ProtocolTCP}},
			})
			for _, ip := range lists[name] {
				want[fmt.Sprintf("%s:%d", ip, port)] = true
			}
		}
		in.LoadBalancers = []v1alpha1.LoadBalancer{lb}
		wantList := slices.Collect(maps.Keys(want))
		slices.SortFunc(wantList, func(a, b string) int { // address, then port, as strings
			ha, pa, _ := strings.Cut(a, ":")
			hb, pb, _ := strings.Cut(b, ":")
			return cmp.Or(strings.Compare(ha, hb), strings.Compare(pa, pb))
		})
		max := rng.IntN(6)
		in.Options.MaxEndpointsPerCluster = max
		in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
		r, err := translate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		if len(r.Config.Clusters) == 1 {
			for _, ep := range r.Config.Clusters[0].Endpoints {
				got = append(got, fmt.Sprintf("%s:%d", ep.Address, ep.Port))
			}
		}
		cut := max > 0 && len(wantList) > max
		if cut {
			wantList = wantList[:max]
		}
		if !slices.Equal(got, wantList) {
			t.Fatalf("round %d (max %d): endpoints %v, want %v", round, max, got, wantList)
		}
		told := slices.ContainsFunc(r.Problems, func(p ir.Problem) bool { return p.Reason == translate.ReasonQuotaExceeded })
		if told != cut {
			t.Fatalf("round %d: QuotaExceeded reported %v, want %v (problems %v)", round, told, cut, r.Problems)
		}
	}
}

// TestEndpointsTenantBudget: with Options.MaxEndpoints the tenant's clusters share one
// budget: the older LoadBalancers get all their endpoints, the next one what is left, the
// rest none — each of them told why.
func TestEndpointsTenantBudget(t *testing.T) {
	addrs := make([]v1alpha1.EndpointAddress, 10)
	for i := range addrs {
		addrs[i] = v1alpha1.EndpointAddress{IP: fmt.Sprintf("10.0.0.%d", i+1)}
	}
	in := translate.Input{
		Tenant:    "tenant-budget",
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: addrs}}},
		Options:   translate.Options{MaxEndpoints: 25},
	}
	for i := range 4 {
		lb := v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lb-%d", i)}}
		lb.Spec.Ports = []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}}
		lb.Spec.Endpoints = []v1alpha1.LoadBalancerEndpoints{{
			AddressesReference: &corev1.ObjectReference{Name: "default"},
			Ports:              []v1alpha1.EndpointPort{{Port: 30080, Protocol: corev1.ProtocolTCP}},
		}}
		sp := v1alpha1.ServicePort{UpstreamTargetPort: int32(20000 + i)}
		sp.Port, sp.Protocol = 80, corev1.ProtocolTCP
		lb.Status.Service.Ports = []v1alpha1.ServicePort{sp}
		in.LoadBalancers = append(in.LoadBalancers, lb)
	}
	in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
	r, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, c := range r.Config.Clusters {
		got[c.Name] = len(c.Endpoints)
	}
	want := map[string]int{"lb-0-tcp-80": 10, "lb-1-tcp-80": 10, "lb-2-tcp-80": 5, "lb-3-tcp-80": 0}
	if !maps.Equal(got, want) {
		t.Fatalf("endpoints per cluster %v, want %v", got, want)
	}
	reasons := map[string][]string{}
	for _, p := range r.Problems {
		reasons[p.Object.Name] = append(reasons[p.Object.Name], p.Reason)
	}
	for lb, want := range map[string][]string{
		"lb-2": {translate.ReasonQuotaExceeded},
		"lb-3": {translate.ReasonQuotaExceeded, translate.ReasonNoEndpoints},
	} {
		if !slices.Equal(reasons[lb], want) {
			t.Errorf("%s: problems %v, want %v", lb, reasons[lb], want)
		}
	}
	if len(reasons["lb-0"])+len(reasons["lb-1"]) > 0 {
		t.Errorf("the older LoadBalancers have problems: %v", reasons)
	}
}

// BenchmarkPolicyLargeHub checks the 5000 addresses of a tenant's Addresses against the
// ranges of a hub of 5000 nodes (a Pod CIDR and an address each): the policy looks each
// address up by prefix length, instead of comparing it with every range.
func BenchmarkPolicyLargeHub(b *testing.B) {
	in := badAddressesTenant(0)
	addrs := make([]v1alpha1.EndpointAddress, 5000)
	for i := range addrs {
		addrs[i] = v1alpha1.EndpointAddress{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}
	}
	in.Addresses["default"] = v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: addrs}}
	for i := range 5000 {
		in.Policy.Hub = append(in.Policy.Hub,
			translate.PolicyRule{Prefix: netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)), Source: translate.SourceHubPodCIDR},
			translate.PolicyRule{Prefix: netip.MustParsePrefix(fmt.Sprintf("192.168.%d.%d/32", i/250, i%250+1)), Source: translate.SourceHubNode})
	}
	in.LoadBalancers = badAddressesTenant(1).LoadBalancers
	in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
	b.ReportAllocs()
	for b.Loop() {
		r, err := translate.Run(in)
		if err != nil || len(r.Config.Clusters) != 16 || len(r.Config.Clusters[0].Endpoints) != 5000 {
			b.Fatalf("unexpected result (%v): %d problems", err, len(r.Problems))
		}
	}
}
