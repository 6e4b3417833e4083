package ccm

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/nodeip"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

const (
	ext = string(corev1.NodeExternalIP)
	in  = string(corev1.NodeInternalIP)
)

// newStandaloneEnv starts one control plane (the cluster; there is no hub) and a namespace
// "apps" in it.
func newStandaloneEnv(t *testing.T) *env {
	t.Helper()
	c := testenv.Start(t, "cluster", testenv.Options{})
	e := &env{Pair: &testenv.Pair{Tenant: c}, ctx: t.Context()}
	e.namespace(t, "apps")
	return e
}

// startStandalone runs the standalone ccm's controllers in-process until stop or the test's
// end.
func (e *env) startStandalone(t *testing.T, o Options) (stop func()) {
	t.Helper()
	o.Mode = ModeStandalone
	mgr := testenv.NewManager(t, e.Tenant.Config)
	if err := SetupStandalone(mgr, o); err != nil {
		t.Fatal(err)
	}
	return testenv.RunManager(t, mgr, "ccm", wait)
}

// labelNode sets (value != nil) or removes the node-set label of a Node.
func (e *env) labelNode(t *testing.T, name string, value *string) {
	t.Helper()
	n := objects.Get(t, e.Tenant.Client, client.ObjectKey{Name: name}, &corev1.Node{})
	orig := n.DeepCopy()
	if value == nil {
		delete(n.Labels, LabelUseAsLoadBalancer)
	} else {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[LabelUseAsLoadBalancer] = *value
	}
	if err := e.Tenant.Client.Patch(e.ctx, n, client.MergeFrom(orig)); err != nil {
		t.Fatalf("labelling node %s: %v", name, err)
	}
}

// createSetNode creates a Ready or NotReady node in a node set ("-": no label).
func (e *env) createSetNode(t *testing.T, name, set string, ready bool, addrs ...string) {
	t.Helper()
	e.createNode(t, name, ready, addrs...)
	if set != "-" {
		e.labelNode(t, name, &set)
	}
}

// createLB creates a LoadBalancer Service in namespace apps with TCP ports, and returns it
// as created.
func (e *env) createLB(t *testing.T, name string, mutate func(*corev1.Service), ports ...int32) *corev1.Service {
	t.Helper()
	svc := lbService("apps", name)
	svc.Spec.Ports = nil
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: p, Protocol: corev1.ProtocolTCP})
	}
	if mutate != nil {
		mutate(svc)
	}
	objects.Create(t, e.Tenant.Client, svc)
	return svc
}

// waitNote waits for a Warning Event with reason about svc whose note contains want, and for
// the same verdict in the Service's condition kubelb.k8c.io/AddressAssigned (False).
func (e *env) waitNote(t *testing.T, svc *corev1.Service, reason, want string) {
	t.Helper()
	e.waitAddressCondition(t, svc, metav1.ConditionFalse, reason, want)
	testsupport.Eventually(t, wait, fmt.Sprintf("%s Event on %s containing %q", reason, svc.Name, want), func() error {
		var notes []string
		for _, ev := range e.events(t, svc, reason) {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Note, want) {
				return nil
			}
			notes = append(notes, ev.Note)
		}
		return fmt.Errorf("Events so far: %q", notes)
	})
}

