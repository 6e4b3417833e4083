package ccm

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestReconcileConflictIsRequeued: a Service that changed under the reconcile (the finalizer
// patch loses the optimistic-lock race) is requeued a second later, not reported as an error.
func TestReconcileConflictIsRequeued(t *testing.T) {
	t.Parallel()
	svc := lbService("shop", "web")
	svc.UID = "u1"
	svc.Spec.Ports[0].NodePort = 30080
	tenant := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(svc).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "web", errors.New("the object has been modified"))
		}}).Build()
	hub := fake.NewClientBuilder().WithScheme(testenv.Scheme()).
		WithIndex(&v1alpha1.LoadBalancer{}, indexOrigin, originIndex).Build()
	r := &ServiceReconciler{Tenant: tenant, Hub: hub, Recorder: events.NewFakeRecorder(10), Namespace: tenantNS,
		warn: newWarnOnce(), managed: metrics.NewManagedSet(metrics.CCMManagedServices)}
	res, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(svc)})
	if err != nil || res.RequeueAfter != time.Second {
		t.Fatalf("Reconcile = %+v, %v; want a requeue after 1s and no error", res, err)
	}
}

// managed returns a managedFields entry of manager with the given fields.
func managed(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

func TestDrifted(t *testing.T) {
	t.Parallel()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u", Annotations: map[string]string{"a": "1"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}}},
	}
	desired, _ := DesiredLoadBalancer(svc, tenantNS)
	// As read back from the API server: the ccm's fields, bookkeeping, status, and a label, an
	// annotation and a spec field someone else owns.
	ours := managed(hubnames.FieldOwnerCCM, metav1.ManagedFieldsOperationApply,
		`{"f:metadata":{"f:annotations":{".":{},"f:a":{}},"f:finalizers":{".":{},"v:\"kubelb.k8c.io/cleanup\"":{}},"f:labels":{"f:kubelb.k8c.io/origin-name":{}}},"f:spec":{"f:endpoints":{},"f:ports":{},"f:type":{}}}`)
	theirs := managed("someone", metav1.ManagedFieldsOperationUpdate,
		`{"f:metadata":{"f:annotations":{"f:b":{}},"f:labels":{"f:example.com/extra":{}}},"f:spec":{"f:hostname":{}}}`)
	current := desired.DeepCopy()
	current.ResourceVersion = "7"
	current.Labels["example.com/extra"] = "x"
	current.Annotations["b"] = "2"
	current.Spec.Hostname = "web.example.com"
	current.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
	current.ManagedFields = []metav1.ManagedFieldsEntry{ours, theirs}

	for _, tc := range []struct {
		name    string
		legacy  string
		current func(*v1alpha1.LoadBalancer)
		svc     func(*corev1.Service)
		want    bool
	}{
		{name: "up to date, others' fields ignored", want: false},
		{name: "NodePort changed", svc: func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30081 }, want: true},
		{name: "annotation added", svc: func(s *corev1.Service) { s.Annotations["c"] = "3" }, want: true},
		{name: "owned annotation dropped", svc: func(s *corev1.Service) { delete(s.Annotations, "a") }, want: true},
		{name: "owned label changed on the hub", current: func(lb *v1alpha1.LoadBalancer) { lb.Labels[v1alpha1.LabelOriginName] = "x" }, want: true},
		{name: "affinity added", svc: func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }, want: true},
		{name: "finalizer removed by someone is not put back", current: func(lb *v1alpha1.LoadBalancer) {
			lb.Finalizers = nil
			lb.ManagedFields[0] = managed(hubnames.FieldOwnerCCM, metav1.ManagedFieldsOperationApply, `{"f:metadata":{"f:annotations":{"f:a":{}}},"f:spec":{"f:endpoints":{},"f:ports":{},"f:type":{}}}`)
		}, want: false},
		{name: "annotation an earlier ccm created, dropped", legacy: "ccm", current: func(lb *v1alpha1.LoadBalancer) {
			lb.ManagedFields = []metav1.ManagedFieldsEntry{managed("ccm", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:annotations":{"f:a":{}}}}`)}
		}, svc: func(s *corev1.Service) { delete(s.Annotations, "a") }, want: true},
		{name: "annotation of an unknown updater, dropped", current: func(lb *v1alpha1.LoadBalancer) {
			lb.ManagedFields = []metav1.ManagedFieldsEntry{managed("ccm", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:annotations":{"f:a":{}}}}`)}
		}, svc: func(s *corev1.Service) { delete(s.Annotations, "a") }, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cur := current.DeepCopy()
			if tc.current != nil {
				tc.current(cur)
			}
			s := svc.DeepCopy()
			if tc.svc != nil {
				tc.svc(s)
			}
			want, _ := desiredMirror(s, tenantNS, cur)
			got, err := hubApplier{legacy: tc.legacy}.drifted(cur, want)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("drifted = %v, want %v", got, tc.want)
			}
		})
	}
	if got, _ := (hubApplier{}).drifted(nil, desired); !got {
		t.Error("a missing object must be written")
	}
}

