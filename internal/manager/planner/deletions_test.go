package planner

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestDeletedServiceIsNotDeletedAgain: a plan that runs before the cache has seen the
// delete of a hub Service (the next LoadBalancer of a burst of deletes) finds the Service
// still listed; the planner does not delete it a second time (CI: TestBurstWrites counted 51
// hub Service deletes for 50 LoadBalancers) and remembers it while the cache lists it (collect
// leaves it out of the plan's input). Once the cache no longer lists it, it is forgotten: a
// Service of the same name made anew (another UID) is deleted again.
func TestDeletedServiceIsNotDeletedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "envoy-alpha", UID: "uid-1"}}
	deletes := 0
	cl := fake.NewClientBuilder().WithObjects(svc.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deletes++
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	c := newController()
	c.client = cl

	stale := svc.DeepCopy() // what the cache still holds after the delete
	for range 3 {
		if err := c.deleteService(ctx, stale); err != nil {
			t.Fatal(err)
		}
	}
	if deletes != 1 {
		t.Fatalf("%d deletes of one hub Service, want 1", deletes)
	}

	// The cache still lists it: remembered, and left out of what is planned.
	c.deleted.prune(ns, []corev1.Service{*stale})
	if !c.deleted.done(stale) {
		t.Fatal("a deleted Service the cache still lists was forgotten")
	}
	// The cache no longer lists it: forgotten; a Service made anew under the name is its own.
	c.deleted.prune(ns, nil)
	if c.deleted.done(stale) {
		t.Fatal("a deleted Service the cache no longer lists is still remembered")
	}
	anew := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "envoy-alpha", UID: "uid-2"}}
	if err := cl.Create(ctx, anew); err != nil {
		t.Fatal(err)
	}
	if err := c.deleteService(ctx, anew); err != nil {
		t.Fatal(err)
	}
	if deletes != 2 {
		t.Fatalf("%d deletes, want 2: the Service made anew was not deleted", deletes)
	}
}
