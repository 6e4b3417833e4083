package status_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/testenv"
)

// TestSinkOneWriter, on a real API server: the Sink is the one writer of a LoadBalancer's
// status. An object written by the former writers (the LoadBalancer controller and the
// reachability pass under their own field owners, as before the Sink) is taken over on the
// first write: the values stay, a condition the Sink no longer writes goes, the former owners
// are gone, and a tenant's own condition is left alone. A change that alters nothing is no
// request, even from a cached copy older than the Sink's last write; a change from such a copy
// builds on that write, not on the stale copy.
func TestSinkOneWriter(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := t.Context()
	tenantNamespaces(t, c, tenant)
	lb := &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "web"}}
	lb.Spec.Ports = []v1alpha1.LoadBalancerPort{{Name: "http", Port: 80, Protocol: "TCP"}}
	lb.Spec.Endpoints = []v1alpha1.LoadBalancerEndpoints{{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []v1alpha1.EndpointPort{{Port: 31080}}}}
	if err := c.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	t0 := "2026-01-01T00:00:00Z"
	cond := func(typ, st, reason string) map[string]any {
		return map[string]any{"type": typ, "status": st, "reason": reason, "message": reason, "lastTransitionTime": t0}
	}
	applyAs(t, c, "kubelb-loadbalancer", map[string]any{
		"service":    map[string]any{"ports": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "TCP", "upstreamTargetPort": int64(20080)}}},
		"conditions": []any{cond("Ready", "True", "AddressAssigned"), cond("Hostname", "True", "HostnameAssigned")},
	})
	applyAs(t, c, "kubelb-reach", map[string]any{"conditions": []any{cond(status.ConditionBackendsReachable, "True", "Reachable")}})
	applyAs(t, c, "tenant-tool", map[string]any{"conditions": []any{cond("example.com/Audited", "True", "Audited")}})

	sink := status.NewSink(c)
	before := getLB(t, c, "web")
	programmed := metav1.Condition{Type: status.ConditionProgrammed, Status: metav1.ConditionTrue, Reason: status.ReasonProgrammed,
		Message: "served", LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
	known, wrote, err := sink.LoadBalancer(ctx, before, func(st *v1alpha1.LoadBalancerStatus) {
		meta.RemoveStatusCondition(&st.Conditions, status.ConditionHostname) // the LoadBalancer lost its hostname
		meta.SetStatusCondition(&st.Conditions, programmed)
	})
	if err != nil || !wrote {
		t.Fatalf("first write: wrote %v, %v", wrote, err)
	}
	if meta.FindStatusCondition(known.Conditions, "example.com/Audited") != nil {
		t.Errorf("the status the Sink knew holds the tenant's condition: %+v", known.Conditions)
	}
	after := getLB(t, c, "web")
	for _, typ := range []string{"Ready", status.ConditionBackendsReachable, status.ConditionProgrammed, "example.com/Audited"} {
		if meta.FindStatusCondition(after.Status.Conditions, typ) == nil {
			t.Errorf("condition %s lost: %+v", typ, after.Status.Conditions)
		}
	}
	if meta.FindStatusCondition(after.Status.Conditions, "Hostname") != nil {
		t.Errorf("the Hostname condition the Sink dropped stayed (kept by a former owner): %+v", after.Status.Conditions)
	}
	if len(after.Status.Service.Ports) != 1 || after.Status.Service.Ports[0].UpstreamTargetPort != 20080 {
		t.Errorf("ports lost: %+v", after.Status.Service)
	}
	if got := statusOwners(after); len(got) != 2 || !got[status.FieldOwner] || !got["tenant-tool"] {
		t.Errorf("status field owners %v, want %s and the tenant's tenant-tool only", got, status.FieldOwner)
	}

	// The same change again, from the stale copy (older than the Sink's write): no request.
	writes := sink.Writes()
	if _, wrote, err := sink.LoadBalancer(ctx, before, func(st *v1alpha1.LoadBalancerStatus) {
		meta.RemoveStatusCondition(&st.Conditions, status.ConditionHostname)
		meta.SetStatusCondition(&st.Conditions, programmed)
	}); err != nil || wrote || sink.Writes() != writes {
		t.Errorf("an unchanged status from a stale copy: wrote %v (%d writes, were %d), %v", wrote, sink.Writes(), writes, err)
	}
	// Another part's change from the stale copy keeps what the Sink wrote last (Programmed),
	// though the stale copy lacks it.
	reach := metav1.Condition{Type: status.ConditionBackendsReachable, Status: metav1.ConditionFalse, Reason: "NoBackendReachable",
		Message: "none", LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
	if _, wrote, err := sink.LoadBalancer(ctx, before, func(st *v1alpha1.LoadBalancerStatus) {
		meta.SetStatusCondition(&st.Conditions, reach)
	}); err != nil || !wrote {
		t.Fatalf("reachability write: wrote %v, %v", wrote, err)
	}
	last := getLB(t, c, "web")
	if p := meta.FindStatusCondition(last.Status.Conditions, status.ConditionProgrammed); p == nil {
		t.Errorf("a change from a stale copy dropped the Sink's own earlier write: %+v", last.Status.Conditions)
	}
	if r := meta.FindStatusCondition(last.Status.Conditions, status.ConditionBackendsReachable); r == nil || r.Status != metav1.ConditionFalse {
		t.Errorf("BackendsReachable %+v", r)
	}
	// A LoadBalancer made anew under the same name starts from its own status.
	if err := c.Delete(ctx, last); err != nil {
		t.Fatal(err)
	}
	anew := &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "web"}, Spec: lb.Spec}
	if err := c.Create(ctx, anew); err != nil {
		t.Fatal(err)
	}
	known, _, err = sink.LoadBalancer(ctx, anew, func(st *v1alpha1.LoadBalancerStatus) {})
	if err != nil || len(known.Conditions) != 0 {
		t.Errorf("a new LoadBalancer of the same name starts from %+v (%v), want its own empty status", known.Conditions, err)
	}
}

// applyAs applies status fields to LoadBalancer web under field owner owner.
func applyAs(t *testing.T, c client.Client, owner string, st map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "LoadBalancer",
		"metadata": map[string]any{"name": "web", "namespace": tenant}, "status": st,
	}}
	if err := c.Status().Patch(t.Context(), u, client.Apply, client.FieldOwner(owner), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
}

func getLB(t *testing.T, c client.Client, name string) *v1alpha1.LoadBalancer {
	t.Helper()
	lb := &v1alpha1.LoadBalancer{}
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: tenant, Name: name}, lb); err != nil {
		t.Fatal(err)
	}
	return lb
}

// statusOwners are the field owners that applied lb's status.
func statusOwners(lb *v1alpha1.LoadBalancer) map[string]bool {
	out := map[string]bool{}
	for _, f := range lb.ManagedFields {
		if f.Subresource == "status" && f.Operation == metav1.ManagedFieldsOperationApply {
			out[f.Manager] = true
		}
	}
	return out
}
