package status_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// TestHostileTenantNeitherWeaponNorMap: tenant b, hostile, aims its LoadBalancers at other
// clouds' metadata addresses, at special-purpose ranges, at the hub's own ranges (Service
// CIDR, Pod CIDR, node address), and at IPv6 forms (NAT64, 6to4, IPv4-mapped) of the hub's
// addresses and of the loopback address where tenant a's backend listens (which a's Tenant
// allows for a alone). Every one is refused before it reaches b's Envoy (NoEndpoints), what b
// reads (the Programmed conditions and the Events in its namespace) names its own addresses
// and "denied by the hub's endpoint policy" and none of the hub's ranges or rule sources,
// no connection through b's public ports reaches a's backend, and a is served throughout.
func TestHostileTenantNeitherWeaponNorMap(t *testing.T) {
	const victim, attacker = "tenant-a", "tenant-b"
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	victimBackend := "127.0.0.31"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}},
		// a's nodes live on loopback: its Tenant opens exactly that address, for a only.
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"},
			Spec: v1alpha1.TenantSpec{EndpointPolicy: &v1alpha1.EndpointPolicy{Allow: []string{victimBackend + "/32"}}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tenantNamespaces(t, c, victim, attacker)
	// The hub: its API server's ServiceCIDR, and a Node with a Pod CIDR and an address.
	cidrs := &networkingv1.ServiceCIDRList{}
	if err := c.List(ctx, cidrs); err != nil || len(cidrs.Items) == 0 || len(cidrs.Items[0].Spec.CIDRs) == 0 {
		t.Fatalf("ServiceCIDRs %v, err %v", cidrs.Items, err)
	}
	svcCIDR := cidrs.Items[0].Spec.CIDRs[0]
	svcIP := netip.MustParsePrefix(svcCIDR).Addr().Next()
	const podCIDR, podIP, nodeIP = "10.244.7.0/24", "10.244.7.5", "192.0.2.60"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hub-node"}, Spec: corev1.NodeSpec{PodCIDRs: []string{podCIDR}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}}
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}

	r := startLeader(t, hub, "replica")
	envoysOf(t, r, victim, attacker)

	// The victim is served.
	backend := testsupport.StartTCPBackend(t, victimBackend+":31080", testsupport.Identity{Node: "a", Pod: "web"})
	victimPort := testsupport.FreePort(t)
	createLB(t, c, victim, "web", victimPort, victimBackend)
	waitProgrammedIn(t, c, victim, "web", metav1.ConditionTrue, status.ReasonProgrammed, "")
	roundTrip := func(what string) {
		t.Helper()
		testsupport.Eventually(t, timeout, what, func() error {
			rep, err := testsupport.TCPRoundTrip(testsupport.Loopback(victimPort), what)
			if err == nil && rep.Identity != backend.Identity {
				return fmt.Errorf("answered by %s", rep.Identity)
			}
			return err
		})
	}
	roundTrip("before the attack")
	// Requests, not connections: the proxies' health checks (HDS, BackendsReachable) connect
	// to the victim's backend now and then, without sending anything.
	victimRequests := backend.Requests()

	// The attack: every address below is one the hub must never be pointed at.
	v4 := func(a string) [4]byte { return netip.MustParseAddr(a).As4() }
	nat64 := func(a string) string {
		b := v4(a)
		return netip.AddrFrom16([16]byte{0, 0x64, 0xff, 0x9b, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}).String()
	}
	sixToFour := func(a string) string {
		b := v4(a)
		return netip.AddrFrom16([16]byte{0x20, 0x02, b[0], b[1], b[2], b[3], 15: 1}).String()
	}
	attacks := map[string][]string{
		"metadata": {"100.100.100.200", "168.63.129.16", "fd00:ec2::254", "192.0.0.192", "169.254.169.254"},
		"special":  {"255.255.255.255", "0.1.2.3", "240.0.0.1", "2001::1", "64:ff9b:1::1"},
		"hub":      {svcIP.String(), podIP, nodeIP},
		"embedded": {nat64(victimBackend), sixToFour(victimBackend), "::ffff:" + victimBackend,
			nat64(svcIP.String()), sixToFour(svcIP.String()), nat64(podIP), sixToFour(nodeIP), nat64("100.100.100.200")},
	}
	names := []string{"metadata", "special", "hub", "embedded"}
	ports := map[string]int{}
	for _, name := range names {
		ports[name] = testsupport.FreePort(t)
		createLB(t, c, attacker, name, ports[name], attacks[name]...)
	}
	for _, name := range names {
		cond := waitProgrammedIn(t, c, attacker, name, metav1.ConditionFalse, translate.ReasonNoEndpoints, "")
		for _, a := range attacks[name] {
			a = strings.TrimPrefix(a, "::ffff:")
			if !strings.Contains(cond.Message, "endpoint address "+a+" is "+translate.DeniedByPolicy) {
				t.Errorf("b's LoadBalancer %s: the condition %q does not say that %s is %s", name, cond.Message, a, translate.DeniedByPolicy)
			}
		}
	}
	for name, port := range ports {
		for i := range 3 {
			if rep, err := testsupport.TCPRoundTrip(testsupport.Loopback(port), fmt.Sprintf("%s-%d", name, i)); err == nil {
				t.Errorf("b's public port of %s was answered by %s", name, rep.Identity)
			}
		}
	}

	// What b reads reveals nothing of the hub: no range, no rule source.
	hubSecrets := []string{svcCIDR, podCIDR, nodeIP + "/32", "127.0.0.0/8", "169.254.0.0/16", "240.0.0.0/4",
		"fd00:ec2::/32", translate.SourceHubServiceCIDR, translate.SourceHubPodCIDR, translate.SourceHubNode,
		"(" + translate.SourceDefault, "carried by"}
	var read []string
	lbs := &v1alpha1.LoadBalancerList{}
	if err := c.List(ctx, lbs, client.InNamespace(attacker)); err != nil {
		t.Fatal(err)
	}
	for _, o := range lbs.Items {
		for _, cond := range o.Status.Conditions {
			read = append(read, cond.Message)
		}
	}
	testsupport.Eventually(t, timeout, "b's Events", func() error {
		evs := &eventsv1.EventList{}
		if err := c.List(ctx, evs, client.InNamespace(attacker)); err != nil {
			return err
		}
		n := 0
		for _, e := range evs.Items {
			if e.Reason == translate.ReasonNoEndpoints {
				n++
			}
		}
		if n < len(ports) {
			return fmt.Errorf("%d NoEndpoints Events, want %d", n, len(ports))
		}
		for _, e := range evs.Items {
			read = append(read, e.Note)
		}
		return nil
	})
	leaks := 0
	for _, msg := range read {
		for _, s := range hubSecrets {
			if strings.Contains(msg, s) {
				leaks++
				t.Errorf("b reads %q, which reveals %q", msg, s)
			}
		}
	}
	t.Logf("b read %d condition and Event messages; %d name a hub range or rule", len(read), leaks)

	// The victim: served throughout, its backend reached only through its own port.
	if n := backend.Requests(); n != victimRequests {
		t.Errorf("a's backend answered %d requests during the attack, want none", n-victimRequests)
	}
	roundTrip("after the attack")
	waitProgrammedIn(t, c, victim, "web", metav1.ConditionTrue, status.ReasonProgrammed, "")
}

