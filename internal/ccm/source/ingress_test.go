package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// ingress is an Ingress of class (nil: none) sending / to Service backend port 80.
func ingress(ns, name string, class *string, backend string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: class,
			Rules: []networkingv1.IngressRule{{Host: name + ".example.com", IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: backend, Port: networkingv1.ServiceBackendPort{Number: 80}}},
				}}}}}},
		},
	}
}

// setRouteStatus plays the manager: it writes the tenant object's status into a hub Route.
func (e *env) setRouteStatus(t *testing.T, hubNS, name string, status any) {
	t.Helper()
	raw, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, timeout, "writing Route status", func() error {
		rt := &v1alpha1.Route{}
		if err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Namespace: hubNS, Name: name}, rt); err != nil {
			return err
		}
		rt.Status.Resources.Route.Status = runtime.RawExtension{Raw: raw}
		return e.Hub.Client.Status().Update(e.ctx, rt)
	})
}

// getTenant reads a tenant object.
func (e *env) getTenant(t *testing.T, obj client.Object) {
	t.Helper()
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("reading %T %s: %v", obj, obj.GetName(), err)
	}
}

// twinOf waits for the NodePort twin of a tenant Service and returns it.
func (e *env) twinOf(t *testing.T, svc *corev1.Service) *corev1.Service {
	t.Helper()
	twin := &corev1.Service{}
	testsupport.Eventually(t, timeout, "NodePort twin of "+svc.Name, func() error {
		return e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: svc.Namespace, Name: svc.Name + TwinSuffix}, twin)
	})
	return twin
}

// TestIngressMirror: an Ingress of class kubelb with a ClusterIP backend gets a hub Route
// (named by its UID) embedding the backend's NodePort twin, which the ccm made (owned by the
// Service, labelled with its origin); the Ingress carries the cleanup finalizer; the status the
// manager writes into the Route shows on the Ingress; a change the Route does not depend on
// writes nothing; an Ingress of another class is left alone.
func TestIngressMirror(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "ing", nil)
	svc := clusterIP("ing", "web", 80)
	e.create(t, svc)
	ing := ingress("ing", "web", ptr.To("kubelb"), "web")
	e.create(t, ing)

	rt := e.routeOf(t, tenantNS, ing.UID, func(rt *v1alpha1.Route) error {
		if len(rt.Spec.Source.Kubernetes.Services) != 1 {
			return errors.New("no Service embedded yet")
		}
		return nil
	})
	twin := e.twinOf(t, svc)
	if twin.Spec.Type != corev1.ServiceTypeNodePort || twin.Spec.Ports[0].NodePort == 0 ||
		twin.Labels[v1alpha1.LabelOriginName] != "web" || twin.Labels[v1alpha1.LabelOriginNamespace] != "ing" ||
		twin.Labels[v1alpha1.LabelManagedBy] != "kubelb" || len(twin.OwnerReferences) != 1 || twin.OwnerReferences[0].UID != svc.UID ||
		twin.Spec.Selector["app"] != "web" {
		t.Fatalf("twin: %+v", twin)
	}
	embedded := rt.Spec.Source.Kubernetes.Services[0]
	if embedded.Name != "web-nodeport" || embedded.UID != twin.UID || embedded.Spec.Ports[0].NodePort != twin.Spec.Ports[0].NodePort {
		t.Fatalf("embedded Service %+v, want the twin %s with NodePort %d", embedded.ObjectMeta, twin.UID, twin.Spec.Ports[0].NodePort)
	}
	if rt.Labels[v1alpha1.LabelOriginResourceKind] != "Ingress.networking.k8s.io" || rt.Spec.Source.Kubernetes.Context != nil {
		t.Fatalf("Route labels %v, context %v", rt.Labels, rt.Spec.Source.Kubernetes.Context)
	}
	e.getTenant(t, ing)
	if len(ing.Finalizers) != 0 {
		t.Fatalf("the ccm put finalizers %v on the Ingress; Layer 7 objects carry none", ing.Finalizers)
	}

	// The manager's status shows on the Ingress.
	e.setRouteStatus(t, tenantNS, rt.Name, map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "203.0.113.7"}}}})
	testsupport.Eventually(t, timeout, "Ingress status", func() error {
		e.getTenant(t, ing)
		if lb := ing.Status.LoadBalancer.Ingress; len(lb) != 1 || lb[0].IP != "203.0.113.7" {
			return fmt.Errorf("status %+v", ing.Status.LoadBalancer)
		}
		return nil
	})

	// Settled: an annotation the Route does not depend on brings a reconcile and no write.
	before := reconciles(Ingress, "ing")
	cur := e.routeOf(t, tenantNS, ing.UID, nil)
	e.getTenant(t, ing)
	ing.Annotations = map[string]string{"note": "hello"}
	if err := e.Tenant.Client.Update(e.ctx, ing); err != nil {
		t.Fatal(err)
	}
	waitReconciles(t, Ingress, "ing", before)
	if after := e.routeOf(t, tenantNS, ing.UID, nil); after.ResourceVersion != cur.ResourceVersion {
		t.Errorf("Route rewritten by a change it does not depend on (resourceVersion %s → %s)", cur.ResourceVersion, after.ResourceVersion)
	}

	// Another class: not ours.
	before = reconciles(Ingress, "ing")
	other := ingress("ing", "other", ptr.To("nginx"), "web")
	e.create(t, other)
	waitReconciles(t, Ingress, "ing", before)
	e.noRoute(t, tenantNS, other.UID)
	e.getTenant(t, other)
	if len(other.Finalizers) != 0 {
		t.Errorf("an Ingress of another class got finalizers %v", other.Finalizers)
	}
}

