package source

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// gateway is a Gateway of a class with one HTTP listener on port 80.
func gateway(ns, name, class string) *gwapiv1.Gateway {
	return &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: gwapiv1.ObjectName(class), Listeners: []gwapiv1.Listener{{
			Name: "http", Protocol: gwapiv1.HTTPProtocolType, Port: 80,
			AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: ptr.To(gwapiv1.NamespacesFromAll)}},
		}}},
	}
}

// gatewayClass is a GatewayClass of a controllerName.
func gatewayClass(name, controller string) *gwapiv1.GatewayClass {
	return &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gwapiv1.GatewayClassSpec{ControllerName: gwapiv1.GatewayController(controller)}}
}

// accepted tells whether a GatewayClass has Accepted=True.
func accepted(gc *gwapiv1.GatewayClass) bool {
	return meta.IsStatusConditionTrue(gc.Status.Conditions, string(gwapiv1.GatewayClassConditionStatusAccepted))
}

// TestGatewayServedTruthTable is the rule of docs/l7.md ("Tenant side (ccm)").
func TestGatewayServedTruthTable(t *testing.T) {
	ours := gatewayClass("any", ControllerName)
	foreign := gatewayClass("kubelb", "example.com/other")
	for _, c := range []struct {
		gateway, class string
		gc             *gwapiv1.GatewayClass
		useClass, want bool
	}{
		{"web", "any", ours, true, true},    // class of our controllerName: always
		{"web", "any", ours, false, true},   //
		{"kubelb", "any", ours, true, true}, //
		{"web", "kubelb", nil, true, false}, // not named kubelb, class not ours (missing)
		{"web", "kubelb", foreign, false, false},
		{"kubelb", "kubelb", nil, true, true},     // CE rule: named kubelb, class kubelb
		{"kubelb", "kubelb", foreign, true, true}, // ... whatever the class's controller
		{"kubelb", "other", nil, true, false},     // named kubelb, another class, --use-gateway-class
		{"kubelb", "other", nil, false, true},     // ... without --use-gateway-class: any class
		{"kubelb", "other", foreign, false, true}, //
		{"web", "other", nil, false, false},       // neither
	} {
		gw := gateway("ns", c.gateway, c.class)
		if got := GatewayServed(gw, c.gc, c.useClass); got != c.want {
			t.Errorf("Gateway %s class %s (controller of class: %v), --use-gateway-class=%v: served %v, want %v",
				c.gateway, c.class, c.gc != nil && c.gc.Spec.ControllerName == ControllerName, c.useClass, got, c.want)
		}
	}
}

