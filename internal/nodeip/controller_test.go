package nodeip

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

const wait = 30 * time.Second

// hubEnv is a real API server playing a hub, with the node-IP mode running as the manager runs
// it (--address-provider=node-ip --node-ip-nat).
type hubEnv struct {
	c   client.Client
	ctx context.Context
}

func newHubEnv(t *testing.T) *hubEnv {
	t.Helper()
	cluster := testenv.Start(t, "hub", testenv.Options{})
	e := &hubEnv{c: cluster.Client, ctx: t.Context()}
	for _, ns := range []string{"kubelb", "tenant-a", "tenant-b", "tenant-c"} {
		e.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for _, name := range []string{"a", "b", "c"} {
		tn := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if name == "b" {
			tn.Spec.LoadBalancer.NodeSet = ptr.To("blue")
		}
		e.create(t, tn)
	}
	testenv.StartManager(t, cluster.Config, func(mgr ctrl.Manager) error {
		return Setup(mgr, HubOptions(settings.Reader{Client: mgr.GetClient(), ManagerNamespace: "kubelb"}.NodeSet, "", nil, true))
	})
	return e
}

func (e *hubEnv) create(t *testing.T, o client.Object) {
	t.Helper()
	if err := e.c.Create(e.ctx, o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

// node registers a Ready node of a node set ("-": unlabelled) with addresses given as
// type=address pairs.
func (e *hubEnv) node(t *testing.T, name, set string, addrs ...string) {
	t.Helper()
	n := node(name, true, addrs...)
	if set != "-" {
		n.Labels = map[string]string{LabelUseAsLoadBalancer: set}
	}
	status := n.Status
	e.create(t, &n)
	n.Status = status
	if err := e.c.Status().Update(e.ctx, &n); err != nil {
		t.Fatal(err)
	}
}

func (e *hubEnv) updateNode(t *testing.T, name string, change func(*corev1.Node), status bool) {
	t.Helper()
	testsupport.Eventually(t, wait, "updating node "+name, func() error {
		n := &corev1.Node{}
		if err := e.c.Get(e.ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		change(n)
		if status {
			return e.c.Status().Update(e.ctx, n)
		}
		return e.c.Update(e.ctx, n)
	})
}

// hubService creates a hub Service of type LoadBalancer as the manager makes them (kubelb's
// label) in a tenant namespace, on one TCP port.
func (e *hubEnv) hubService(t *testing.T, ns, name string, port int32, kubelbs bool) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
		Type:     corev1.ServiceTypeLoadBalancer,
		Selector: map[string]string{"app.kubernetes.io/name": "envoy", "kubelb.k8c.io/tenant": ns},
		Ports:    []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromInt32(10000 + port), Protocol: corev1.ProtocolTCP}},
	}}
	if kubelbs {
		svc.Labels = map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}
	}
	e.create(t, svc)
	return svc
}

func (e *hubEnv) get(t *testing.T, ns, name string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	return svc
}

// waitIngress waits until the Service shows exactly these addresses (none: pending).
func (e *hubEnv) waitIngress(t *testing.T, ns, name string, want ...string) {
	t.Helper()
	testsupport.Eventually(t, wait, fmt.Sprintf("%s/%s addressed %v", ns, name, want), func() error {
		var got []string
		for _, in := range e.get(t, ns, name).Status.LoadBalancer.Ingress {
			got = append(got, in.IP)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("ingress %v", got)
		}
		return nil
	})
}

// waitPending waits for the condition AddressAssigned=False with reason on the Service, whose
// message contains want, and a Warning Event of that reason; it returns the message.
func (e *hubEnv) waitPending(t *testing.T, ns, name, reason, want string) string {
	t.Helper()
	var msg string
	testsupport.Eventually(t, wait, fmt.Sprintf("%s/%s pending with %s", ns, name, reason), func() error {
		c := meta.FindStatusCondition(e.get(t, ns, name).Status.Conditions, lbaddress.ConditionAddressAssigned)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, want) {
			return fmt.Errorf("condition %+v", c)
		}
		msg = c.Message
		return nil
	})
	e.waitEvent(t, ns, name, reason)
	return msg
}

