package status_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/envoycp"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

const (
	tenant = "tenant-x"
	// managerNamespace holds Config "default".
	managerNamespace = "kubelb"
	timeout          = 30 * time.Second
)

// replica is one manager replica as cmd/kubelb wires it: xDS server, NACK recorder, status
// store and envoycp on every replica; the status writer on the leader only.
type replica struct {
	mgr     ctrl.Manager
	xdsAddr string
	elected <-chan struct{}
}

func startReplica(t *testing.T, hub *testenv.Cluster, name string) *replica {
	t.Helper()
	return startReplicaChecking(t, hub, name, xds.HealthChecking{})
}

// startReplicaChecking is startReplica whose proxies health-check the endpoints as checks
// says (the zero value: xds.DefaultHealthChecking).
func startReplicaChecking(t *testing.T, hub *testenv.Cluster, name string, checks xds.HealthChecking) *replica {
	t.Helper()
	addr := testsupport.Loopback(testsupport.FreePort(t))
	mgr := testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		srv := xds.NewServer(mgr.GetLogger().WithName("xds"), xdstest.New(t).ServerTLS())
		rec := status.NewRecorder(mgr.GetClient(), mgr.GetLogger(), name)
		srv.OnRejection(rec.Hear)
		srv.OnHealth(rec.HearHealth)
		srv.SetHealthChecking(checks)
		store := status.NewStore()
		return errors.Join(
			mgr.Add(srv.Runnable(addr)),
			mgr.Add(rec),
			envoycp.SetupWithManager(mgr, srv, store, nil, managerNamespace, translate.Options{ListenerAddress: "127.0.0.1"}),
			status.SetupWriterWithManager(mgr, store, status.WithEndpoints(srv.ClusterEndpoints)),
		)
	}, func(o *ctrl.Options) {
		o.LeaderElection = true
		o.LeaderElectionID = "kubelb-status-test"
		o.LeaderElectionNamespace = "kube-system"
		o.LeaderElectionReleaseOnCancel = true
		o.Logger = zap.New(zap.UseDevMode(true), zap.WriteTo(&testWriter{t: t, name: name}))
	})
	return &replica{mgr: mgr, xdsAddr: addr, elected: mgr.Elected()}
}

// testWriter sends a replica's logs to the test log.
type testWriter struct {
	t    *testing.T
	name string
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("[%s] %s", w.name, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// lb is a LoadBalancer as the ccm and the LoadBalancer controller leave it: one TCP port 80
// to NodePort 31080 whose listener port is listener; inline addresses when given, else
// Addresses "default".
func lb(name string, listener int, inline ...string) *v1alpha1.LoadBalancer {
	o := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant},
		Spec: v1alpha1.LoadBalancerSpec{
			Endpoints: []v1alpha1.LoadBalancerEndpoints{{Ports: []v1alpha1.EndpointPort{{Port: 31080}}}},
			Ports:     []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	if len(inline) == 0 {
		o.Spec.Endpoints[0].AddressesReference = &corev1.ObjectReference{Name: v1alpha1.DefaultAddressesName}
	}
	for _, a := range inline {
		o.Spec.Endpoints[0].Addresses = append(o.Spec.Endpoints[0].Addresses, v1alpha1.EndpointAddress{IP: a})
	}
	return o
}

func create(t *testing.T, c client.Client, o *v1alpha1.LoadBalancer, listener int) {
	t.Helper()
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	setListenerPort(t, c, o.Name, listener)
}

// setListenerPort plays the LoadBalancer controller's status write: the allocated port and
// the Ready condition (the Writer leaves a LoadBalancer alone until that controller reported).
func setListenerPort(t *testing.T, c client.Client, name string, listener int) {
	t.Helper()
	o := &v1alpha1.LoadBalancer{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: tenant, Name: name}, o); err != nil {
		t.Fatal(err)
	}
	sp := v1alpha1.ServicePort{UpstreamTargetPort: int32(listener)}
	sp.Port, sp.Protocol = 80, corev1.ProtocolTCP
	o.Status.Service.Ports = []v1alpha1.ServicePort{sp}
	meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AddressAssigned",
		Message: "played", ObservedGeneration: o.Generation})
	if err := c.Status().Update(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	setHubServicePort(t, c, o, listener)
}

