package ccm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// noIPFamilies checks that a mirror carries no IP family fields (the hub does not declare them).
func noIPFamilies(lb *v1alpha1.LoadBalancer) error {
	if lb.Spec.IPFamilyPolicy != nil || lb.Spec.IPFamilies != nil {
		return fmt.Errorf("ipFamilyPolicy %v, ipFamilies %v on a hub that does not declare them", lb.Spec.IPFamilyPolicy, lb.Spec.IPFamilies)
	}
	return nil
}

// TestAgainstKubeLBCEHub: kubelb's ccm against a hub whose CRDs are KubeLB CE's. Its
// server-side applies would be refused whole for kubelb's additions (spec.ipFamilies,
// spec.ipFamilyPolicy: "field not declared in schema"); the ccm reads the hub's schema and
// leaves them out, so the Services are mirrored, the nodes' addresses are written, and the
// address a KubeLB CE manager writes reaches the Services. A Service that asks for what the
// hub cannot give (dual-stack) gets a Warning Event saying so, once; a single-stack one none.
func TestAgainstKubeLBCEHub(t *testing.T) {
	dir, origin := testenv.KubeLBCECRDs(t)
	t.Logf("hub CRDs: %s", origin)
	e := newEnvWith(t, testenv.PairOptions{DualStack: true, HubCRDsDir: dir})
	e.namespace(t, "shop")
	e.createNode(t, "node-1", true, string(corev1.NodeExternalIP), "192.0.2.1")
	leftOut := testutil.ToFloat64(metrics.CCMHubFieldsLeftOut.WithLabelValues("LoadBalancer", "spec.ipFamilies"))
	e.startCCM(t, ccmOpts{})

	e.waitAddresses(t, []v1alpha1.EndpointAddress{{IP: "192.0.2.1"}})

	plain := lbService("shop", "plain")
	objects.Create(t, e.Tenant.Client, plain)
	plain = e.getService(t, "shop", "plain")
	plainLB := e.mirrorOf(t, plain, noIPFamilies)

	dual := lbService("shop", "dual")
	dual.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	objects.Create(t, e.Tenant.Client, dual)
	dual = e.getService(t, "shop", "dual")
	dualLB := e.mirrorOf(t, dual, noIPFamilies)
	ev := e.waitEvent(t, dual, corev1.EventTypeWarning, ReasonHubFeatureUnavailable)
	const want = "The management cluster's LoadBalancer CRD does not declare spec.ipFamilies, spec.ipFamilyPolicy " +
		"(an older kubelb or KubeLB CE hub): left out of what the ccm writes; unavailable on this hub: IPv6 and dual-stack addresses."
	if ev.Note != want {
		t.Fatalf("Event note %q\nwant %q", ev.Note, want)
	}

	// The KubeLB CE manager's part: the address into the LoadBalancer's status.
	e.setLBStatus(t, plainLB, "198.51.100.7")
	e.waitServiceIngress(t, plain, "198.51.100.7")
	e.setLBStatus(t, dualLB, "198.51.100.8")
	e.waitServiceIngress(t, dual, "198.51.100.8")

	if n := len(e.events(t, plain, ReasonHubFeatureUnavailable)); n != 0 {
		t.Fatalf("a single-stack IPv4 Service loses nothing on this hub, yet got %d Events", n)
	}
	if n := e.recorded.count(ReasonHubFeatureUnavailable, dual); n != 1 {
		t.Fatalf("%d HubFeatureUnavailable Events for the dual-stack Service, want 1", n)
	}
	if got := testutil.ToFloat64(metrics.CCMHubFieldsLeftOut.WithLabelValues("LoadBalancer", "spec.ipFamilies")); got <= leftOut {
		t.Fatalf("kubelb_ccm_hub_fields_left_out_total{kind=LoadBalancer,field=spec.ipFamilies} did not grow: %v", got)
	}

	// Such a hub cannot restrict the clients of a Service with loadBalancerSourceRanges: the
	// Service is mirrored without them, and told plainly that it is open to every address.
	office := lbService("shop", "office")
	office.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	objects.Create(t, e.Tenant.Client, office)
	office = e.getService(t, "shop", "office")
	e.mirrorOf(t, office, func(lb *v1alpha1.LoadBalancer) error {
		if len(lb.Spec.SourceRanges) > 0 {
			return fmt.Errorf("spec.sourceRanges %v on a hub that does not declare it", lb.Spec.SourceRanges)
		}
		return nil
	})
	ev = e.waitEvent(t, office, corev1.EventTypeWarning, ReasonHubFeatureUnavailable)
	if !strings.Contains(ev.Note, "spec.sourceRanges") || !strings.Contains(ev.Note, "does NOT restrict the clients") {
		t.Fatalf("Event note %q does not say the Service's clients are not restricted", ev.Note)
	}
}