// TestGatewayClassesAndServedGateways: the ccm makes the GatewayClass kubelb with kubelb's
// controllerName and accepts it and every other class of that controllerName (not others);
// it mirrors the Gateways the rule serves and no others (--use-gateway-class=true here).
func TestGatewayClassesAndServedGateways(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "gw", nil)
	e.create(t, gatewayClass("custom", ControllerName))
	e.create(t, gatewayClass("other", "example.com/other"))

	testsupport.Eventually(t, timeout, "GatewayClasses kubelb and custom accepted", func() error {
		for _, name := range []string{"kubelb", "custom"} {
			gc := &gwapiv1.GatewayClass{}
			if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Name: name}, gc); err != nil {
				return err
			}
			if gc.Spec.ControllerName != ControllerName || !accepted(gc) {
				return fmt.Errorf("%s: controller %s, conditions %v", name, gc.Spec.ControllerName, gc.Status.Conditions)
			}
			// The features kubelb implements (and the conformance suite checks), sorted.
			if got := gc.Status.SupportedFeatures; len(got) != len(SupportedFeatures) ||
				!slices.IsSortedFunc(got, func(a, b gwapiv1.SupportedFeature) int { return strings.Compare(string(a.Name), string(b.Name)) }) ||
				!slices.Contains(got, gwapiv1.SupportedFeature{Name: "HTTPRoute"}) {
				return fmt.Errorf("%s: supportedFeatures %v", name, got)
			}
		}
		return nil
	})

	custom := gateway("gw", "edge", "custom")        // class of our controllerName
	named := gateway("gw", "kubelb", "kubelb")       // CE rule
	foreign := gateway("gw3", "plain", "other")      // neither
	kubelbOther := gateway("gw2", "kubelb", "other") // named kubelb, other class: not with --use-gateway-class
	e.namespace(t, "gw2", nil)
	e.namespace(t, "gw3", nil)
	for _, g := range []*gwapiv1.Gateway{custom, named, foreign, kubelbOther} {
		e.create(t, g)
	}
	rt := e.routeOf(t, tenantNS, custom.UID, nil)
	e.routeOf(t, tenantNS, named.UID, nil)
	if rt.Labels[v1alpha1.LabelOriginResourceKind] != "Gateway.gateway.networking.k8s.io" || len(rt.Spec.Source.Kubernetes.Services) != 0 {
		t.Fatalf("Gateway Route labels %v, services %d", rt.Labels, len(rt.Spec.Source.Kubernetes.Services))
	}
	// Proof that the ccm looked at the other two (namespaces of their own).
	waitReconciles(t, Gateway, "gw2", 0)
	waitReconciles(t, Gateway, "gw3", 0)
	e.noRoute(t, tenantNS, foreign.UID)
	e.noRoute(t, tenantNS, kubelbOther.UID)
	gc := &gwapiv1.GatewayClass{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Name: "other"}, gc); err != nil {
		t.Fatal(err)
	}
	if accepted(gc) || len(gc.Status.SupportedFeatures) != 0 {
		t.Errorf("the ccm accepted a class of another controller: %v %v", gc.Status.Conditions, gc.Status.SupportedFeatures)
	}

	// The manager's status shows on the Gateway.
	e.setRouteStatus(t, tenantNS, rt.Name, map[string]any{
		"addresses": []any{map[string]any{"type": "IPAddress", "value": "203.0.113.9"}},
		"conditions": []any{map[string]any{"type": "Programmed", "status": "True", "reason": "Programmed", "message": "served",
			"observedGeneration": custom.Generation, "lastTransitionTime": "2026-11-22T10:00:00Z"}},
		"listeners": []any{map[string]any{"name": "http", "attachedRoutes": 2,
			"supportedKinds": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}},
			"conditions": []any{map[string]any{"type": "Programmed", "status": "True", "reason": "Programmed", "message": "",
				"observedGeneration": custom.Generation, "lastTransitionTime": "2026-11-22T10:00:00Z"}}}},
	})
	testsupport.Eventually(t, timeout, "Gateway status", func() error {
		e.getTenant(t, custom)
		st := custom.Status
		if len(st.Addresses) != 1 || st.Addresses[0].Value != "203.0.113.9" || !meta.IsStatusConditionTrue(st.Conditions, "Programmed") ||
			len(st.Listeners) != 1 || st.Listeners[0].AttachedRoutes != 2 || len(st.Listeners[0].SupportedKinds) != 1 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

// httpRoute is an HTTPRoute with parents and one rule with backends.
func httpRoute(ns, name string, parents []gwapiv1.ParentReference, backends ...gwapiv1.HTTPBackendRef) *gwapiv1.HTTPRoute {
	return &gwapiv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwapiv1.HTTPRouteSpec{CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: parents},
			Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: backends}}},
	}
}

// backend is an HTTPRoute backendRef to a Service (namespace "" : the route's).
func backend(ns, name string) gwapiv1.HTTPBackendRef {
	ref := gwapiv1.HTTPBackendRef{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
		Name: gwapiv1.ObjectName(name), Port: ptr.To(gwapiv1.PortNumber(80))}}}
	if ns != "" {
		ref.Namespace = ptr.To(gwapiv1.Namespace(ns))
	}
	return ref
}

