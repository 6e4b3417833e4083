package envoycp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds"
)

// fakeDNS is a Resolver answering from a table; it records the names asked.
type fakeDNS struct {
	mu     sync.Mutex
	answer map[string][]string // name → addresses
	fail   map[string]error
	asked  []string
}

func (f *fakeDNS) set(name string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer[name] = addrs
	delete(f.fail, name)
}

func (f *fakeDNS) failWith(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[name] = err
}

func (f *fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, host)
	if err := f.fail[host]; err != nil {
		return nil, err
	}
	as, ok := f.answer[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range as {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// setInterval sets the age after which answers are looked up again.
func (n *names) setInterval(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stale = d
}

// settle waits until no name of tenant waits for a lookup or is being looked up.
func settle(t *testing.T, n *names, tenant string) {
	t.Helper()
	testsupport.Eventually(t, 30*time.Second, "the lookups of "+tenant, func() error {
		if b := n.busy(tenant); b > 0 {
			return fmt.Errorf("%d names waiting or being looked up", b)
		}
		return nil
	})
}

// resolveNow queues a tenant's names, waits for their lookups and returns the answers.
func resolveNow(t *testing.T, n *names, tenant string, hostnames []string) map[string]translate.Resolved {
	t.Helper()
	n.want(tenant, hostnames)
	settle(t, n, tenant)
	return n.want(tenant, hostnames)
}

// served lists the endpoint addresses of a tenant's snapshot and fails on any cluster that
// would make Envoy resolve a name.
func served(t *testing.T, res xds.Resources) []string {
	t.Helper()
	for _, c := range res[resource.ClusterType] {
		c := c.(*clusterv3.Cluster)
		if typ := c.GetType(); typ != clusterv3.Cluster_EDS {
			t.Errorf("cluster %s has type %s; Envoy must never resolve a tenant's name", c.Name, typ)
		}
		if c.LoadAssignment != nil {
			t.Errorf("cluster %s carries inline endpoints", c.Name)
		}
	}
	var out []string
	for _, r := range res[resource.EndpointType] {
		for _, le := range r.(*endpointv3.ClusterLoadAssignment).Endpoints {
			for _, e := range le.LbEndpoints {
				out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
			}
		}
	}
	return out
}

// TestReconcileResolvesHostnames: hostname endpoints (the ccm's Hostname node addresses) are
// resolved by the manager; Envoy gets the resolved IPs over EDS. A name resolving to the
// cloud metadata address is refused as EndpointDenied on the LoadBalancer and never served;
// a changed answer on the next resolution changes what is served; a name that stops
// existing is a HostnameNotResolved problem, while a failing DNS server keeps the last answer.
func TestReconcileResolvesHostnames(t *testing.T) {
	t.Parallel()
	addrs := &v1alpha1.Addresses{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-h", Name: v1alpha1.DefaultAddressesName},
		Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{
			{Hostname: "node-a.example.com"}, {Hostname: "Evil.example.com."},
		}},
	}
	dns := &fakeDNS{answer: map[string][]string{}, fail: map[string]error{}}
	dns.set("node-a.example.com", "10.0.0.1")
	dns.set("evil.example.com", "169.254.169.254")
	rec := &recorder{set: map[string]xds.Resources{}}
	store := status.NewStore()
	r := NewReconciler(newClient(t, namespace("tenant-h", true), loadBalancer("tenant-h", "web", 20001), addrs), rec, store, "kubelb", translate.Options{})
	r.names = newNames(dns)
	// One round: a rebuild that queues every name again, the lookups, and the rebuild their
	// answers bring.
	reconcileOnce := func() reconcile.Result {
		t.Helper()
		r.names.setInterval(0)
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "tenant-h"}}); err != nil {
			t.Fatal(err)
		}
		r.names.setInterval(time.Hour)
		settle(t, r.names, "tenant-h")
		res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "tenant-h"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	problems := func() []string {
		var out []string
		for _, p := range store.Get("tenant-h").Problems {
			out = append(out, p.Reason+": "+p.Message)
		}
		return out
	}

	res := reconcileOnce()
	if res.RequeueAfter != ResolveInterval {
		t.Errorf("RequeueAfter = %v, want %v (names are resolved again periodically)", res.RequeueAfter, ResolveInterval)
	}
	if got := served(t, rec.set["tenant-h"]); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("served %v, want [10.0.0.1]", got)
	}
	ps := problems()
	// The tenant reads its own name and the policy's verdict, not what the hub's DNS answered.
	if len(ps) != 1 || ps[0] != translate.ReasonEndpointDenied+": endpoint hostname evil.example.com resolves to addresses "+translate.DeniedByPolicy+"; they are left out" {
		t.Errorf("problems %q, want one EndpointDenied naming evil.example.com and nothing of the hub", ps)
	}
	if d := store.Get("tenant-h").Problems[0].Detail; !strings.Contains(d, "169.254.169.254 is denied by 169.254.0.0/16 (default)") {
		t.Errorf("detail %q, want the resolved address and the rule (for the manager's log)", d)
	}

	// The next resolution finds a new address: the snapshot follows.
	dns.set("node-a.example.com", "10.0.0.2", "10.0.0.3")
	reconcileOnce()
	if got := served(t, rec.set["tenant-h"]); !slices.Equal(got, []string{"10.0.0.2", "10.0.0.3"}) {
		t.Errorf("after the answer changed: served %v, want [10.0.0.2 10.0.0.3]", got)
	}

	// A name that now resolves to loopback is refused too.
	dns.set("node-a.example.com", "127.0.0.1")
	reconcileOnce()
	if got := served(t, rec.set["tenant-h"]); len(got) != 0 {
		t.Errorf("a name resolving to loopback is served: %v", got)
	}
	dns.set("node-a.example.com", "10.0.0.2")
	reconcileOnce()

	// A failing DNS server keeps the last good answer.
	dns.failWith("node-a.example.com", &net.DNSError{Err: "i/o timeout", Name: "node-a.example.com", IsTimeout: true})
	reconcileOnce()
	if got := served(t, rec.set["tenant-h"]); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Errorf("after a lookup timed out: served %v, want the last answer [10.0.0.2]", got)
	}

	// A name that no longer exists is left out with a problem.
	dns.failWith("node-a.example.com", &net.DNSError{Err: "no such host", Name: "node-a.example.com", IsNotFound: true})
	reconcileOnce()
	if got := served(t, rec.set["tenant-h"]); len(got) != 0 {
		t.Errorf("a name that does not exist is served: %v", got)
	}
	if ps := problems(); !slices.ContainsFunc(ps, func(p string) bool {
		return strings.HasPrefix(p, translate.ReasonHostnameNotResolved+": endpoint hostname node-a.example.com") && strings.Contains(p, "no such host")
	}) {
		t.Errorf("problems %q, want HostnameNotResolved for node-a.example.com", ps)
	}
}

