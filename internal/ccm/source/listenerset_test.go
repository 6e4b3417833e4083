package source

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// listenerSet is a ListenerSet of namespace ns naming Gateway gwNS/gw, with one HTTP listener.
func listenerSet(ns, name, gwNS, gw string) *gwapiv1.ListenerSet {
	return &gwapiv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwapiv1.ListenerSetSpec{
		ParentRef: gwapiv1.ParentGatewayReference{Name: gwapiv1.ObjectName(gw), Namespace: new(gwapiv1.Namespace(gwNS))},
		Listeners: []gwapiv1.ListenerEntry{{Name: "extra", Port: 8080, Protocol: gwapiv1.HTTPProtocolType}},
	}}
}

// TestListenerSets: a ListenerSet naming a served Gateway is mirrored (with its namespace's
// labels and its creationTimestamp, by which the hub ranks it), one naming a Gateway kubelb
// does not serve is not; a route attached only to a mirrored ListenerSet is mirrored; the
// hub's ListenerSet status is copied back.
func TestListenerSets(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "sets", map[string]string{"team": "a"})
	e.create(t, gateway("sets", "edge", "kubelb"))
	e.create(t, gateway("sets", "foreign", "nope"))
	e.create(t, clusterIP("sets", "app", 80))
	ours := listenerSet("sets", "ours", "sets", "edge")
	theirs := listenerSet("sets", "theirs", "sets", "foreign")
	e.create(t, ours)
	e.create(t, theirs)
	rt := e.routeOf(t, tenantNS, ours.UID, nil)
	created := rt.Spec.Source.Kubernetes.Route.GetCreationTimestamp()
	if rt.Labels[v1alpha1.LabelOriginResourceKind] != "ListenerSet.gateway.networking.k8s.io" || created.IsZero() ||
		rt.Spec.Source.Kubernetes.Context == nil || rt.Spec.Source.Kubernetes.Context.NamespaceLabels["team"] != "a" {
		t.Errorf("ListenerSet Route: labels %v, creationTimestamp %v, context %+v", rt.Labels,
			rt.Spec.Source.Kubernetes.Route.GetCreationTimestamp(), rt.Spec.Source.Kubernetes.Context)
	}

	before := reconciles(HTTPRoute, "sets")
	ls := gwapiv1.Kind("ListenerSet")
	toOurs := httpRoute("sets", "to-ours", []gwapiv1.ParentReference{{Kind: &ls, Name: "ours"}}, backend("", "app"))
	toTheirs := httpRoute("sets", "to-theirs", []gwapiv1.ParentReference{{Kind: &ls, Name: "theirs"}}, backend("", "app"))
	e.create(t, toOurs)
	e.create(t, toTheirs)
	e.routeOf(t, tenantNS, toOurs.UID, nil)
	waitReconciles(t, HTTPRoute, "sets", before)
	e.noRoute(t, tenantNS, toTheirs.UID)
	e.noRoute(t, tenantNS, theirs.UID)

	e.setRouteStatus(t, tenantNS, rt.Name, map[string]any{
		"conditions": []any{map[string]any{"type": "Accepted", "status": "False", "reason": "NotAllowed", "message": "not allowed",
			"observedGeneration": ours.Generation, "lastTransitionTime": "2026-11-22T10:00:00Z"}}})
	testsupport.Eventually(t, timeout, "ListenerSet status", func() error {
		cur := &gwapiv1.ListenerSet{}
		if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(ours), cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, "Accepted")
		if c == nil {
			return errors.New("no Accepted condition")
		}
		if c.Reason != "NotAllowed" {
			return fmt.Errorf("Accepted %s", c.Reason)
		}
		return nil
	})
}