// createLB creates a LoadBalancer in ns to inline addresses (port 80 to NodePort 31080) and
// plays the LoadBalancer controller: the listener port in its status and its hub Service.
func createLB(t *testing.T, c client.Client, ns, name string, listener int, addrs ...string) {
	t.Helper()
	createLBWith(t, c, ns, name, listener, nil, addrs...)
}

// createLBWith is createLB with annotations on the LoadBalancer.
func createLBWith(t *testing.T, c client.Client, ns, name string, listener int, annotations map[string]string, addrs ...string) {
	t.Helper()
	ctx := context.Background()
	o := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec: v1alpha1.LoadBalancerSpec{
			Endpoints: []v1alpha1.LoadBalancerEndpoints{{Ports: []v1alpha1.EndpointPort{{Port: 31080}}}},
			Ports:     []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	for _, a := range addrs {
		o.Spec.Endpoints[0].Addresses = append(o.Spec.Endpoints[0].Addresses, v1alpha1.EndpointAddress{IP: a})
	}
	if err := c.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	sp := v1alpha1.ServicePort{UpstreamTargetPort: int32(listener)}
	sp.Port, sp.Protocol = 80, corev1.ProtocolTCP
	o.Status.Service.Ports = []v1alpha1.ServicePort{sp}
	meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AddressAssigned",
		Message: "played", ObservedGeneration: o.Generation})
	if err := c.Status().Update(ctx, o); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "envoy-" + name, Namespace: ns, Labels: map[string]string{
			v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue, v1alpha1.LabelLoadBalancerNS: ns, v1alpha1.LabelLoadBalancerName: name}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt(listener)}}},
	}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
}