// TestResolveBounds: at most MaxResolvedNames names of a tenant are looked up, and at most
// MaxResolvedAddrs addresses of a name are used.
func TestResolveBounds(t *testing.T) {
	t.Parallel()
	dns := &fakeDNS{answer: map[string][]string{}, fail: map[string]error{}}
	var hostnames []string
	for i := range MaxResolvedNames + 10 {
		name := fmt.Sprintf("n%03d.example.com", i)
		hostnames = append(hostnames, name)
		dns.set(name, "10.1.0.1")
	}
	var many []string
	for i := range MaxResolvedAddrs + 5 {
		many = append(many, fmt.Sprintf("10.2.0.%d", 100-i))
	}
	dns.set("n000.example.com", many...)
	got := resolveNow(t, newNames(dns), "tenant-b", hostnames)
	if len(dns.asked) != MaxResolvedNames {
		t.Errorf("%d lookups, want %d", len(dns.asked), MaxResolvedNames)
	}
	if r := got[hostnames[len(hostnames)-1]]; len(r.Addrs) != 0 || !strings.Contains(r.Error, "only the first 64") {
		t.Errorf("the name over the limit: %+v", r)
	}
	if r := got["n000.example.com"]; len(r.Addrs) != MaxResolvedAddrs || r.Addrs[0] != netip.MustParseAddr("10.2.0.80") {
		t.Errorf("n000: %d addresses from %v, want the lowest %d", len(r.Addrs), r.Addrs, MaxResolvedAddrs)
	}
}

