package finalizer

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/testenv"
)

const name = "example.com/cleanup"

// TestEnsureRemove on a real API server: each writes only when needed, keeps the finalizers
// of others, reports a stale object as a conflict, and takes a gone object as removed.
func TestEnsureRemove(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm", Finalizers: []string{"example.com/other"}}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	stale := cm.DeepCopy()

	if wrote, err := Ensure(ctx, c, cm, name); err != nil || !wrote {
		t.Fatalf("Ensure: wrote %v, %v", wrote, err)
	}
	if wrote, err := Ensure(ctx, c, cm, name); err != nil || wrote {
		t.Fatalf("Ensure again: wrote %v, %v", wrote, err)
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatal(err)
	}
	if want := []string{"example.com/other", name}; !slices.Equal(got.Finalizers, want) {
		t.Errorf("finalizers %v, want %v", got.Finalizers, want)
	}

	// A copy read before the write: a conflict, which ssa.RetryConflict retries quietly.
	stale.Finalizers = nil
	if _, err := Ensure(ctx, c, stale, name); !apierrors.IsConflict(err) {
		t.Errorf("Ensure on a stale object: %v, want a conflict", err)
	}

	if wrote, err := Remove(ctx, c, got, name); err != nil || !wrote {
		t.Fatalf("Remove: wrote %v, %v", wrote, err)
	}
	if wrote, err := Remove(ctx, c, got, name); err != nil || wrote {
		t.Fatalf("Remove again: wrote %v, %v", wrote, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatal(err)
	}
	if want := []string{"example.com/other"}; !slices.Equal(got.Finalizers, want) {
		t.Errorf("finalizers after Remove %v, want %v", got.Finalizers, want)
	}

	// Gone: nothing to remove.
	gone := got.DeepCopy()
	gone.Finalizers = append(gone.Finalizers, name)
	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatal(err)
	}
	if _, err := Remove(ctx, c, got, "example.com/other"); err != nil {
		t.Fatal(err)
	}
	if _, err := Remove(ctx, c, gone, name); err != nil {
		t.Errorf("Remove from a gone object: %v", err)
	}
}
