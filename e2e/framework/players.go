package framework

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// AddNode plays a kubelet registering a Node with an InternalIP on loopback and a Ready
// condition.
func AddNode(t testenv.TB, c client.Client, name, ip string) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}
	node.Status.Conditions = []corev1.NodeCondition{readyCondition(true)}
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatalf("setting node %s ready: %v", name, err)
	}
}

// SetNodeReady plays a kubelet whose node becomes (not) Ready.
func SetNodeReady(t testenv.TB, c client.Client, name string, ready bool) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{readyCondition(ready)}
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatalf("setting node %s ready=%v: %v", name, ready, err)
	}
}

func readyCondition(ready bool) corev1.NodeCondition {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}
}

// PlayHubLoadBalancer plays the hub's own LoadBalancer implementation (MetalLB or a cloud in
// production): every hub Service of type LoadBalancer that kubelb made (for a LoadBalancer, a
// Gateway or the tenant's Ingresses) gets an ingress IP from
// 127.0.0.0/8 above 127.0.1.0 in its status, and one of LoadBalancerAddressIPv6 as well when
// it has the IPv6 family. It runs until the test ends and returns a
// counter of the writes it made (so scale tests can tell them from kubelb's).
func PlayHubLoadBalancer(t testenv.TB, cfg *rest.Config, c client.Client) *atomic.Int64 {
	return PlayHubLoadBalancerWith(t, cfg, c, HubLBOptions{})
}

// HubLBOptions tune the played hub LoadBalancer implementation.
type HubLBOptions struct {
	// Address returns the i-th address handed out (default: 127.0.1.1, 127.0.1.2, …).
	Address func(i int) string
	// AddressIPv6 returns the i-th IPv6 address handed out, to Services with the IPv6
	// family (default LoadBalancerAddressIPv6). A dual-stack Service gets one of each
	// family, in the order of its spec.ipFamilies.
	AddressIPv6 func(i int) string
	// ForwardTo, when set, makes the load balancer carry traffic as well: every TCP port of
	// a Service with an address listens on <address>:<port> and forwards to
	// <ForwardTo>:<targetPort> (the Envoy listener), as a real load balancer and kube-proxy
	// would.
	ForwardTo string
	// KubeProxyOnly plays only the hub's kube-proxy, for a hub whose Services get their
	// addresses from kubelb itself (--address-provider node-ip or ipam): no address is
	// written; every TCP port of a Service that has IPs in its status.loadBalancer.ingress
	// (whoever wrote them) listens on <ip>:<port> and forwards to <ForwardTo>:<targetPort>.
	// Only addresses in 127.0.0.0/8 are listened on.
	KubeProxyOnly bool
}

// LoadBalancerCIDR is the range the forwarding hub load balancer of the conformance harness
// hands out (HubLBOptions.Address = LoadBalancerAddress).
const LoadBalancerCIDR = "10.245.1.0/24"

// LoadBalancerAddress is the i-th address of LoadBalancerCIDR.
func LoadBalancerAddress(i int) string { return fmt.Sprintf("10.245.1.%d", 1+i%250) }

// LoadBalancerAddressIPv6 is the i-th IPv6 address the played hub load balancer hands out
// (fd00:1b::/64; addresses only shown in status, no traffic is sent to them).
func LoadBalancerAddressIPv6(i int) string { return fmt.Sprintf("fd00:1b::%x", i+1) }

// hubLBIngress is the status.loadBalancer.ingress the played hub load balancer gives svc:
// an address per IP family of the Service, in its order (ip for IPv4, ip6 for IPv6; ip
// alone when the Service names no family).
func hubLBIngress(svc *corev1.Service, ip, ip6 string) []corev1.LoadBalancerIngress {
	var out []corev1.LoadBalancerIngress
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			out = append(out, corev1.LoadBalancerIngress{IP: ip})
		case corev1.IPv6Protocol:
			out = append(out, corev1.LoadBalancerIngress{IP: ip6})
		}
	}
	if len(out) == 0 {
		out = []corev1.LoadBalancerIngress{{IP: ip}}
	}
	return out
}