// waitProgrammedIn is waitProgrammed for a LoadBalancer of namespace ns.
func waitProgrammedIn(t *testing.T, c client.Client, ns, name string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	testsupport.Eventually(t, timeout, fmt.Sprintf("%s/%s Programmed=%s/%s", ns, name, st, reason), func() error {
		o := &v1alpha1.LoadBalancer{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, o); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(o.Status.Conditions, status.ConditionProgrammed)
		if cond == nil {
			return fmt.Errorf("no Programmed condition")
		}
		got = *cond
		if cond.Status == st && cond.Reason == reason && strings.Contains(cond.Message, msg) && cond.ObservedGeneration == o.Generation {
			return nil
		}
		return fmt.Errorf("%s/%s %q gen %d/%d", cond.Status, cond.Reason, cond.Message, cond.ObservedGeneration, o.Generation)
	})
	return got
}

// TestHostileTenantHealthChecksBounded: tenant b, hostile, points a LoadBalancer at many
// endpoints with a health-check interval of one second, to make the hub's proxies probe them
// as fast as it may. Its budget (spec.limits.healthCheckProbesPerSecond 10, with the default
// fleet of 3 proxies: 40 endpoints × 3 / 1 s = 120 probes/s asked) stretches the interval to
// 16 s (a factor of 12, rounded up to a power of two) in the configuration b's Envoy runs, b's LoadBalancer says its checks run less often (HealthCheckThrottled),
// and tenant a, whose one endpoint asks 3 probes/s, keeps its 1 s interval and is served.
// The probes the endpoints receive are measured and logged (docs/security.md).
func TestHostileTenantHealthChecksBounded(t *testing.T) {
	const victim, attacker, endpoints = "tenant-a", "tenant-b", 40
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	victimBackend := "127.0.0.32"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}},
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"},
			Spec: v1alpha1.TenantSpec{EndpointPolicy: &v1alpha1.EndpointPolicy{Allow: []string{victimBackend + "/32"}}}},
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: v1alpha1.TenantSpec{EndpointPolicy: &v1alpha1.EndpointPolicy{Allow: []string{"127.1.0.0/24"}},
				Limits: v1alpha1.Limits{HealthCheckProbesPerSecond: ptrTo(int32(10))}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tenantNamespaces(t, c, victim, attacker)
	r := startLeader(t, hub, "replica")
	envoys := envoysOf(t, r, victim, attacker)
	// Every second, with traffic or without (the no-traffic interval is the tenant's too).
	everySecond := map[string]string{v1alpha1.AnnotationHealthCheckInterval: "1s", v1alpha1.AnnotationHealthCheckNoTrafficInterval: "1s"}

	nodePort := testsupport.FreePort(t)
	victimBackendSrv := testsupport.StartTCPBackend(t, fmt.Sprintf("%s:%d", victimBackend, nodePort), testsupport.Identity{Node: "a", Pod: "web"})
	victimPort := testsupport.FreePort(t)
	createLBWithPort(t, c, victim, "web", victimPort, nodePort, everySecond, victimBackend)

	var targets []string
	var floods []*testsupport.Backend
	for i := 1; i <= endpoints; i++ {
		ip := fmt.Sprintf("127.1.0.%d", i)
		targets = append(targets, ip)
		floods = append(floods, testsupport.StartTCPBackend(t, fmt.Sprintf("%s:%d", ip, nodePort), testsupport.Identity{Node: ip, Pod: "target"}))
	}
	createLBWithPort(t, c, attacker, "flood", testsupport.FreePort(t), nodePort, everySecond, targets...)

	cond := waitProgrammedIn(t, c, attacker, "flood", metav1.ConditionTrue, status.ReasonProgrammedWithWarnings, translate.ReasonHealthCheckThrottled)
	if !strings.Contains(cond.Message, "they run less often than asked") || strings.Contains(cond.Message, "16s") {
		t.Errorf("b's LoadBalancer: %q, want its checks said to run less often, not the stretched interval (it follows the tenant's size)", cond.Message)
	}
	waitProgrammedIn(t, c, victim, "web", metav1.ConditionTrue, status.ReasonProgrammed, "")
	interval := func(ns, cluster, want string) {
		t.Helper()
		testsupport.Eventually(t, timeout, fmt.Sprintf("%s's Envoy checks %s every %s", ns, cluster, want), func() error {
			// With ?resource=, each config is one DynamicCluster.
			var dump struct {
				Configs []struct {
					Cluster struct {
						Name         string `json:"name"`
						HealthChecks []struct {
							Interval string `json:"interval"`
						} `json:"health_checks"`
					} `json:"cluster"`
				} `json:"configs"`
			}
			if err := envoys[ns].ConfigDump("?resource=dynamic_active_clusters", &dump); err != nil {
				return err
			}
			for _, dc := range dump.Configs {
				if dc.Cluster.Name == cluster {
					if len(dc.Cluster.HealthChecks) == 1 && dc.Cluster.HealthChecks[0].Interval == want {
						return nil
					}
					return fmt.Errorf("health checks %+v", dc.Cluster.HealthChecks)
				}
			}
			return fmt.Errorf("no cluster %s", cluster)
		})
	}
	interval(attacker, "flood-tcp-80", "16s")
	interval(victim, "web-tcp-80", "1s")
	rep, err := testsupport.TCPRoundTrip(testsupport.Loopback(victimPort), "served")
	if err != nil || rep.Identity != victimBackendSrv.Identity {
		t.Errorf("a's round trip: %v from %v", err, rep.Identity)
	}

	// The figures: probes sent over a window, against what b asked for.
	// Envoy counts its health-check probes per cluster (health checks are not connections
	// the test backends count: they connect and close).
	// The cluster's stats carry its readable stat name; each proxy has one checked cluster.
	attempts := func(ns, _ string) int64 {
		// (Not the clusters the proxy checks for the manager, hds.tcp and hds.check-<hash>: see TestBackendsReachable.)
		stats, err := envoys[ns].Stats(`^cluster\.[^.]+\.health_check\.attempt$`)
		if err != nil || len(stats) != 1 {
			t.Fatalf("%s's health-check stats %v, err %v", ns, stats, err)
		}
		var n int64
		for _, v := range stats {
			n += v
		}
		return n
	}
	before, victimBefore, start := attempts(attacker, "flood-tcp-80"), attempts(victim, "web-tcp-80"), time.Now()
	time.Sleep(24 * time.Second)
	window := time.Since(start).Seconds()
	t.Logf("b's Envoy sent %.2f probes/s to its %d endpoints (asked: %d/s per proxy; budget 10/s for its 3 proxies); a's Envoy %.2f probes/s to its one endpoint (asked 1/s)",
		float64(attempts(attacker, "flood-tcp-80")-before)/window, endpoints, endpoints, float64(attempts(victim, "web-tcp-80")-victimBefore)/window)
}

