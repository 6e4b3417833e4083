package ccm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// createNode creates a Node on the tenant with a Ready condition and addresses
// (type=address pairs), as a kubelet would.
func (e *env) createNode(t *testing.T, name string, ready bool, addrs ...string) {
	t.Helper()
	n := node(name, ready, addrs...)
	status := n.Status
	objects.Create(t, e.Tenant.Client, &n)
	n.Status = status
	if err := e.Tenant.Client.Status().Update(e.ctx, &n); err != nil {
		t.Fatalf("setting status of node %s: %v", name, err)
	}
}

// setNodeReady flips a Node's Ready condition.
func (e *env) setNodeReady(t *testing.T, name string, ready bool) {
	t.Helper()
	n := objects.Get(t, e.Tenant.Client, client.ObjectKey{Name: name}, &corev1.Node{})
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.Now()}}
	if err := e.Tenant.Client.Status().Update(e.ctx, n); err != nil {
		t.Fatalf("setting node %s ready=%v: %v", name, ready, err)
	}
}

// waitAddresses waits until Addresses/default on the hub holds exactly want; want == nil
// waits until it does not exist.
func (e *env) waitAddresses(t *testing.T, want []v1alpha1.EndpointAddress) *v1alpha1.Addresses {
	t.Helper()
	got := &v1alpha1.Addresses{}
	testsupport.Eventually(t, wait, fmt.Sprintf("Addresses/default = %v", want), func() error {
		err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Namespace: tenantNS, Name: v1alpha1.DefaultAddressesName}, got)
		if want == nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil {
				return fmt.Errorf("still there: %v", got.Spec.Addresses)
			}
			return err
		}
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got.Spec.Addresses); diff != "" {
			return errors.New(diff)
		}
		return nil
	})
	return got
}

// TestNodeAddressesPublished: the addresses of Ready nodes reach Addresses/default sorted and
// deduplicated, with the configured type and its fallback; NotReady nodes leave the list;
// without any Ready node the object is deleted, and it comes back with the first Ready node.
func TestNodeAddressesPublished(t *testing.T) {
	e := newEnv(t)
	const (
		extIP = string(corev1.NodeExternalIP)
		intIP = string(corev1.NodeInternalIP)
		host  = string(corev1.NodeHostName)
	)
	e.createNode(t, "n1", true, extIP, "127.0.0.3", intIP, "10.0.0.1", host, "n1")
	e.createNode(t, "n2", true, intIP, "10.0.0.2", host, "n2")         // no ExternalIP: falls back
	e.createNode(t, "n3", true, extIP, "127.0.0.3", intIP, "10.0.0.3") // same ExternalIP as n1
	e.createNode(t, "n4", false, extIP, "127.0.0.4")                   // NotReady
	e.startCCM(t, ccmOpts{Options: Options{NodeAddressType: NodeAddressExternalIP}})

	first := e.waitAddresses(t, ips("10.0.0.2", "127.0.0.3"))
	if first.Labels[v1alpha1.LabelManagedBy] != v1alpha1.LabelManagedByValue {
		t.Errorf("Addresses labels = %v", first.Labels)
	}
	testsupport.Eventually(t, wait, "kubelb_ccm_nodes_total = 3", func() error {
		if v := testutil.ToFloat64(metrics.CCMNodes); v != 3 {
			return fmt.Errorf("%v", v)
		}
		return nil
	})

	e.setNodeReady(t, "n1", false) // n3 still has 127.0.0.3
	e.setNodeReady(t, "n3", false)
	e.waitAddresses(t, ips("10.0.0.2"))
	e.setNodeReady(t, "n4", true)
	e.waitAddresses(t, ips("10.0.0.2", "127.0.0.4"))

	// A node excluded with the well-known label leaves the list like a NotReady one.
	n2 := objects.Get(t, e.Tenant.Client, client.ObjectKey{Name: "n2"}, &corev1.Node{})
	n2.Labels = map[string]string{corev1.LabelNodeExcludeBalancers: "true"}
	if err := e.Tenant.Client.Update(e.ctx, n2); err != nil {
		t.Fatal(err)
	}
	e.waitAddresses(t, ips("127.0.0.4"))

	// No serving node: the object goes (the CRD needs one address), and comes back.
	e.setNodeReady(t, "n4", false)
	e.waitAddresses(t, nil)
	e.setNodeReady(t, "n1", true)
	e.waitAddresses(t, ips("127.0.0.3"))

	// Someone edits the object on the hub: the ccm puts the truth back.
	cur := objects.Get(t, e.Hub.Client, client.ObjectKey{Namespace: tenantNS, Name: v1alpha1.DefaultAddressesName}, &v1alpha1.Addresses{})
	cur.Spec.Addresses = ips("192.0.2.1")
	if err := e.Hub.Client.Update(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.waitAddresses(t, ips("127.0.0.3"))
}

// TestNodeAddressTypes: InternalIP and Hostname are honoured, with their fallbacks.
func TestNodeAddressTypes(t *testing.T) {
	e := newEnv(t)
	const (
		extIP = string(corev1.NodeExternalIP)
		intIP = string(corev1.NodeInternalIP)
		host  = string(corev1.NodeHostName)
	)
	e.createNode(t, "a", true, extIP, "127.0.0.10", intIP, "10.0.0.1", host, "a.example")
	e.createNode(t, "b", true, extIP, "127.0.0.11") // only an ExternalIP

	stop := e.startCCM(t, ccmOpts{Options: Options{NodeAddressType: NodeAddressInternalIP}})
	e.waitAddresses(t, ips("10.0.0.1", "127.0.0.11"))
	stop()

	e.startCCM(t, ccmOpts{Options: Options{NodeAddressType: NodeAddressHostname}})
	e.waitAddresses(t, []v1alpha1.EndpointAddress{{Hostname: "a.example"}, {IP: "127.0.0.11"}})
}