// TestIngressRelease: an Ingress that stops being ours (its class changes) loses its Route
// and the status the ccm copied; a twin two Ingresses share stays until the last of them is
// deleted, then it goes.
func TestIngressRelease(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "rel", nil)
	svc := clusterIP("rel", "app", 80)
	e.create(t, svc)
	a := ingress("rel", "a", ptr.To("kubelb"), "app")
	b := ingress("rel", "b", ptr.To("kubelb"), "app")
	e.create(t, a)
	e.create(t, b)
	ra := e.routeOf(t, tenantNS, a.UID, nil)
	e.routeOf(t, tenantNS, b.UID, nil)
	twin := e.twinOf(t, svc)

	e.setRouteStatus(t, tenantNS, ra.Name, map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "203.0.113.8"}}}})
	testsupport.Eventually(t, timeout, "Ingress a status", func() error {
		e.getTenant(t, a)
		if len(a.Status.LoadBalancer.Ingress) != 1 {
			return fmt.Errorf("status %+v", a.Status.LoadBalancer)
		}
		return nil
	})

	// a changes class: released.
	e.getTenant(t, a)
	a.Spec.IngressClassName = ptr.To("nginx")
	if err := e.Tenant.Client.Update(e.ctx, a); err != nil {
		t.Fatal(err)
	}
	e.waitGone(t, e.Hub.Client, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: string(a.UID)}})
	testsupport.Eventually(t, timeout, "Ingress a released", func() error {
		e.getTenant(t, a)
		if len(a.Finalizers) != 0 || len(a.Status.LoadBalancer.Ingress) != 0 {
			return fmt.Errorf("finalizers %v, status %+v", a.Finalizers, a.Status.LoadBalancer)
		}
		return nil
	})
	// b still uses the twin.
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(twin), &corev1.Service{}); err != nil {
		t.Fatalf("twin gone while Ingress b uses it: %v", err)
	}

	// b deleted: its Route, the twin and b itself go.
	if err := e.Tenant.Client.Delete(e.ctx, b); err != nil {
		t.Fatal(err)
	}
	e.waitGone(t, e.Hub.Client, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: string(b.UID)}})
	e.waitGone(t, e.Tenant.Client, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "rel", Name: twin.Name}})
	e.waitGone(t, e.Tenant.Client, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "rel", Name: "b"}})
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}); apierrors.IsNotFound(err) {
		t.Fatal("the original Service was deleted")
	}
}

// TestTwinNameTaken: when a Service named <backend>-nodeport exists and the ccm did not make
// it, the ccm leaves it alone, mirrors the Ingress without that backend and says so in a
// Warning Event on the Ingress.
func TestTwinNameTaken(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "taken", nil)
	e.create(t, clusterIP("taken", "web", 80))
	theirs := clusterIP("taken", "web-nodeport", 8080)
	e.create(t, theirs)
	ing := ingress("taken", "web", ptr.To("kubelb"), "web")
	e.create(t, ing)
	rt := e.routeOf(t, tenantNS, ing.UID, nil)
	if n := len(rt.Spec.Source.Kubernetes.Services); n != 0 {
		t.Errorf("%d Services embedded, want none", n)
	}
	testsupport.Eventually(t, timeout, "NodePortServiceConflict Event", func() error {
		list := &eventsv1.EventList{}
		if err := e.Tenant.Client.List(e.ctx, list, client.InNamespace("taken")); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.UID == ing.UID && ev.Reason == ReasonTwinConflict && ev.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return errors.New("none yet")
	})
	cur := &corev1.Service{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(theirs), cur); err != nil {
		t.Fatal(err)
	}
	if cur.Spec.Type != corev1.ServiceTypeClusterIP || cur.Spec.Ports[0].Port != 8080 || len(cur.Labels) != 0 {
		t.Errorf("the ccm changed a Service it did not make: %+v", cur)
	}
}