// TestAgainstKubeLBCEHubLayer7: kubelb's ccm writes Routes to a hub with KubeLB CE's CRDs.
// The Route CRD there does not declare spec.source.kubernetes.context (kubelb's addition for
// namespace labels and ReferenceGrants), which server-side apply would refuse: the ccm leaves
// it out, the Routes are created, an HTTPRoute whose backend needs a ReferenceGrant is told
// (once) that the hub cannot honour it, and the status a KubeLB CE manager writes
// (generatedName and the tenant object's status) reaches the Ingress and the HTTPRoute.
func TestAgainstKubeLBCEHubLayer7(t *testing.T) {
	dir, origin := testenv.KubeLBCECRDs(t)
	t.Logf("hub CRDs: %s", origin)
	e := newEnvWith(t, testenv.PairOptions{HubCRDsDir: dir})
	e.namespace(t, "shop")
	e.namespace(t, "backend")
	e.startCCM(t, ccmOpts{l7: true})

	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	remote := web.DeepCopy()
	remote.Namespace, remote.Name = "backend", "remote"
	objects.Create(t, e.Tenant.Client, web)
	objects.Create(t, e.Tenant.Client, remote)

	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: networkingv1.IngressSpec{
		IngressClassName: ptr.To("kubelb"),
		Rules: []networkingv1.IngressRule{{Host: "shop.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}},
	}}
	objects.Create(t, e.Tenant.Client, ing)

	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "edge"}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: "kubelb", Listeners: []gwapiv1.Listener{{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType}}}}
	objects.Create(t, e.Tenant.Client, gw)
	objects.Create(t, e.Tenant.Client, &gwapiv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "backend", Name: "from-shop"},
		Spec: gwapiv1beta1.ReferenceGrantSpec{
			From: []gwapiv1beta1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "HTTPRoute", Namespace: "shop"}},
			To:   []gwapiv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	})
	hr := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: gwapiv1.HTTPRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: "edge"}}},
		Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{
			{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{Name: "web", Port: ptr.To(gwapiv1.PortNumber(80))}}},
			{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
				Name: "remote", Namespace: ptr.To(gwapiv1.Namespace("backend")), Port: ptr.To(gwapiv1.PortNumber(80))}}},
		}}},
	}}
	objects.Create(t, e.Tenant.Client, hr)

	ingRoute := e.hubRoute(t, ing.UID, func(r *v1alpha1.Route) error { return nil })
	hrRoute := e.hubRoute(t, hr.UID, func(r *v1alpha1.Route) error {
		if len(r.Spec.Source.Kubernetes.Services) != 2 {
			return fmt.Errorf("%d Services embedded, want web and remote", len(r.Spec.Source.Kubernetes.Services))
		}
		return nil
	})
	for _, r := range []*v1alpha1.Route{ingRoute, hrRoute} {
		if r.Spec.Source.Kubernetes.Context != nil {
			t.Fatalf("Route %s carries spec.source.kubernetes.context on a hub that does not declare it", r.Name)
		}
	}
	testsupport.Eventually(t, wait, "the HubFeatureUnavailable Event on the HTTPRoute", func() error {
		if n := e.recorded.count(ReasonHubFeatureUnavailable, hr); n != 1 {
			return fmt.Errorf("%d Events", n)
		}
		return nil
	})

	// The KubeLB CE manager's part: generatedName and the status to copy back.
	e.setRouteStatus(t, ingRoute, "web-shop", `{"loadBalancer":{"ingress":[{"ip":"198.51.100.9"}]}}`)
	e.setRouteStatus(t, hrRoute, "web-shop", `{"parents":[{"parentRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"edge"},`+
		`"controllerName":"kubelb.k8c.io/gateway-controller","conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}]}`)
	// The Ingress's address and the HTTPRoute's parents come from the hub.
	objects.WaitFor(t, e.Tenant.Client, wait, client.ObjectKeyFromObject(ing), &networkingv1.Ingress{}, func(cur *networkingv1.Ingress) error {
		if len(cur.Status.LoadBalancer.Ingress) != 1 || cur.Status.LoadBalancer.Ingress[0].IP != "198.51.100.9" {
			return fmt.Errorf("Ingress status %+v", cur.Status.LoadBalancer)
		}
		return nil
	})
	objects.WaitFor(t, e.Tenant.Client, wait, client.ObjectKeyFromObject(hr), &gwapiv1.HTTPRoute{}, func(cur *gwapiv1.HTTPRoute) error {
		if len(cur.Status.Parents) != 1 || !meta.IsStatusConditionTrue(cur.Status.Parents[0].Conditions, "Accepted") {
			return fmt.Errorf("HTTPRoute parents %+v", cur.Status.Parents)
		}
		return nil
	})
}

// hubRoute waits for the hub Route of a tenant object (named by its UID) to pass check.
func (e *env) hubRoute(t *testing.T, uid types.UID, check func(*v1alpha1.Route) error) *v1alpha1.Route {
	t.Helper()
	return objects.WaitFor(t, e.Hub.Client, wait, client.ObjectKey{Namespace: tenantNS, Name: string(uid)}, &v1alpha1.Route{}, check)
}

// setRouteStatus plays a KubeLB CE manager: status.resources.route with generatedName and the
// tenant object's status.
func (e *env) setRouteStatus(t *testing.T, r *v1alpha1.Route, generated, status string) {
	t.Helper()
	objects.EditStatus(t, e.Hub.Client, wait, r, func(cur *v1alpha1.Route) {
		u := cur.Spec.Source.Kubernetes.Route
		cur.Status.Resources.Route = v1alpha1.ResourceState{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(),
			Namespace: u.GetNamespace(), GeneratedName: generated, Status: runtime.RawExtension{Raw: []byte(status)}}
	})
}
