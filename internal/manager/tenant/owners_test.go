package tenant

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestForeignOwnerReferenceDoesNotHoldTenantDeletion is issue 26's proof that a tenant
// cannot block the hub's lifecycle. On a real API server with the real garbage collector
// (kube-controller-manager), tenant b (the attacker), with its ccm's own credentials, names
// Tenant a as the owner of one LoadBalancer and Tenant a's namespace as the owner of another
// (blockOwnerDeletion), and holds both with a finalizer of its own. Tenant a is deleted with foreground propagation: before, the
// garbage collector waited for b's object for ever, Tenant a never went away and its name
// could not be onboarded again. Now the manager removes the owner reference, says so on
// Tenant a (Event, and the Ready message while it lasts), Tenant a and its namespace go, and
// a new Tenant a becomes Ready.
//
// The owner references controller, which removes such references as soon as they are
// written, is off here: this is the path of a reference written just before the deletion.
func TestForeignOwnerReferenceDoesNotHoldTenantDeletion(t *testing.T) {
	s := startHubWith(t, func(o *Options, hub *testenv.Cluster) {
		o.HubAPIServerURL = hub.Config.Host
		o.keepOwnerReferences = true
	})
	c := s.hub.Client
	s.lbs.release.Store(true)
	startGarbageCollector(t, s.hub)
	create(t, c, &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultConfigName, Namespace: managerNS}})
	create(t, c, tenantObj("a"), tenantObj("b"))
	victim := waitReady(t, c, "a")
	waitReady(t, c, "b")

	// The attacker's object, written with its ccm's credentials.
	ccmB, _, _ := ccmClient(t, kubeconfigSecret(t, c, "b"))
	hold := loadBalancer("tenant-b", "hold", "example.com/hold")
	hold.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: kubelbv1alpha1.GroupVersion.String(), Kind: "Tenant", Name: "a", UID: victim.UID,
		BlockOwnerDeletion: ptr.To(true),
	}}
	if err := ccmB.Create(bg, hold); err != nil {
		t.Fatalf("tenant b writing its LoadBalancer with an owner reference to Tenant a: %v", err)
	}
	// A second one names Tenant a's namespace, a dependent of the Tenant.
	nsA := &corev1.Namespace{}
	if err := c.Get(bg, client.ObjectKey{Name: "tenant-a"}, nsA); err != nil {
		t.Fatal(err)
	}
	holdNS := loadBalancer("tenant-b", "hold-ns", "example.com/hold")
	holdNS.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Namespace", Name: "tenant-a", UID: nsA.UID, BlockOwnerDeletion: ptr.To(true),
	}}
	if err := ccmB.Create(bg, holdNS); err != nil {
		t.Fatalf("tenant b writing its LoadBalancer with an owner reference to namespace tenant-a: %v", err)
	}
	t.Cleanup(func() { // let the API server go without waiting on the finalizers
		for _, o := range []*kubelbv1alpha1.LoadBalancer{hold, holdNS} {
			lb := &kubelbv1alpha1.LoadBalancer{}
			if err := c.Get(bg, client.ObjectKeyFromObject(o), lb); err == nil {
				lb.Finalizers = nil
				_ = c.Update(bg, lb)
			}
		}
	})

	deleted := time.Now()
	if err := c.Delete(bg, tenantObj("a"), client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 60*time.Second, "Tenant a and namespace tenant-a to be gone", func() error {
		if err := gone(c, tenantObj("a")); err != nil {
			tn := tenantObj("a")
			if c.Get(bg, client.ObjectKeyFromObject(tn), tn) == nil {
				return fmt.Errorf("%w (finalizers %v)", err, tn.Finalizers)
			}
			return err
		}
		return gone(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}})
	})
	t.Logf("Tenant a (deleted in the foreground, named as owner by tenant b) gone %v after its deletion", time.Since(deleted).Round(time.Millisecond))

	// Tenant a was told what held it: both objects named, in one Warning Event or in one per
	// pass that released some (which pass finds which follows the garbage collector's timing).
	testsupport.Eventually(t, 10*time.Second, "the Warning Events on Tenant a", func() error {
		var evs eventsv1.EventList
		if err := c.List(bg, &evs); err != nil {
			return err
		}
		var notes []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Tenant" && e.Regarding.Name == "a" && e.Reason == ReasonForeignOwnerReferences && e.Type == corev1.EventTypeWarning {
				notes = append(notes, e.Note)
			}
		}
		named := func(o string) bool {
			return slices.ContainsFunc(notes, func(n string) bool {
				return strings.Contains(n, "LoadBalancer "+o+",") || strings.Contains(n, "LoadBalancer "+o+" named this Tenant or its namespace as owner")
			})
		}
		if !named("tenant-b/hold") || !named("tenant-b/hold-ns") {
			return fmt.Errorf("%s Events on Tenant a %q do not name tenant-b/hold and tenant-b/hold-ns", ReasonForeignOwnerReferences, notes)
		}
		return nil
	})
	// The attacker's objects no longer name Tenant a nor its namespace.
	for _, o := range []*kubelbv1alpha1.LoadBalancer{hold, holdNS} {
		lb := &kubelbv1alpha1.LoadBalancer{}
		if err := c.Get(bg, client.ObjectKeyFromObject(o), lb); err == nil &&
			slices.ContainsFunc(lb.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == victim.UID || r.UID == nsA.UID }) {
			t.Errorf("tenant-b/%s still names Tenant a or its namespace: %v", o.Name, lb.OwnerReferences)
		}
	}

	// The name can be onboarded again.
	create(t, c, tenantObj("a"))
	again := waitReady(t, c, "a")
	if again.UID == victim.UID {
		t.Errorf("the re-created Tenant a has the old UID")
	}
}