// TestHTTPRouteParentsGrantsContext: an HTTPRoute with two parents (one in another
// namespace, with sectionName and port) is mirrored once, parents kept as written; a backend
// in another namespace is neither embedded nor granted until a ReferenceGrant there permits
// it, then it is both (its NodePort twin made in that namespace); the route's namespace
// labels travel in the context and follow a change of the namespace.
func TestHTTPRouteParentsGrantsContext(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "team", map[string]string{"team": "a"})
	e.namespace(t, "gwns", nil)
	e.namespace(t, "backend", nil)
	e.create(t, gateway("team", "edge", "kubelb"))
	e.create(t, gateway("gwns", "shared", "kubelb"))
	e.create(t, clusterIP("team", "local", 80))
	remote := clusterIP("backend", "remote", 80)
	e.create(t, remote)
	hr := httpRoute("team", "web", []gwapiv1.ParentReference{
		{Name: "edge", SectionName: ptr.To(gwapiv1.SectionName("http"))},
		{Name: "shared", Namespace: ptr.To(gwapiv1.Namespace("gwns")), Port: ptr.To(gwapiv1.PortNumber(80))},
	}, backend("", "local"), backend("backend", "remote"))
	e.create(t, hr)

	rt := e.routeOf(t, tenantNS, hr.UID, func(rt *v1alpha1.Route) error {
		if len(rt.Spec.Source.Kubernetes.Services) != 1 {
			return fmt.Errorf("%d Services", len(rt.Spec.Source.Kubernetes.Services))
		}
		return nil
	})
	k := rt.Spec.Source.Kubernetes
	if k.Services[0].Name != "local-nodeport" || k.Context == nil || len(k.Context.GrantedRefs) != 0 ||
		k.Context.NamespaceLabels["team"] != "a" || k.Context.NamespaceLabels["kubernetes.io/metadata.name"] != "team" {
		t.Fatalf("without a grant: services %v, context %+v", k.Services[0].Name, k.Context)
	}
	parents, _, _ := unstructured.NestedSlice(k.Route.Object, "spec", "parentRefs")
	if len(parents) != 2 || parents[0].(map[string]any)["sectionName"] != "http" || parents[1].(map[string]any)["port"] != int64(80) {
		t.Fatalf("embedded parentRefs %v", parents)
	}

	// A ReferenceGrant in the backend's namespace permits it.
	e.create(t, &gwapiv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "backend", Name: "from-team"},
		Spec: gwapiv1beta1.ReferenceGrantSpec{
			From: []gwapiv1beta1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "HTTPRoute", Namespace: "team"}},
			To:   []gwapiv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	})
	rt = e.routeOf(t, tenantNS, hr.UID, func(rt *v1alpha1.Route) error {
		if len(rt.Spec.Source.Kubernetes.Services) != 2 {
			return fmt.Errorf("%d Services", len(rt.Spec.Source.Kubernetes.Services))
		}
		return nil
	})
	want := []v1alpha1.GrantedRef{{Group: "", Kind: "Service", Namespace: "backend", Name: "remote"}}
	if d := cmp.Diff(want, rt.Spec.Source.Kubernetes.Context.GrantedRefs); d != "" {
		t.Errorf("grantedRefs (-want +got):\n%s", d)
	}
	if s := rt.Spec.Source.Kubernetes.Services[1]; s.Namespace != "backend" || s.Name != "remote-nodeport" {
		t.Errorf("second Service %s/%s, want backend/remote-nodeport", s.Namespace, s.Name)
	}
	e.twinOf(t, remote)

	// The namespace's labels change: the context follows.
	ns := &corev1.Namespace{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Name: "team"}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels["team"] = "b"
	if err := e.Tenant.Client.Update(e.ctx, ns); err != nil {
		t.Fatal(err)
	}
	e.routeOf(t, tenantNS, hr.UID, func(rt *v1alpha1.Route) error {
		if v := rt.Spec.Source.Kubernetes.Context.NamespaceLabels["team"]; v != "b" {
			return fmt.Errorf("team label %q", v)
		}
		return nil
	})
}