// TestRecreatedUnderSameName: an object deleted and at once created again under the same name
// (as GitOps tools and the Gateway API conformance suite do) is a new object: the create is
// not an update of the one being deleted (the ccm puts no finalizer on it), the old Route
// goes and the new object gets its own. A finalizer an earlier version left is removed.
func TestRecreatedUnderSameName(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "again", nil)
	e.create(t, clusterIP("again", "web", 80))
	first := ingress("again", "web", ptr.To("kubelb"), "web")
	first.Finalizers = []string{v1alpha1.CleanupFinalizer} // as an earlier version left it
	e.create(t, first)
	e.routeOf(t, tenantNS, first.UID, nil)
	testsupport.Eventually(t, timeout, "the earlier version's finalizer removed", func() error {
		e.getTenant(t, first)
		if len(first.Finalizers) != 0 {
			return fmt.Errorf("finalizers %v", first.Finalizers)
		}
		return nil
	})

	if err := e.Tenant.Client.Delete(e.ctx, first); err != nil {
		t.Fatal(err)
	}
	second := ingress("again", "web", ptr.To("kubelb"), "web")
	if err := e.Tenant.Client.Create(e.ctx, second); err != nil {
		t.Fatalf("creating the Ingress again right after deleting it: %v", err)
	}
	e.waitGone(t, e.Hub.Client, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: string(first.UID)}})
	e.routeOf(t, tenantNS, second.UID, nil)
	e.getTenant(t, second)
	if second.DeletionTimestamp != nil || len(second.Finalizers) != 0 {
		t.Fatalf("the new Ingress is being deleted or has finalizers: %v %v", second.DeletionTimestamp, second.Finalizers)
	}
}

// TestIngressNginxMirrorTargetCarried: the Service an Ingress's ingress-nginx mirror-target
// names (a ClusterIP Service of its namespace) gets a NodePort twin and rides in the Route
// beside the backend's, so that the hub can copy requests to it; once the annotation names a
// Service of another namespace (which the hub refuses), the Route carries the backend's only.
func TestIngressNginxMirrorTargetCarried(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "mir", nil)
	web, copySvc := clusterIP("mir", "web", 80), clusterIP("mir", "copy", 8080)
	e.create(t, web)
	e.create(t, copySvc)
	ing := ingress("mir", "web", ptr.To("kubelb"), "web")
	ing.Annotations = map[string]string{nginxAnnotationPrefix + "mirror-target": "http://copy.mir.svc:8080/$request_uri"}
	e.create(t, ing)

	names := func(rt *v1alpha1.Route) []string {
		var out []string
		for _, s := range rt.Spec.Source.Kubernetes.Services {
			out = append(out, s.Name)
		}
		return out
	}
	e.routeOf(t, tenantNS, ing.UID, func(rt *v1alpha1.Route) error {
		if got := fmt.Sprint(names(rt)); got != "[web-nodeport copy-nodeport]" {
			return fmt.Errorf("embedded Services %s", got)
		}
		return nil
	})
	if twin := e.twinOf(t, copySvc); twin.Spec.Ports[0].Port != 8080 || twin.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("copy's twin: %+v", twin.Spec.Ports)
	}

	e.getTenant(t, ing)
	ing.Annotations[nginxAnnotationPrefix+"mirror-target"] = "http://copy.other.svc:8080/$request_uri"
	if err := e.Tenant.Client.Update(e.ctx, ing); err != nil {
		t.Fatal(err)
	}
	e.routeOf(t, tenantNS, ing.UID, func(rt *v1alpha1.Route) error {
		if got := fmt.Sprint(names(rt)); got != "[web-nodeport]" {
			return fmt.Errorf("embedded Services %s", got)
		}
		return nil
	})
}