// hasFamilies reports whether have holds an IP address of each family of want (and no
// more addresses): the Service has its addresses already (perhaps written by a test).
func hasFamilies(have, want []corev1.LoadBalancerIngress) bool {
	if len(have) != len(want) {
		return false
	}
	is6 := func(ip string) bool { a, err := netip.ParseAddr(ip); return err == nil && a.Is6() }
	for i := range want {
		if have[i].IP == "" || is6(have[i].IP) != is6(want[i].IP) {
			return false
		}
	}
	return true
}

// PlayHubLoadBalancerWith is PlayHubLoadBalancer with options. Like a real implementation it
// watches the Services (an informer) instead of listing them every pass: with thousands of
// hub Services a list every 200 ms would cost the API server and the test more than kubelb.
func PlayHubLoadBalancerWith(t testenv.TB, cfg *rest.Config, c client.Client, opts HubLBOptions) *atomic.Int64 {
	if opts.Address == nil {
		opts.Address = func(i int) string { return fmt.Sprintf("127.0.%d.%d", 1+i/250, 1+i%250) }
	}
	writes := &atomic.Int64{}
	fs := forwarders{}
	t.Cleanup(fs.closeAll)
	log := newOnceLogger(t)
	assigned := map[string]string{}
	// written is the resourceVersion of each Service when its address was written: the
	// informer has not caught up with the write while it still shows that version.
	var mu sync.Mutex
	written := map[string]string{}
	next := 0
	if opts.AddressIPv6 == nil {
		opts.AddressIPv6 = LoadBalancerAddressIPv6
	}
	assignedV6 := map[string]int{}
	assigned6 := func(key string) int {
		i, ok := assignedV6[key]
		if !ok {
			i = len(assignedV6)
			assignedV6[key] = i
		}
		return i
	}
	services := watchServices(t, cfg, kubelbv1alpha1.LabelManagedBy+"="+kubelbv1alpha1.LabelManagedByValue)
	Every(t, PlayInterval, func(ctx context.Context) bool {
		if !services.HasSynced() {
			return false
		}
		// Like a real implementation, it assigns addresses concurrently: a burst of
		// a thousand Services must not queue behind one writer.
		work := make(chan *corev1.Service)
		var writers sync.WaitGroup
		for w := 0; w < 8; w++ {
			writers.Add(1)
			go func() {
				defer writers.Done()
				for svc := range work {
					key, seen := svc.Namespace+"/"+svc.Name, svc.ResourceVersion
					if c.Status().Update(ctx, svc) == nil {
						writes.Add(1)
						mu.Lock()
						written[key] = seen
						mu.Unlock()
					}
				}
			}()
		}
		want := map[string][]string{}
		for _, item := range services.GetStore().List() {
			svc := item.(*corev1.Service) // the informer's: read only
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
				continue
			}
			key := svc.Namespace + "/" + svc.Name
			if opts.KubeProxyOnly {
				for _, in := range svc.Status.LoadBalancer.Ingress {
					for k, v := range forwardedPorts(svc, in.IP, opts.ForwardTo) {
						want[k] = v
					}
				}
				continue
			}
			ip, ok := assigned[key]
			if asked := askedAddress(svc); asked != "" && asked != ip && !slices.Contains(slices.Collect(maps.Values(assigned)), asked) {
				// Like MetalLB, it honours spec.loadBalancerIP when the address is free.
				ip, ok = asked, true
				assigned[key] = ip
			}
			if !ok {
				ip = opts.Address(next)
				next++
				assigned[key] = ip
			}
			for k, v := range forwardedPorts(svc, ip, opts.ForwardTo) {
				want[k] = v
			}
			mu.Lock()
			pending := written[key] == svc.ResourceVersion
			mu.Unlock()
			ingress := hubLBIngress(svc, ip, opts.AddressIPv6(assigned6(key)))
			if (hasFamilies(svc.Status.LoadBalancer.Ingress, ingress) && !movedTo(svc, ip)) || pending {
				continue
			}
			update := svc.DeepCopy()
			update.Status.LoadBalancer.Ingress = ingress
			work <- update
		}
		close(work)
		writers.Wait()
		for _, err := range fs.sync(want) {
			log.Logf("hub load balancer: %v", err)
		}
		return false
	})
	return writes
}