// startGarbageCollector runs kube-controller-manager's garbage collector (envtest has none)
// against the hub until the test ends.
func startGarbageCollector(t *testing.T, hub *testenv.Cluster) {
	t.Helper()
	testsupport.StartProcess(t, "kube-controller-manager", filepath.Join(testenv.AssetsDir(t), "kube-controller-manager"),
		"--kubeconfig", hub.Kubeconfig, "--controllers", "garbage-collector-controller",
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false", "--v=1")
}

// TestForeignOwnerReferenceRemovedOnWrite: an owner reference a tenant writes on its object
// naming another Tenant or its namespace is removed as soon as it is written, with a Warning
// Event on the object that says why; so when that Tenant is deleted in the foreground (real
// garbage collector), the tenant's object is no dependent of it: it is neither deleted nor
// holds the deletion.
func TestForeignOwnerReferenceRemovedOnWrite(t *testing.T) {
	s := startHub(t, true)
	c := s.hub.Client
	s.lbs.release.Store(true)
	startGarbageCollector(t, s.hub)
	create(t, c, &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultConfigName, Namespace: managerNS}})
	create(t, c, tenantObj("a"), tenantObj("b"))
	victim := waitReady(t, c, "a")
	waitReady(t, c, "b")
	nsA := &corev1.Namespace{}
	if err := c.Get(bg, client.ObjectKey{Name: "tenant-a"}, nsA); err != nil {
		t.Fatal(err)
	}

	ccmB, _, _ := ccmClient(t, kubeconfigSecret(t, c, "b"))
	hold := loadBalancer("tenant-b", "hold", "example.com/hold")
	hold.OwnerReferences = []metav1.OwnerReference{
		{APIVersion: kubelbv1alpha1.GroupVersion.String(), Kind: "Tenant", Name: "a", UID: victim.UID, BlockOwnerDeletion: ptr.To(true)},
		{APIVersion: "v1", Kind: "Namespace", Name: "tenant-a", UID: nsA.UID, BlockOwnerDeletion: ptr.To(true)},
	}
	if err := ccmB.Create(bg, hold); err != nil {
		t.Fatalf("tenant b writing its LoadBalancer with owner references to Tenant a and its namespace: %v", err)
	}
	t.Cleanup(func() {
		lb := &kubelbv1alpha1.LoadBalancer{}
		if err := c.Get(bg, client.ObjectKeyFromObject(hold), lb); err == nil {
			lb.Finalizers = nil
			_ = c.Update(bg, lb)
		}
	})
	testsupport.Eventually(t, 30*time.Second, "the owner references of tenant-b/hold to be removed", func() error {
		lb := &kubelbv1alpha1.LoadBalancer{}
		if err := c.Get(bg, client.ObjectKeyFromObject(hold), lb); err != nil {
			return err
		}
		if len(lb.OwnerReferences) != 0 {
			return fmt.Errorf("owner references %v", lb.OwnerReferences)
		}
		return nil
	})
	testsupport.Eventually(t, 10*time.Second, "the Warning Event on tenant-b/hold", func() error {
		var evs eventsv1.EventList
		if err := c.List(bg, &evs, client.InNamespace("tenant-b")); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "LoadBalancer" && e.Regarding.Name == "hold" && e.Reason == ReasonOwnerReferenceRemoved && e.Type == corev1.EventTypeWarning {
				if !strings.Contains(e.Note, "the owner reference to Tenant a, Namespace tenant-a was removed") {
					return fmt.Errorf("event note %q", e.Note)
				}
				return nil
			}
		}
		return fmt.Errorf("no %s Event on tenant-b/hold among %d", ReasonOwnerReferenceRemoved, len(evs.Items))
	})

	if err := c.Delete(bg, tenantObj("a"), client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 60*time.Second, "Tenant a to be gone", func() error { return gone(c, tenantObj("a")) })
	lb := &kubelbv1alpha1.LoadBalancer{}
	if err := c.Get(bg, client.ObjectKeyFromObject(hold), lb); err != nil || !lb.DeletionTimestamp.IsZero() {
		t.Errorf("tenant-b/hold after Tenant a's deletion: %v, deletion %v; it is no dependent of Tenant a any more", err, lb.DeletionTimestamp)
	}
}