func (e *hubEnv) waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	testsupport.Eventually(t, wait, fmt.Sprintf("a Warning %s Event on %s/%s", reason, ns, name), func() error {
		evs := &eventsv1.EventList{}
		if err := e.c.List(e.ctx, evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Name == name && ev.Type == corev1.EventTypeWarning && ev.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no such Event among %d", len(evs.Items))
	})
}

// TestHubNodeSets: in the hub, a tenant's hub Services get the addresses of the hub nodes of
// the tenant's spec.loadBalancer.nodeSet; tenants on disjoint sets use the same port, a tenant
// on the same set waits for the port without learning whose Service holds it, and a change of
// the Tenant's node set or of a node is followed. A hub Service kubelb did not make is never
// written.
func TestHubNodeSets(t *testing.T) {
	e := newHubEnv(t)
	e.node(t, "h1", "true", in, "10.1.0.1")
	e.node(t, "h2", "blue", in, "10.1.0.2")
	e.node(t, "h4", "-", in, "10.1.0.4")

	e.hubService(t, "tenant-a", "web", 80, true)
	e.waitIngress(t, "tenant-a", "web", "10.1.0.1")
	e.hubService(t, "tenant-b", "web", 80, true)
	e.waitIngress(t, "tenant-b", "web", "10.1.0.2") // a disjoint set: the same port is free there

	// Tenant c shares the default set with a: it waits, and is not told whose Service it is.
	e.hubService(t, "tenant-c", "web", 80, true)
	msg := e.waitPending(t, "tenant-c", "web", ReasonPortConflict, "held by a Service of another tenant")
	if strings.Contains(msg, "tenant-a") {
		t.Errorf("the message names another tenant's Service: %q", msg)
	}

	// Not kubelb's: left alone.
	e.hubService(t, "tenant-a", "foreign", 81, false)

	// Node readiness and labels are followed.
	e.updateNode(t, "h4", func(n *corev1.Node) { n.Labels = map[string]string{LabelUseAsLoadBalancer: ""} }, false)
	e.waitIngress(t, "tenant-a", "web", "10.1.0.1", "10.1.0.4")
	e.updateNode(t, "h1", func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	}, true)
	e.waitIngress(t, "tenant-a", "web", "10.1.0.4")

	// The holder goes: c gets the port.
	if err := e.c.Delete(e.ctx, e.get(t, "tenant-a", "web")); err != nil {
		t.Fatal(err)
	}
	e.waitIngress(t, "tenant-c", "web", "10.1.0.4")

	// Tenant c moves to b's set, where b holds port 80 since earlier: pending again.
	tc := &kubelbv1alpha1.Tenant{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Name: "c"}, tc); err != nil {
		t.Fatal(err)
	}
	tc.Spec.LoadBalancer.NodeSet = ptr.To("blue")
	if err := e.c.Update(e.ctx, tc); err != nil {
		t.Fatal(err)
	}
	e.waitPending(t, "tenant-c", "web", ReasonPortConflict, "on 10.1.0.2 is held by a Service of another tenant")
	e.waitIngress(t, "tenant-c", "web")

	foreign := e.get(t, "tenant-a", "foreign")
	if len(foreign.Status.LoadBalancer.Ingress) != 0 || len(foreign.Status.Conditions) != 0 {
		t.Errorf("a hub Service kubelb did not make was written: %+v", foreign.Status)
	}
}