// StaticAddressCIDR is the range the conformance harness grants its tenant for static Gateway
// addresses (Tenant spec.gatewayAPI.staticAddresses): the played hub load balancer gives an
// address of it to a Service asking for it (spec.loadBalancerIP) and carries its traffic,
// and hands none of it out otherwise.
const StaticAddressCIDR = "10.245.2.0/29"

// askedAddress is the IPv4 address svc asks the hub's load balancer for (spec.loadBalancerIP),
// when it is one inside StaticAddressCIDR; "" otherwise.
func askedAddress(svc *corev1.Service) string {
	a, err := netip.ParseAddr(svc.Spec.LoadBalancerIP)
	if err != nil || !netip.MustParsePrefix(StaticAddressCIDR).Contains(a) {
		return ""
	}
	return a.String()
}

// movedTo reports whether svc was given ip for an address it asks for (askedAddress) that its
// status does not show yet.
func movedTo(svc *corev1.Service, ip string) bool {
	if askedAddress(svc) != ip {
		return false
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP == ip {
			return false
		}
	}
	return true
}

// forwardedPorts is what a load balancer (or the hub's kube-proxy) carries for svc on ip:
// <ip>:<port> → <to>:<targetPort> for each TCP and UDP port (a UDP one keyed by udpKey).
// Nothing when to is "", or when ip is
// neither on loopback nor in LoadBalancerCIDR (local only in the conformance harness's
// private network namespace): the harness listens and sends nowhere else.
func forwardedPorts(svc *corev1.Service, ip, to string) map[string][]string {
	out := map[string][]string{}
	if a, err := netip.ParseAddr(ip); to == "" || err != nil || !(a.IsLoopback() || netip.MustParsePrefix(LoadBalancerCIDR).Contains(a) || netip.MustParsePrefix(StaticAddressCIDR).Contains(a)) {
		return out
	}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.IntValue() <= 0 {
			continue
		}
		addr, ups := net.JoinHostPort(ip, fmt.Sprint(p.Port)), []string{net.JoinHostPort(to, fmt.Sprint(p.TargetPort.IntValue()))}
		switch kubelbv1alpha1.ProtocolOrTCP(p.Protocol) {
		case corev1.ProtocolTCP:
			out[addr] = ups
		case corev1.ProtocolUDP:
			out[udpKey(addr)] = ups
		}
	}
	return out
}

// AddNodeWith plays a kubelet registering a Ready Node with the given addresses and labels
// (e.g. kubelb.k8c.io/use-as-loadbalancer for the node-IP mode).
func AddNodeWith(t testenv.TB, c client.Client, name string, addresses []corev1.NodeAddress, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	node.Status.Addresses = addresses
	node.Status.Conditions = []corev1.NodeCondition{readyCondition(true)}
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatalf("setting node %s ready: %v", name, err)
	}
}

// watchServices starts an informer on the Services matching a label selector, stopped when
// the test ends.
func watchServices(t testenv.TB, cfg *rest.Config, selector string) toolscache.SharedIndexInformer {
	cs := kubernetes.NewForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := factory.Core().V1().Services().Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	return inf
}

// Envoy is a real Envoy process started from the bootstrap the manager generated.
type Envoy struct {
	*testsupport.Envoy
	// ReadyAddr is the address of the readiness listener the kubelet probes.
	ReadyAddr string
}

// StartEnvoy plays the kubelet of an Envoy pod: it writes the bootstrap the manager generated
// and starts the real Envoy binary with it. Only the admin and readiness ports are moved to
// free ones (pods have their own network namespace; here Envoys share loopback), and a
// dynamic base id keeps several Envoys apart.
func StartEnvoy(t testenv.TB, name string, bootstrap []byte) *Envoy {
	t.Helper()
	return StartEnvoyWith(t, name, bootstrap, 0)
}