func TestDesiredMirrorFinalizer(t *testing.T) {
	t.Parallel()
	svc := lbService("shop", "web")
	svc.UID = "u"
	lb, _ := desiredMirror(svc, tenantNS, nil)
	if lb.Finalizers != nil {
		t.Errorf("a new mirror carries finalizers %v; the manager needs none", lb.Finalizers)
	}
	if lb, _ := desiredMirror(svc, tenantNS, lb); lb.Finalizers != nil {
		t.Errorf("a mirror without finalizer gets %v", lb.Finalizers)
	}
	legacy := lb.DeepCopy()
	legacy.Finalizers = []string{v1alpha1.CleanupFinalizer} // as an earlier ccm made it
	if lb, _ := desiredMirror(svc, tenantNS, legacy); !slices.Equal(lb.Finalizers, []string{v1alpha1.CleanupFinalizer}) {
		t.Errorf("an earlier ccm's finalizer is not kept: %v", lb.Finalizers)
	}
}

func TestDesiredAddresses(t *testing.T) {
	t.Parallel()
	if a := DesiredAddresses(tenantNS, nil); a != nil {
		t.Errorf("no addresses: want no object, got %+v", a)
	}
	addrs := []v1alpha1.EndpointAddress{{IP: "192.0.2.1"}}
	got := DesiredAddresses(tenantNS, addrs)
	want := &v1alpha1.Addresses{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: tenantNS, Labels: map[string]string{
			v1alpha1.LabelManagedBy: "kubelb", v1alpha1.LabelTenantName: "a"}},
		Spec: v1alpha1.AddressesSpec{Addresses: addrs},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// mainEntries returns the managedFields entries of obj's main resource as "manager/operation".
func mainEntries(obj client.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.Subresource == "" {
			out = append(out, e.Manager+"/"+string(e.Operation))
		}
	}
	return out
}

// TestMirrorServerSideApply: the mirror the ccm applies holds exactly the fields a create made
// (DesiredLoadBalancer's), under the one field owner kubelb-ccm, for one hub write; a mirror an
// earlier ccm created (its fields owned by an update) is left alone while it is up to date,
// and adopted on the next change, so an annotation the Service drops goes.
func TestMirrorServerSideApply(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")

	// An earlier ccm created this mirror with a create under the hub client's user agent.
	old := lbService("shop", "old")
	old.Annotations = map[string]string{"example.com/team": "blue", "example.com/keep": "yes"}
	objects.Create(t, e.Tenant.Client, old)
	legacyLB, _ := DesiredLoadBalancer(old, tenantNS)
	legacyLB.Finalizers = []string{v1alpha1.CleanupFinalizer} // an earlier ccm set it
	objects.Create(t, e.Hub.Client, legacyLB)
	legacy := ssa.LegacyFieldManager(e.Hub.Config)
	if diff := cmp.Diff([]string{legacy + "/Update"}, mainEntries(legacyLB)); diff != "" {
		t.Fatalf("legacy mirror's managers (-want +got):\n%s", diff)
	}

	writes := hubWrites()
	e.startCCM(t, ccmOpts{})
	svc := lbService("shop", "web")
	svc.Annotations = map[string]string{v1alpha1.AnnotationProxyProtocol: "v2"}
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	objects.Create(t, e.Tenant.Client, svc)
	lb := e.mirrorOf(t, svc, nil)
	want, _ := DesiredLoadBalancer(svc, tenantNS)
	if diff := cmp.Diff(want.ObjectMeta, lb.ObjectMeta, cmpObjectMetaContent); diff != "" {
		t.Errorf("applied mirror's metadata (-create +apply):\n%s", diff)
	}
	if diff := cmp.Diff(want.Spec, lb.Spec); diff != "" {
		t.Errorf("applied mirror's spec (-create +apply):\n%s", diff)
	}
	if diff := cmp.Diff([]string{hubnames.FieldOwnerCCM + "/Apply"}, mainEntries(lb)); diff != "" {
		t.Errorf("mirror's managers (-want +got):\n%s", diff)
	}

	// The earlier ccm's mirror is up to date: reconciled (finalizer added) without a hub write.
	testsupport.Eventually(t, wait, "Service old reconciled", func() error {
		if !hasFinalizer(e.getService(t, "shop", "old")) {
			return errors.New("no finalizer yet")
		}
		return nil
	})
	if w := hubWrites() - writes; w != 1 {
		t.Errorf("hub writes: %v, want 1 (the new mirror)", w)
	}
	if cur := e.mirrorOf(t, old, nil); cur.ResourceVersion != legacyLB.ResourceVersion {
		t.Errorf("an up-to-date mirror of an earlier ccm was written: resourceVersion %s → %s", legacyLB.ResourceVersion, cur.ResourceVersion)
	}

	// The Service drops an annotation: the mirror loses it too (the fields were adopted).
	old = e.update(t, e.getService(t, "shop", "old"), func(s *corev1.Service) { delete(s.Annotations, "example.com/team") })
	adopted := e.mirrorOf(t, old, func(lb *v1alpha1.LoadBalancer) error {
		if _, ok := lb.Annotations["example.com/team"]; ok {
			return errors.New("dropped annotation still mirrored")
		}
		return nil
	})
	if diff := cmp.Diff(map[string]string{"example.com/keep": "yes"}, adopted.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{hubnames.FieldOwnerCCM + "/Apply"}, mainEntries(adopted)); diff != "" {
		t.Errorf("adopted mirror's managers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{v1alpha1.CleanupFinalizer}, adopted.Finalizers); diff != "" {
		t.Errorf("adopted mirror's finalizers (-want +got):\n%s", diff)
	}
}

// cmpObjectMetaContent compares what a writer sets in ObjectMeta, not the server's bookkeeping.
var cmpObjectMetaContent = cmpopts.IgnoreFields(metav1.ObjectMeta{}, "UID", "ResourceVersion", "Generation", "CreationTimestamp", "ManagedFields")