// waitAddressCondition waits until svc has the condition kubelb.k8c.io/AddressAssigned with
// status, reason and a message containing want.
func (e *env) waitAddressCondition(t *testing.T, svc *corev1.Service, status metav1.ConditionStatus, reason, want string) {
	t.Helper()
	testsupport.Eventually(t, wait, fmt.Sprintf("condition %s=%s/%s on %s", lbaddress.ConditionAddressAssigned, status, reason, svc.Name), func() error {
		c := meta.FindStatusCondition(e.getService(t, svc.Namespace, svc.Name).Status.Conditions, lbaddress.ConditionAddressAssigned)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, want) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}

// TestStandaloneFollowsNodes: a LoadBalancer Service gets the ExternalIP (else InternalIP) of
// every Ready node of the default set, in address order; readiness, labels and addresses
// change the list; with no node left it goes back to pending (status cleared) with a Warning
// naming the label; a Service's annotation picks another set, and removing it goes back to
// the default set.
func TestStandaloneFollowsNodes(t *testing.T) {
	e := newStandaloneEnv(t)
	e.createSetNode(t, "n1", "true", true, ext, "192.0.2.1", in, "10.0.0.1")
	e.createSetNode(t, "n2", "", true, in, "10.0.0.2") // empty value: the default set
	e.createSetNode(t, "n3", "-", true, in, "10.0.0.3")
	e.createSetNode(t, "n4", "true", false, in, "10.0.0.4")
	e.createSetNode(t, "edge", "edge", true, in, "10.0.1.1")
	e.startStandalone(t, Options{})

	svc := e.createLB(t, "web", nil, 80)
	got := e.waitServiceIngress(t, svc, "10.0.0.2", "192.0.2.1")
	if m := got.Status.LoadBalancer.Ingress[0].IPMode; m == nil || *m != corev1.LoadBalancerIPModeVIP {
		t.Errorf("ipMode %v, want VIP (kube-proxy programs the address)", m)
	}
	if hasFinalizer(got) {
		t.Error("standalone mode added a finalizer; it has nothing to clean up")
	}
	e.waitAddressCondition(t, svc, metav1.ConditionTrue, lbaddress.ReasonAssigned, "2 address(es)")

	e.setNodeReady(t, "n4", true)
	e.waitServiceIngress(t, svc, "10.0.0.2", "10.0.0.4", "192.0.2.1")
	e.setNodeReady(t, "n1", false)
	e.waitServiceIngress(t, svc, "10.0.0.2", "10.0.0.4")
	e.labelNode(t, "n3", ptr.To("true"))
	e.waitServiceIngress(t, svc, "10.0.0.2", "10.0.0.3", "10.0.0.4")
	e.labelNode(t, "n2", nil)
	e.waitServiceIngress(t, svc, "10.0.0.3", "10.0.0.4")

	// A node's address changes.
	n3 := objects.Get(t, e.Tenant.Client, client.ObjectKey{Name: "n3"}, &corev1.Node{})
	n3.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.33"}}
	if err := e.Tenant.Client.Status().Update(e.ctx, n3); err != nil {
		t.Fatal(err)
	}
	e.waitServiceIngress(t, svc, "10.0.0.4", "10.0.0.33")

	// No node left: pending, with a Warning naming the label.
	e.setNodeReady(t, "n3", false)
	e.setNodeReady(t, "n4", false)
	e.waitServiceIngress(t, svc)
	e.waitNote(t, svc, ReasonNoLoadBalancerNodes, LabelUseAsLoadBalancer+"=true")

	// The annotation picks the edge set; without it the Service is back on the default set.
	cur := e.getService(t, "apps", "web")
	cur.Annotations = map[string]string{LabelUseAsLoadBalancer: "edge"}
	if err := e.Tenant.Client.Update(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.waitServiceIngress(t, svc, "10.0.1.1")
	e.setNodeReady(t, "n1", true)
	cur = e.getService(t, "apps", "web")
	cur.Annotations = nil
	if err := e.Tenant.Client.Update(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.waitServiceIngress(t, svc, "192.0.2.1")

	// An annotation that is no label value: pending, with a Warning.
	cur = e.getService(t, "apps", "web")
	cur.Annotations = map[string]string{LabelUseAsLoadBalancer: "not a label value"}
	if err := e.Tenant.Client.Update(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.waitServiceIngress(t, svc)
	e.waitNote(t, svc, ReasonInvalidNodeSet, "not a valid label value")
}

// TestStandaloneClassAndType: Services of another class are left alone; a Service that stops
// being of type LoadBalancer loses its addresses and gets them back; and a ccm restarted with
// --use-loadbalancer-class takes the addresses it gave back from the Services without the
// class, and gives them to those of class kubelb.
func TestStandaloneClassAndType(t *testing.T) {
	e := newStandaloneEnv(t)
	e.createSetNode(t, "n1", "true", true, in, "10.0.0.1")
	stop := e.startStandalone(t, Options{})

	plain := e.createLB(t, "plain", nil, 80)
	ours := e.createLB(t, "ours", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To(v1alpha1.DefaultClass) }, 81)
	other := e.createLB(t, "other", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/lb") }, 82)
	e.waitServiceIngress(t, plain, "10.0.0.1")
	e.waitServiceIngress(t, ours, "10.0.0.1")

	// Type ClusterIP: no addresses; LoadBalancer again: back.
	// (The ccm writes the Service's status as its type changes: the updates retry conflicts, as
	// kubectl would.)
	setType := func(typ corev1.ServiceType) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := e.getService(t, "apps", "plain")
			cur.Spec.Type = typ
			return e.Tenant.Client.Update(e.ctx, cur)
		}); err != nil {
			t.Fatal(err)
		}
	}
	setType(corev1.ServiceTypeClusterIP)
	e.waitServiceIngress(t, plain)
	setType(corev1.ServiceTypeLoadBalancer)
	e.waitServiceIngress(t, plain, "10.0.0.1")
	if got := e.getService(t, "apps", "other"); len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("Service of another class got %v", got.Status.LoadBalancer.Ingress)
	}
	stop()

	// Restarted with --use-loadbalancer-class: plain is no longer ours.
	e.startStandalone(t, Options{UseLoadBalancerClass: true})
	e.waitServiceIngress(t, plain)
	e.waitServiceIngress(t, ours, "10.0.0.1")

	// The other implementation's status is left alone.
	cur := e.getService(t, "apps", "other")
	cur.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.50"}}
	if err := e.Tenant.Client.Status().Update(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.createSetNode(t, "n2", "true", true, in, "10.0.0.2") // the controller looks again
	e.waitServiceIngress(t, ours, "10.0.0.1", "10.0.0.2")
	e.waitServiceIngress(t, other, "192.0.2.50")
}

// TestStandalonePortConflicts: the later Service on a port taken on the same addresses stays
// pending with a Warning naming the holder, and gets the addresses when the holder changes its
// port or goes away; a Service on a disjoint node set takes the same port; a reserved port
// keeps a Service pending with a Warning saying so.
func TestStandalonePortConflicts(t *testing.T) {
	e := newStandaloneEnv(t)
	e.createSetNode(t, "n1", "true", true, in, "10.0.0.1")
	e.createSetNode(t, "n2", "true", true, in, "10.0.0.2")
	e.createSetNode(t, "edge", "edge", true, in, "10.0.1.1")
	e.startStandalone(t, Options{ReservedPorts: mustReserved(t, "22/TCP")})

	// Same creation second is possible: the names order them then (a before b).
	holder := e.createLB(t, "a-holder", nil, 80, 443)
	e.waitServiceIngress(t, holder, "10.0.0.1", "10.0.0.2")
	late := e.createLB(t, "b-late", nil, 443)
	e.waitNote(t, late, ReasonPortConflict, "held by Service apps/a-holder")
	if got := e.getService(t, "apps", "b-late"); len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Fatalf("the later Service got %v", got.Status.LoadBalancer.Ingress)
	}
	later := e.createLB(t, "c-later", nil, 80)
	e.waitNote(t, later, ReasonPortConflict, "held by Service apps/a-holder")

	// Disjoint node set: no conflict.
	edge := e.createLB(t, "d-edge", func(s *corev1.Service) { s.Annotations = map[string]string{LabelUseAsLoadBalancer: "edge"} }, 80)
	e.waitServiceIngress(t, edge, "10.0.1.1")

	// The holder gives up 443: b-late gets its addresses; c-later still waits for 80.
	cur := e.getService(t, "apps", "a-holder")
	cur.Spec.Ports = cur.Spec.Ports[:1]
	if err := e.Tenant.Client.Update(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.waitServiceIngress(t, late, "10.0.0.1", "10.0.0.2")
	e.waitServiceIngress(t, holder, "10.0.0.1", "10.0.0.2")
	if got := e.getService(t, "apps", "c-later"); len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Fatalf("c-later got %v while a-holder keeps port 80", got.Status.LoadBalancer.Ingress)
	}

	// The holder goes away: c-later gets the port.
	if err := e.Tenant.Client.Delete(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.waitServiceIngress(t, later, "10.0.0.1", "10.0.0.2")

	// A reserved port.
	ssh := e.createLB(t, "e-ssh", nil, 22)
	e.waitNote(t, ssh, ReasonPortConflict, "Port 22/TCP is reserved")
	if got := e.getService(t, "apps", "e-ssh"); len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Fatalf("a Service on a reserved port got %v", got.Status.LoadBalancer.Ingress)
	}
}

func mustReserved(t *testing.T, s string) []nodeip.PortRange {
	t.Helper()
	r, err := nodeip.ParseReservedPorts(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