// setHubServicePort plays the LoadBalancer controller's hub Service, the record of the
// allocation the translation reads: envoy-<name>, port 80 to the listener port.
func setHubServicePort(t *testing.T, c client.Client, o *v1alpha1.LoadBalancer, listener int) {
	t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{}
	key := types.NamespacedName{Namespace: tenant, Name: "envoy-" + o.Name}
	if err := c.Get(ctx, key, svc); err == nil {
		svc.Spec.Ports[0].TargetPort = intstr.FromInt(listener)
		if err := c.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
		return
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	svc = &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: tenant, Labels: map[string]string{
			v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue, v1alpha1.LabelLoadBalancerNS: tenant, v1alpha1.LabelLoadBalancerName: o.Name}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt(listener)}}},
	}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
}

// waitProgrammed waits until the LoadBalancer's Programmed condition has status and reason
// (and, when given, a message containing msg) and returns it.
func waitProgrammed(t *testing.T, c client.Client, name string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
	t.Helper()
	return waitProgrammedIn(t, c, tenant, name, st, reason, msg)
}

// waitEvent waits for an Event of type and reason regarding the LoadBalancer.
func waitEvent(t *testing.T, c client.Client, name, typ, reason, msg string) {
	t.Helper()
	waitEventIn(t, c, tenant, name, typ, reason, msg)
}

// waitEventIn is waitEvent for an object of namespace ns.
func waitEventIn(t *testing.T, c client.Client, ns, name, typ, reason, msg string) {
	t.Helper()
	testsupport.Eventually(t, timeout, fmt.Sprintf("%s Event %s/%s", name, typ, reason), func() error {
		evs := &eventsv1.EventList{}
		if err := c.List(context.Background(), evs, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Name == name && e.Type == typ && e.Reason == reason && strings.Contains(e.Note, msg) {
				return nil
			}
			seen = append(seen, e.Regarding.Name+":"+e.Reason)
		}
		return fmt.Errorf("events %v", seen)
	})
}