func ptrTo[T any](v T) *T { return &v }

// createLBWithPort is createLBWith with the endpoints' port (the NodePort) given.
func createLBWithPort(t *testing.T, c client.Client, ns, name string, listener, nodePort int, annotations map[string]string, addrs ...string) {
	t.Helper()
	createLBWith(t, c, ns, name, listener, annotations, addrs...)
	o := &v1alpha1.LoadBalancer{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, o); err != nil {
		t.Fatal(err)
	}
	o.Spec.Endpoints[0].Ports[0].Port = int32(nodePort)
	if err := c.Update(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// tenantNamespaces creates the tenant namespaces (labelled as the manager makes them) with
// their TenantStates.
func tenantNamespaces(t *testing.T, c client.Client, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		for _, o := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}},
			&v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantStateName, Namespace: ns}},
		} {
			if err := c.Create(context.Background(), o); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// startLeader starts a replica and waits until it is elected.
func startLeader(t *testing.T, hub *testenv.Cluster, name string) *replica {
	t.Helper()
	r := startReplica(t, hub, name)
	select {
	case <-r.elected:
	case <-time.After(timeout):
		t.Fatalf("%s was not elected", name)
	}
	return r
}

// envoysOf starts one real Envoy per tenant namespace, fed by replica r, by namespace.
func envoysOf(t *testing.T, r *replica, namespaces ...string) map[string]*testsupport.Envoy {
	t.Helper()
	out := map[string]*testsupport.Envoy{}
	for _, ns := range namespaces {
		b := xdstest.New(t).Bootstrap(t, bootstrap.Options{Tenant: ns, XDSAddress: r.xdsAddr, AdminAddress: "127.0.0.1:0"})
		out[ns] = testsupport.StartEnvoy(t, "envoy-"+ns, b, testsupport.EnvoyOptions{Node: "proxy-" + ns})
	}
	return out
}