// TestRouteParentsStatusMerge: the manager's status.parents entries (kubelb's controllerName)
// are copied onto the HTTPRoute next to another controller's entry, which stays.
func TestRouteParentsStatusMerge(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "merge", nil)
	e.create(t, gateway("merge", "edge", "kubelb"))
	e.create(t, clusterIP("merge", "app", 80))
	hr := httpRoute("merge", "web", []gwapiv1.ParentReference{{Name: "edge"}, {Name: "theirs"}}, backend("", "app"))
	e.create(t, hr)
	rt := e.routeOf(t, tenantNS, hr.UID, nil)

	cond := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: reason, Message: reason,
			ObservedGeneration: hr.Generation, LastTransitionTime: metav1.Now()}}
	}
	// Another implementation reports on its parent.
	testsupport.Eventually(t, timeout, "writing the other controller's parent status", func() error {
		cur := &gwapiv1.HTTPRoute{}
		if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(hr), cur); err != nil {
			return err
		}
		cur.Status.Parents = []gwapiv1.RouteParentStatus{{ParentRef: gwapiv1.ParentReference{Name: "theirs"},
			ControllerName: "example.com/other", Conditions: cond("Theirs")}}
		return e.Tenant.Client.Status().Update(e.ctx, cur)
	})
	e.setRouteStatus(t, tenantNS, rt.Name, map[string]any{"parents": []any{
		map[string]any{"parentRef": map[string]any{"name": "edge"}, "controllerName": ControllerName,
			"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok",
				"observedGeneration": hr.Generation, "lastTransitionTime": "2026-11-22T10:00:00Z"}}},
	}})
	testsupport.Eventually(t, timeout, "HTTPRoute parents", func() error {
		cur := &gwapiv1.HTTPRoute{}
		if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(hr), cur); err != nil {
			return err
		}
		var got []string
		for _, p := range cur.Status.Parents {
			got = append(got, fmt.Sprintf("%s:%s", p.ControllerName, p.ParentRef.Name))
		}
		if fmt.Sprint(got) != fmt.Sprint([]string{"example.com/other:theirs", ControllerName + ":edge"}) {
			return fmt.Errorf("parents %v", got)
		}
		return nil
	})
}

// TestRouteFollowsItsGateway: a route whose only parent is not served is not mirrored; when
// the Gateway's class changes to kubelb, the route is mirrored; when it changes away again,
// the route's Route goes and so does its finalizer.
func TestRouteFollowsItsGateway(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "follow", nil)
	gw := gateway("follow", "later", "nope")
	e.create(t, gw)
	e.create(t, clusterIP("follow", "app", 80))
	before := reconciles(HTTPRoute, "follow")
	hr := httpRoute("follow", "web", []gwapiv1.ParentReference{{Name: "later"}}, backend("", "app"))
	e.create(t, hr)
	waitReconciles(t, HTTPRoute, "follow", before)
	e.noRoute(t, tenantNS, hr.UID)

	setClass := func(class string) {
		t.Helper()
		testsupport.Eventually(t, timeout, "changing the Gateway's class", func() error {
			cur := &gwapiv1.Gateway{}
			if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(gw), cur); err != nil {
				return err
			}
			cur.Spec.GatewayClassName = gwapiv1.ObjectName(class)
			return e.Tenant.Client.Update(e.ctx, cur)
		})
	}
	setClass("kubelb")
	e.routeOf(t, tenantNS, hr.UID, nil)
	e.routeOf(t, tenantNS, gw.UID, nil)

	setClass("nope")
	e.waitGone(t, e.Hub.Client, &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: string(hr.UID)}})
	testsupport.Eventually(t, timeout, "HTTPRoute released", func() error {
		cur := &gwapiv1.HTTPRoute{}
		if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(hr), cur); err != nil {
			return err
		}
		if len(cur.Finalizers) != 0 {
			return fmt.Errorf("finalizers %v", cur.Finalizers)
		}
		return nil
	})
}