// StartEnvoyWith is StartEnvoy with Envoy's number of worker threads (--concurrency; 0: one
// per core). Every worker opens its own socket per listener.
func StartEnvoyWith(t testenv.TB, name string, bootstrap []byte, workers int) *Envoy {
	t.Helper()
	bootstrap, ready := ownPorts(t, bootstrap)
	e := &Envoy{Envoy: testsupport.StartEnvoy(t, name, bootstrap, testsupport.EnvoyOptions{Node: name, LogLevel: "warning", Concurrency: workers}), ReadyAddr: ready}
	// What the kubelet's readiness probe asks.
	testsupport.WaitHTTP200(t, e.Process, "http://"+ready+xdsbootstrap.ReadyPath, time.Minute)
	return e
}

// MountXDSSecret plays the kubelet's mount of the fleet's xDS client Secret (the certificate
// naming the tenant, the CA and the SDS files, which the manager makes beside the bootstrap):
// it waits for the Secret, writes its files into a temporary directory and returns the
// bootstrap reading them from there.
func MountXDSSecret(t testenv.TB, c client.Reader, namespace string, bootstrap []byte) []byte {
	t.Helper()
	sec := &corev1.Secret{}
	testsupport.Eventually(t, time.Minute, "the xDS client Secret of "+namespace, func() error {
		return c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: pki.ClientSecretName}, sec)
	})
	return xdstest.Mount(t, bootstrap, sec.Data)
}

// Stat returns the value of one Envoy statistic, failing the test when Envoy does not report
// it.
func (e *Envoy) Stat(t testenv.TB, name string) int64 {
	t.Helper()
	v, err := e.Envoy.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ownPorts moves a bootstrap's admin interface, readiness and stats listeners to free loopback
// ports and returns the new bootstrap with the readiness address.
func ownPorts(t testenv.TB, bootstrap []byte) (out []byte, ready string) {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(bootstrap, &doc); err != nil {
		t.Fatalf("bootstrap is not YAML: %v", err)
	}
	adminPort, readyPort := testsupport.FreePort(t), testsupport.FreePort(t)
	socket := func(port int) map[string]any {
		return map[string]any{"socket_address": map[string]any{"address": "127.0.0.1", "port_value": port}}
	}
	doc["admin"] = map[string]any{"address": socket(adminPort)}
	static, _ := doc["static_resources"].(map[string]any)
	found := 0
	listeners, _ := static["listeners"].([]any)
	for _, l := range listeners {
		l, ok := l.(map[string]any)
		switch {
		case !ok:
		case l["name"] == xdsbootstrap.ReadyListenerName:
			l["address"] = socket(readyPort)
			found++
		case l["name"] == xdsbootstrap.StatsListenerName:
			l["address"] = socket(testsupport.FreePort(t))
		}
	}
	clusters, _ := static["clusters"].([]any)
	for _, c := range clusters {
		if c, ok := c.(map[string]any); ok && c["name"] == xdsbootstrap.AdminClusterName {
			c["load_assignment"] = map[string]any{"cluster_name": xdsbootstrap.AdminClusterName, "endpoints": []any{
				map[string]any{"lb_endpoints": []any{map[string]any{"endpoint": map[string]any{"address": socket(adminPort)}}}},
			}}
			found++
		}
	}
	if found != 2 {
		t.Fatalf("the bootstrap lacks the %s listener or the %s cluster", xdsbootstrap.ReadyListenerName, xdsbootstrap.AdminClusterName)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out, testsupport.Loopback(readyPort)
}

// PlayNamespaceController plays kube-controller-manager's namespace controller, which envtest
// does not run: a namespace being deleted is finalized once it holds no kubelb objects, so it
// goes away as in a real cluster. It runs until the test ends.
func PlayNamespaceController(t testenv.TB, cfg *rest.Config, c client.Client) {
	cs := kubernetes.NewForConfigOrDie(cfg)
	Every(t, PlayInterval, func(ctx context.Context) bool {
		var nss corev1.NamespaceList
		if err := c.List(ctx, &nss); err == nil {
			for i := range nss.Items {
				ns := &nss.Items[i]
				if ns.DeletionTimestamp == nil || len(ns.Spec.Finalizers) == 0 {
					continue
				}
				var lbs kubelbv1alpha1.LoadBalancerList
				if err := c.List(ctx, &lbs, client.InNamespace(ns.Name)); err != nil || len(lbs.Items) > 0 {
					continue
				}
				ns.Spec.Finalizers = nil
				_, _ = cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
			}
		}
		return false
	})
}