// TestResolveWithTheRealResolver: the manager's real resolver (net.DefaultResolver) finds
// "localhost" (from /etc/hosts, no query leaves the machine), and the translation then
// refuses it as loopback.
func TestResolveWithTheRealResolver(t *testing.T) {
	t.Parallel()
	// Go's own resolver, as the manager uses it, but with no DNS server to talk to: localhost
	// comes from /etc/hosts and no query can leave the machine.
	offline := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS in tests")
	}}
	got := resolveNow(t, newNames(offline), "tenant-r", []string{"localhost"})
	r := got["localhost"]
	if r.Error != "" || !slices.Contains(r.Addrs, netip.MustParseAddr("127.0.0.1")) {
		t.Fatalf("localhost resolved to %+v, want 127.0.0.1 among the addresses", r)
	}
	in := translate.Input{
		Tenant:        "tenant-r",
		Addresses:     map[string]v1alpha1.Addresses{v1alpha1.DefaultAddressesName: {Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{Hostname: "localhost"}}}}},
		LoadBalancers: []v1alpha1.LoadBalancer{*loadBalancer("tenant-r", "web", 20001)},
		Resolved:      got,
	}
	in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
	cfg, problems, err := translate.Translate(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		if len(c.Endpoints) != 0 {
			t.Errorf("cluster %s serves %v; localhost must be refused", c.Name, c.Endpoints)
		}
	}
	if !slices.ContainsFunc(problems, func(p ir.Problem) bool {
		return p.Reason == translate.ReasonEndpointDenied && strings.Contains(p.Message, "localhost resolves to addresses "+translate.DeniedByPolicy) &&
			!strings.Contains(p.Message, "127.0.0.1") && strings.Contains(p.Detail, "127.0.0.1 is denied by 127.0.0.0/8")
	}) {
		t.Errorf("problems %v, want EndpointDenied for localhost → 127.0.0.1", problems)
	}
}

// startServfailDNS starts a DNS server on loopback that answers every query with SERVFAIL;
// it returns its address. It stops with the test.
func startServfailDNS(t *testing.T) string {
	return startDNS(t, func(q []byte) []byte {
		if len(q) < 12 {
			return nil
		}
		// The header and the question only: QR set, RCODE 2 (SERVFAIL), no records.
		end := 12
		for end < len(q) && q[end] != 0 {
			end += int(q[end]) + 1
		}
		end += 5 // the root label, QTYPE, QCLASS
		if end > len(q) {
			return nil
		}
		resp := append([]byte(nil), q[:end]...)
		resp[2] |= 0x80
		resp[3] = resp[3]&0xf0 | 2
		resp[6], resp[7], resp[8], resp[9], resp[10], resp[11] = 0, 0, 0, 0, 0, 0
		return resp
	})
}

// startDNS starts a DNS server on loopback that answers each query with answer(query) (no
// answer when it returns nil, or when answer is nil); it returns its address. It stops with
// the test.
func startDNS(t *testing.T, answer func(query []byte) []byte) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if answer == nil {
				continue
			}
			if resp := answer(buf[:n]); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

// TestResolveFailureHidesTheHubResolver: a name the hub's DNS fails on is reported to the
// tenant without the resolver's own error, which names the hub's DNS server; the manager's
// log keeps it (Resolved.Detail, then ir.Problem.Detail).
func TestResolveFailureHidesTheHubResolver(t *testing.T) {
	t.Parallel()
	server := startServfailDNS(t)
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", server)
	}}
	got := resolveNow(t, newNames(res), "tenant-b", []string{"probe.example.com"})
	r := got["probe.example.com"]
	var dnsErr *net.DNSError
	if _, err := res.LookupNetIP(context.Background(), "ip", "probe.example.com"); !errors.As(err, &dnsErr) || dnsErr.Server == "" {
		t.Fatalf("the resolver's error %v names no server", err)
	}
	if r.Error != "the lookup failed" || strings.Contains(r.Error, dnsErr.Server) {
		t.Errorf("the tenant reads %q; want %q and never the hub's DNS server %s", r.Error, "the lookup failed", dnsErr.Server)
	}
	if !strings.Contains(r.Detail, dnsErr.Server) {
		t.Errorf("the manager's detail %q does not name the DNS server %s", r.Detail, dnsErr.Server)
	}
}
