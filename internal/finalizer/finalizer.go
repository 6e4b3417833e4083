// Package finalizer is the one finalizer helper of both binaries' controllers (see
// docs/development.md, "per object"): Ensure adds a finalizer and Remove removes it, each only
// when needed and with a merge patch under optimistic locking, so that the patch never drops a
// finalizer someone else added meanwhile. A conflict is returned as is (wrapped): the
// controller's deferred ssa.RetryConflict turns it into a quiet retry. Only objects whose
// deletion needs cleanup get a finalizer.
package finalizer

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Patcher is what the helpers need of a client: a patch, and the scheme that names the kind
// in an error.
type Patcher interface {
	Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error
	Scheme() *runtime.Scheme
}

// Ensure adds finalizer name to obj when it is missing. It reports whether it wrote; on
// success obj is the object as the API server returned it.
func Ensure(ctx context.Context, c Patcher, obj client.Object, name string) (bool, error) {
	if controllerutil.ContainsFinalizer(obj, name) {
		return false, nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, name)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("adding the finalizer to %s %s: %w", kind(c, obj), objectName(obj), err)
	}
	return true, nil
}

// Remove removes finalizer name from obj when it has it. It reports whether it wrote. An
// object already gone (an earlier pass removed the finalizer and the cache was behind) is no
// error.
func Remove(ctx context.Context, c Patcher, obj client.Object, name string) (bool, error) {
	if !controllerutil.ContainsFinalizer(obj, name) {
		return false, nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, name)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("removing the finalizer from %s %s: %w", kind(c, obj), objectName(obj), err)
	}
	return true, nil
}

// kind names obj's kind for an error message.
func kind(c Patcher, obj client.Object) string {
	if gvk, err := apiutil.GVKForObject(obj, c.Scheme()); err == nil && gvk.Kind != "" {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", obj)
}

// objectName names obj in an error message: namespace/name, or name alone when cluster-scoped.
func objectName(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