// TestNATShadows: with NAT on, a Service whose nodes' public addresses are not their private
// ones gets a ClusterIP shadow with the private addresses as externalIPs and its selector and
// ports; the shadow follows the nodes, goes when the Service goes pending or is deleted, and a
// Service of that name kubelb did not make is never overwritten.
func TestNATShadows(t *testing.T) {
	e := newHubEnv(t)
	e.node(t, "n1", "true", ext, "192.0.2.1", in, "10.1.0.1") // a cloud's 1:1 NAT
	e.node(t, "n2", "true", in, "10.1.0.2")                   // public = private: no shadow entry

	web := e.hubService(t, "tenant-a", "web", 80, true)
	e.waitIngress(t, "tenant-a", "web", "10.1.0.2", "192.0.2.1")
	shadow := func(want ...string) {
		t.Helper()
		testsupport.Eventually(t, wait, fmt.Sprintf("the NAT shadow of web with externalIPs %v", want), func() error {
			sh := &corev1.Service{}
			err := e.c.Get(e.ctx, client.ObjectKey{Namespace: "tenant-a", Name: "web-kubelb-nat"}, sh)
			if len(want) == 0 {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("still there (%v)", err)
			}
			if err != nil {
				return err
			}
			if sh.Spec.Type != corev1.ServiceTypeClusterIP || !slices.Equal(sh.Spec.ExternalIPs, want) ||
				!samePorts(sh.Spec.Ports, web.Spec.Ports) || sh.Spec.Selector["kubelb.k8c.io/tenant"] != "tenant-a" ||
				len(sh.OwnerReferences) != 1 || sh.OwnerReferences[0].UID != web.UID {
				return fmt.Errorf("shadow %+v", sh.Spec)
			}
			return nil
		})
	}
	shadow("10.1.0.1")

	// The private address comes from the node's annotation.
	e.updateNode(t, "n1", func(n *corev1.Node) {
		n.Annotations = map[string]string{AnnotationPrivateAddresses: "10.9.0.1"}
	}, false)
	shadow("10.9.0.1")

	// A shadow the API server refuses (externalIPs may not be loopback; admission such as
	// DenyServiceExternalIPs refuses any): a Warning Event on the Service, which keeps its
	// addresses and its last shadow; a valid address again updates the shadow.
	e.updateNode(t, "n1", func(n *corev1.Node) {
		n.Annotations = map[string]string{AnnotationPrivateAddresses: "127.0.0.9"}
	}, false)
	e.waitEvent(t, "tenant-a", "web", ReasonNATServiceRejected)
	e.waitIngress(t, "tenant-a", "web", "10.1.0.2", "192.0.2.1")
	shadow("10.9.0.1")
	e.updateNode(t, "n1", func(n *corev1.Node) {
		n.Annotations = map[string]string{AnnotationPrivateAddresses: "10.9.0.3"}
	}, false)
	shadow("10.9.0.3")

	// Someone else's Service has the shadow name of "other": it is not touched.
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "other-kubelb-nat"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1, Protocol: corev1.ProtocolTCP}}}}
	e.create(t, foreign)
	e.hubService(t, "tenant-a", "other", 81, true)
	e.waitIngress(t, "tenant-a", "other", "10.1.0.2", "192.0.2.1")
	e.waitEvent(t, "tenant-a", "other", ReasonNATServiceNameTaken)
	if got := e.get(t, "tenant-a", "other-kubelb-nat"); len(got.Spec.ExternalIPs) != 0 || got.Labels[LabelNATShadowOf] != "" {
		t.Errorf("a Service kubelb did not make was overwritten: %+v", got)
	}

	// No node in the set: pending, and the shadow goes.
	for _, n := range []string{"n1", "n2"} {
		e.updateNode(t, n, func(n *corev1.Node) { delete(n.Labels, LabelUseAsLoadBalancer) }, false)
	}
	e.waitPending(t, "tenant-a", "web", ReasonNoLoadBalancerNodes, LabelUseAsLoadBalancer+"=true")
	shadow()

	// Back, then the Service is deleted: the shadow goes with it (no garbage collector here).
	e.updateNode(t, "n1", func(n *corev1.Node) { n.Labels = map[string]string{LabelUseAsLoadBalancer: "true"} }, false)
	shadow("10.9.0.3")
	if err := e.c.Delete(e.ctx, e.get(t, "tenant-a", "web")); err != nil {
		t.Fatal(err)
	}
	shadow()
}

func TestShadowName(t *testing.T) {
	if got := ShadowName("web"); got != "web-kubelb-nat" {
		t.Errorf("ShadowName(web) = %q", got)
	}
	long := strings.Repeat("a", 63)
	got, again := ShadowName(long), ShadowName(long)
	if len(got) != 63 || got != again || !strings.HasSuffix(got, "-kubelb-nat") || got == ShadowName(strings.Repeat("a", 62)+"b") {
		t.Errorf("ShadowName of a 63-character name = %q (%d)", got, len(got))
	}
}