// TestTLSTCPUDPRoutes: TLSRoutes, TCPRoutes and UDPRoutes (gateway.networking.k8s.io/v1)
// attached to a served Gateway are mirrored with their kind and their backends' twins.
func TestTLSTCPUDPRoutes(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "l4r", nil)
	e.create(t, gateway("l4r", "edge", "kubelb"))
	e.create(t, clusterIP("l4r", "db", 5432))
	parents := []gwapiv1.ParentReference{{Name: "edge"}}
	ref := gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{Name: "db", Port: ptr.To(gwapiv1.PortNumber(5432))}}
	tls := &gwapiv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "l4r", Name: "tls"}, Spec: gwapiv1.TLSRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: parents}, Hostnames: []gwapiv1.Hostname{"db.example.com"},
		Rules: []gwapiv1.TLSRouteRule{{BackendRefs: []gwapiv1.BackendRef{ref}}}}}
	tcp := &gwapiv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "l4r", Name: "tcp"}, Spec: gwapiv1.TCPRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: parents}, Rules: []gwapiv1.TCPRouteRule{{BackendRefs: []gwapiv1.BackendRef{ref}}}}}
	udp := &gwapiv1.UDPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "l4r", Name: "udp"}, Spec: gwapiv1.UDPRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: parents}, Rules: []gwapiv1.UDPRouteRule{{BackendRefs: []gwapiv1.BackendRef{ref}}}}}
	for _, c := range []struct {
		obj  client.Object
		kind string
	}{{tls, "TLSRoute.gateway.networking.k8s.io"}, {tcp, "TCPRoute.gateway.networking.k8s.io"}, {udp, "UDPRoute.gateway.networking.k8s.io"}} {
		e.create(t, c.obj)
		rt := e.routeOf(t, tenantNS, c.obj.GetUID(), func(rt *v1alpha1.Route) error {
			if len(rt.Spec.Source.Kubernetes.Services) != 1 {
				return fmt.Errorf("%d Services", len(rt.Spec.Source.Kubernetes.Services))
			}
			return nil
		})
		if rt.Labels[v1alpha1.LabelOriginResourceKind] != c.kind || rt.Spec.Source.Kubernetes.Services[0].Name != "db-nodeport" ||
			rt.Spec.Source.Kubernetes.Route.GetAPIVersion() != "gateway.networking.k8s.io/v1" {
			t.Errorf("%s: labels %v, service %s, apiVersion %s", c.kind, rt.Labels, rt.Spec.Source.Kubernetes.Services[0].Name,
				rt.Spec.Source.Kubernetes.Route.GetAPIVersion())
		}
	}
}

// TestGatewayCertificateGrant: a Gateway's certificateRef into another namespace is in the
// Route's grantedRefs only once a ReferenceGrant there permits Gateways of its namespace.
func TestGatewayCertificateGrant(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "gwcert", nil)
	e.namespace(t, "certs", nil)
	gw := gateway("gwcert", "tls", "kubelb")
	gw.Spec.Listeners = append(gw.Spec.Listeners, gwapiv1.Listener{Name: "https", Protocol: gwapiv1.HTTPSProtocolType, Port: 443,
		TLS: &gwapiv1.ListenerTLSConfig{Mode: ptr.To(gwapiv1.TLSModeTerminate), CertificateRefs: []gwapiv1.SecretObjectReference{
			{Name: "local"}, {Name: "wildcard", Namespace: ptr.To(gwapiv1.Namespace("certs"))}}}})
	e.create(t, gw)
	rt := e.routeOf(t, tenantNS, gw.UID, nil)
	if k := rt.Spec.Source.Kubernetes; k.Context == nil || len(k.Context.GrantedRefs) != 0 {
		t.Fatalf("without a grant: context %+v", k.Context)
	}
	e.create(t, &gwapiv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "gateways"},
		Spec: gwapiv1beta1.ReferenceGrantSpec{
			From: []gwapiv1beta1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "Gateway", Namespace: "gwcert"}},
			To:   []gwapiv1beta1.ReferenceGrantTo{{Group: "", Kind: "Secret", Name: ptr.To(gwapiv1.ObjectName("wildcard"))}},
		},
	})
	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		want := []v1alpha1.GrantedRef{{Kind: "Secret", Namespace: "certs", Name: "wildcard"}}
		if d := cmp.Diff(want, rt.Spec.Source.Kubernetes.Context.GrantedRefs); d != "" {
			return fmt.Errorf("grantedRefs (-want +got):\n%s", d)
		}
		return nil
	})
}
