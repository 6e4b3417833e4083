package ssa

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
)

// TestApplyStatus on a real API server: a status written by an update (as earlier versions
// did) is taken over, a field the owner drops goes, another owner's condition stays.
func TestApplyStatus(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}); err != nil {
		t.Fatal(err)
	}
	lb := &kubelbv1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "lb"},
		Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{Ports: []kubelbv1alpha1.EndpointPort{{Port: 30080}}}},
		},
	}
	if err := c.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	ready := func(status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: "Ready", Status: status, Reason: "R", Message: "m", LastTransitionTime: metav1.Now()}
	}

	// The old way: an update of the whole status.
	orig := lb.DeepCopy()
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.0.0.1"}}
	lb.Status.Conditions = []metav1.Condition{ready(metav1.ConditionTrue)}
	if err := c.Status().Patch(ctx, lb, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	// Another owner's condition.
	other := &kubelbv1alpha1.LoadBalancerStatus{Conditions: []metav1.Condition{
		{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "P", Message: "p", LastTransitionTime: metav1.Now()},
	}}
	if err := ApplyStatus(ctx, c, lb.DeepCopy(), "other", other); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(lb), lb); err != nil {
		t.Fatal(err)
	}

	// The new way: no address any more.
	st := &kubelbv1alpha1.LoadBalancerStatus{Conditions: []metav1.Condition{ready(metav1.ConditionFalse)}}
	if err := ApplyStatus(ctx, c, lb, "owner", st); err != nil {
		t.Fatal(err)
	}
	got := &kubelbv1alpha1.LoadBalancer{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(lb), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("the dropped address stayed: %+v", got.Status.LoadBalancer)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready: %+v", c)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, "Programmed"); c == nil {
		t.Errorf("the other owner's condition is gone: %+v", got.Status.Conditions)
	}
	for _, e := range got.ManagedFields {
		if e.Subresource == "status" && e.Operation == metav1.ManagedFieldsOperationUpdate {
			t.Errorf("a status updater is left: %s", e.Manager)
		}
	}
}

// TestApplyAdoptsLegacyUpdates: an object an earlier version created (an update, as this
// process's user agent) is taken over by the applier, so a field it stops setting goes.
func TestApplyAdoptsLegacyUpdates(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	legacy := LegacyFieldManager(hub.Config)
	for _, tc := range []struct {
		name, legacyManager string
		wantDropped         bool
	}{
		{"adopted", legacy, true},
		{"not adopted", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: strings.ReplaceAll(tc.name, " ", "-"),
				Labels: map[string]string{"keep": "1", "drop": "1"}}}
			if err := c.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			desired := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name,
				Labels: map[string]string{"keep": "1"}}, Data: map[string]string{"k": "v"}}
			if err := Apply(ctx, c, desired, cm, "owner", tc.legacyManager); err != nil {
				t.Fatal(err)
			}
			got := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
				t.Fatal(err)
			}
			if got.Data["k"] != "v" || got.Labels["keep"] != "1" {
				t.Errorf("applied fields missing: %+v", got)
			}
			if _, kept := got.Labels["drop"]; kept == tc.wantDropped {
				t.Errorf("label drop kept=%v, want dropped=%v (legacy manager %q)", kept, tc.wantDropped, tc.legacyManager)
			}
		})
	}
}