// TestProblemsBecomeStatus proves, on a real API server with a real Envoy connected to the
// standby replica, that an endpoint the endpoint policy denies, a rejected endpoint address, a listener port conflict and an Envoy
// NACK each show up as the Programmed condition and an Event on the LoadBalancer, and that
// the condition recovers when the problem goes away.
func TestProblemsBecomeStatus(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant, Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}},
		&v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantStateName, Namespace: tenant}},
		&v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultAddressesName, Namespace: tenant},
			Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.21"}}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	startLeader(t, hub, "replica-a")
	standby := startReplica(t, hub, "replica-b")
	b := xdstest.New(t).Bootstrap(t, bootstrap.Options{Tenant: tenant, XDSAddress: standby.xdsAddr, AdminAddress: "127.0.0.1:0"})
	testsupport.StartEnvoy(t, "envoy", b, testsupport.EnvoyOptions{Node: "proxy-on-standby"})

	// The tenant's "nodes" are loopback addresses, which the endpoint policy denies by
	// default: a LoadBalancer whose only address is one is not served ...
	// A server listens where the endpoint points (as Envoy's admin interface or a hub service
	// would): while the endpoint is denied, no connection through the public port reaches it.
	target := testsupport.StartTCPBackend(t, "127.0.0.22:31080", testsupport.Identity{Node: "hub", Pod: "admin"})
	local := testsupport.FreePort(t)
	create(t, c, lb("local", local, "127.0.0.22"), local)
	waitProgrammed(t, c, "local", metav1.ConditionFalse, translate.ReasonNoEndpoints,
		"EndpointDenied: endpoint address 127.0.0.22 is "+translate.DeniedByPolicy)
	waitEvent(t, c, "local", corev1.EventTypeWarning, translate.ReasonNoEndpoints, "127.0.0.22")
	for i := range 5 {
		if r, err := testsupport.TCPRoundTrip(testsupport.Loopback(local), fmt.Sprintf("probe-%d", i)); err == nil {
			t.Fatalf("a connection to the public port of a denied endpoint was answered by %s", r.Identity)
		}
	}
	if n := target.Connections(); n != 0 {
		t.Fatalf("the denied endpoint received %d connections, want none", n)
	}
	// ... until Config "default" allows them.
	config := &v1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: v1alpha1.DefaultConfigName},
		Spec: v1alpha1.ConfigSpec{EndpointPolicy: &v1alpha1.EndpointPolicy{Allow: []string{"127.0.0.0/8"}}}}
	if err := c.Create(ctx, config); err != nil {
		t.Fatal(err)
	}
	waitProgrammed(t, c, "local", metav1.ConditionTrue, status.ReasonProgrammed, "")
	// The same port now reaches it: the probes above were refused by the policy, not lost.
	testsupport.Eventually(t, timeout, "a round trip to the allowed endpoint", func() error {
		r, err := testsupport.TCPRoundTrip(testsupport.Loopback(local), "allowed")
		if err == nil && r.Identity != target.Identity {
			return fmt.Errorf("answered by %s", r.Identity)
		}
		return err
	})

	// The hub's Service CIDR (the API server's ServiceCIDR "kubernetes") stays denied.
	cidrs := &networkingv1.ServiceCIDRList{}
	if err := c.List(ctx, cidrs); err != nil || len(cidrs.Items) == 0 || len(cidrs.Items[0].Spec.CIDRs) == 0 {
		t.Fatalf("ServiceCIDRs %v, err %v", cidrs.Items, err)
	}
	svcIP := netip.MustParsePrefix(cidrs.Items[0].Spec.CIDRs[0]).Addr().Next().String()
	hubPort := testsupport.FreePort(t)
	create(t, c, lb("apiserver", hubPort, svcIP), hubPort)
	waitProgrammed(t, c, "apiserver", metav1.ConditionFalse, translate.ReasonNoEndpoints,
		"EndpointDenied: endpoint address "+svcIP+" is "+translate.DeniedByPolicy)

	// A hub Node that appears with the address of a served endpoint: it is denied from then on
	// (a Node change re-translates the tenants).
	nodeIP := "192.0.2.50"
	nodePort := testsupport.FreePort(t)
	create(t, c, lb("node", nodePort, nodeIP), nodePort)
	waitProgrammed(t, c, "node", metav1.ConditionTrue, status.ReasonProgrammed, "")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hub-node"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.7.0/24"}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}}
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	waitProgrammed(t, c, "node", metav1.ConditionFalse, translate.ReasonNoEndpoints,
		"EndpointDenied: endpoint address "+nodeIP+" is "+translate.DeniedByPolicy)

	good := testsupport.FreePort(t)
	create(t, c, lb("good", good), good)
	waitProgrammed(t, c, "good", metav1.ConditionTrue, status.ReasonProgrammed, "")

	t.Run("rejected endpoint address", func(t *testing.T) {
		// One address of several refused: served, degraded, with a Warning naming it.
		addrs := &v1alpha1.Addresses{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: tenant, Name: v1alpha1.DefaultAddressesName}, addrs); err != nil {
			t.Fatal(err)
		}
		addrs.Spec.Addresses = append(addrs.Spec.Addresses, v1alpha1.EndpointAddress{IP: "not-an-ip"})
		if err := c.Update(ctx, addrs); err != nil {
			t.Fatal(err)
		}
		waitProgrammed(t, c, "good", metav1.ConditionTrue, status.ReasonProgrammedWithWarnings, `InvalidAddress: endpoint address (ip "not-an-ip"`)
		waitEvent(t, c, "good", corev1.EventTypeWarning, status.ReasonProgrammedWithWarnings, "not-an-ip")

		// Every address refused: not served.
		p := testsupport.FreePort(t)
		create(t, c, lb("lonely", p, "999.1.1.1"), p)
		waitProgrammed(t, c, "lonely", metav1.ConditionFalse, translate.ReasonNoEndpoints, "TCP/80: NoEndpoints")
		waitEvent(t, c, "lonely", corev1.EventTypeWarning, translate.ReasonNoEndpoints, "999.1.1.1")

		// The address fixed: clean again, with a Normal Event.
		addrs.Spec.Addresses = addrs.Spec.Addresses[:1]
		if err := c.Update(ctx, addrs); err != nil {
			t.Fatal(err)
		}
		waitProgrammed(t, c, "good", metav1.ConditionTrue, status.ReasonProgrammed, "")
		waitEvent(t, c, "good", corev1.EventTypeNormal, status.ReasonProgrammed, "")
	})

	t.Run("listener port conflict", func(t *testing.T) {
		// Two hub Services that name one listener port (the allocator never hands a port out
		// twice; a hub Service edited by hand could): the newer LoadBalancer is not served.
		create(t, c, lb("newer", good), good)
		waitProgrammed(t, c, "newer", metav1.ConditionFalse, translate.ReasonListenerPortConflict, "is already used by good-tcp-80")
		waitEvent(t, c, "newer", corev1.EventTypeWarning, translate.ReasonListenerPortConflict, "good-tcp-80")
		waitProgrammed(t, c, "good", metav1.ConditionTrue, status.ReasonProgrammed, "")
	})

	t.Run("NACK on a standby replica", func(t *testing.T) {
		// Valid configuration Envoy cannot apply: another process holds the listener port.
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		busyPort := busy.Addr().(*net.TCPAddr).Port
		create(t, c, lb("busy", busyPort), busyPort)
		cond := waitProgrammed(t, c, "busy", metav1.ConditionFalse, status.ReasonRejected, "Envoy proxy proxy-on-standby rejected the configuration")
		if !strings.Contains(cond.Message, "busy-tcp-80") {
			t.Errorf("message %q does not name the rejected listener", cond.Message)
		}
		waitEvent(t, c, "busy", corev1.EventTypeWarning, status.ReasonRejected, "busy-tcp-80")
		// The standby wrote the NACK into the TenantState under its own field owner.
		ts := &v1alpha1.TenantState{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: tenant, Name: hubnames.TenantStateName}, ts); err != nil {
			t.Fatal(err)
		}
		if len(ts.Status.Rejections) != 1 || ts.Status.Rejections[0].Replica != "replica-b" || ts.Status.Rejections[0].Proxy != "proxy-on-standby" {
			t.Fatalf("rejections %+v; want one from replica-b for proxy-on-standby", ts.Status.Rejections)
		}
		owned := false
		for _, mf := range ts.ManagedFields {
			owned = owned || (mf.Manager == "kubelb-xds/replica-b" && mf.Subresource == "status")
		}
		if !owned {
			t.Errorf("the rejection is not owned by kubelb-xds/replica-b: %v", ts.ManagedFields)
		}
		// The other LoadBalancers are unaffected.
		waitProgrammed(t, c, "good", metav1.ConditionTrue, status.ReasonProgrammed, "")

		// Move the listener to a free port: Envoy accepts, the rejection is resolved, and
		// the LoadBalancer is Programmed again with a Normal Event.
		busy.Close()
		setListenerPort(t, c, "busy", testsupport.FreePort(t))
		waitProgrammed(t, c, "busy", metav1.ConditionTrue, status.ReasonProgrammed, "")
		waitEvent(t, c, "busy", corev1.EventTypeNormal, status.ReasonProgrammed, "")
		testsupport.Eventually(t, timeout, "the rejection to be removed from the TenantState", func() error {
			if err := c.Get(ctx, types.NamespacedName{Namespace: tenant, Name: hubnames.TenantStateName}, ts); err != nil {
				return err
			}
			if len(ts.Status.Rejections) > 0 {
				return fmt.Errorf("rejections %v", ts.Status.Rejections)
			}
			return nil
		})
	})
	t.Run("over the tenant's limits", func(t *testing.T) {
		// A Tenant that may hold exactly the LoadBalancers there are: the next one is not
		// served, says why, and is served once the limit is raised.
		lbs := &v1alpha1.LoadBalancerList{}
		if err := c.List(ctx, lbs, client.InNamespace(tenant)); err != nil {
			t.Fatal(err)
		}
		n := int32(len(lbs.Items))
		tn := &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantName(tenant)},
			Spec: v1alpha1.TenantSpec{Limits: v1alpha1.Limits{LoadBalancers: &n}}}
		if err := c.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
		p := testsupport.FreePort(t)
		create(t, c, lb("zz-over", p), p) // the newest, and the last by name
		waitProgrammed(t, c, "zz-over", metav1.ConditionFalse, quota.ReasonQuotaExceeded,
			fmt.Sprintf("may hold %d LoadBalancers (spec.limits.loadBalancers)", n))
		waitEvent(t, c, "zz-over", corev1.EventTypeWarning, quota.ReasonQuotaExceeded, "spec.limits.loadBalancers")
		waitProgrammed(t, c, "good", metav1.ConditionTrue, status.ReasonProgrammed, "")

		more := n + 1
		tn.Spec.Limits.LoadBalancers = &more
		if err := c.Update(ctx, tn); err != nil {
			t.Fatal(err)
		}
		waitProgrammed(t, c, "zz-over", metav1.ConditionTrue, status.ReasonProgrammed, "")
	})

	t.Run("source ranges", func(t *testing.T) {
		// Room for one more LoadBalancer under the Tenant's limit of the subtest before.
		testsupport.Eventually(t, timeout, "raising the tenant's limit", func() error {
			lbs := &v1alpha1.LoadBalancerList{}
			if err := c.List(ctx, lbs, client.InNamespace(tenant)); err != nil {
				return err
			}
			tn := &v1alpha1.Tenant{}
			if err := c.Get(ctx, types.NamespacedName{Name: hubnames.TenantName(tenant)}, tn); err != nil {
				return client.IgnoreNotFound(err)
			}
			n := int32(len(lbs.Items) + 1)
			tn.Spec.Limits.LoadBalancers = &n
			return c.Update(ctx, tn)
		})
		// An entry that is not a CIDR: nothing of the LoadBalancer is served (fail closed), and
		// the condition and the Event name the entry.
		p := testsupport.FreePort(t)
		office := lb("office", p)
		office.Spec.SourceRanges = []string{"127.0.0.0/8", "office-network"}
		create(t, c, office, p)
		waitProgrammed(t, c, "office", metav1.ConditionFalse, translate.ReasonInvalidSourceRanges, `"office-network" is not a CIDR`)
		waitEvent(t, c, "office", corev1.EventTypeWarning, translate.ReasonInvalidSourceRanges, "office-network")
		if r, err := testsupport.TCPRoundTrip(testsupport.Loopback(p), "refused"); err == nil {
			t.Fatalf("a LoadBalancer with unreadable source ranges was served (by %s)", r.Identity)
		}
		// Fixed: served to the ranges, with a warning that its hub Service (of type ClusterIP,
		// as played here) hides the clients' addresses.
		testsupport.Eventually(t, timeout, "fixing the source ranges", func() error {
			cur := &v1alpha1.LoadBalancer{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: tenant, Name: "office"}, cur); err != nil {
				return err
			}
			cur.Spec.SourceRanges = []string{"127.0.0.0/8"}
			return c.Update(ctx, cur)
		})
		waitProgrammed(t, c, "office", metav1.ConditionTrue, status.ReasonProgrammedWithWarnings, "ClientAddressUnknown: the hub Service is of type ClusterIP")
		waitEvent(t, c, "office", corev1.EventTypeWarning, status.ReasonProgrammedWithWarnings, "ClientAddressUnknown")
	})
}
