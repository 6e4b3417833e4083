// Package namespaces holds which hub namespaces the manager acts in: those labelled
// kubelb.k8c.io/managed-by=kubelb.
package namespaces

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"kubelb.dev/kubelb/internal/hubnames"
)

// Managed reports whether a hub namespace carries kubelb.k8c.io/managed-by=kubelb
// (a missing namespace is not managed): the manager's controllers act only in those.
func Managed(ctx context.Context, c client.Reader, name string) (bool, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("getting namespace %s: %w", name, err)
	}
	return hubnames.IsManaged(ns), nil
}

// ManagedLabelChanged passes namespaces that gain or lose the managed-by label (the
// LoadBalancer, Route and SyncSecret controllers revisit their objects then).
func ManagedLabelChanged() predicate.Predicate {
	managed := hubnames.IsManaged
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return managed(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return managed(e.ObjectOld) != managed(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
