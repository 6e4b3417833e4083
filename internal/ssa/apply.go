// Package ssa holds the server-side apply helpers of the controller shapes (see
// docs/development.md), shared by the controllers of both binaries: Apply and ApplyStatus write
// only the fields a field owner owns, taking over once what earlier versions wrote by update;
// OwnConditions keeps a controller's own condition types; RetryConflict turns an
// optimistic-concurrency conflict into a quiet requeue.
package ssa

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply writes desired (a typed object holding only the fields the caller owns) with
// server-side apply under field owner owner, forcing ownership. existing is the object as it
// is (nil: none); the fields that earlier versions of the controller, which created and
// updated instead of applying, own as legacyManager are handed to owner first, so that a
// field the owner stops applying is removed. On success desired is what the API server
// returned.
func Apply(ctx context.Context, c client.Client, desired, existing client.Object, owner, legacyManager string) error {
	gvk, err := c.GroupVersionKindFor(desired)
	if err != nil {
		return fmt.Errorf("finding the kind of %T: %w", desired, err)
	}
	key := client.ObjectKeyFromObject(desired)
	if existing != nil && legacyManager != "" {
		if err := adoptUpdates(ctx, c, existing, owner, "", sets.New(legacyManager)); err != nil {
			return err
		}
	}
	raw, err := json.Marshal(desired)
	if err != nil {
		return fmt.Errorf("encoding %s %s: %w", gvk.Kind, key, err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return fmt.Errorf("decoding %s %s: %w", gvk.Kind, key, err)
	}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	u.SetGroupVersionKind(gvk)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(owner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, key, err)
	}
	reflect.ValueOf(desired).Elem().SetZero()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, desired); err != nil {
		return fmt.Errorf("reading the applied %s %s: %w", gvk.Kind, key, err)
	}
	return nil
}

// LegacyFieldManager is the field manager the API server recorded for this process's creates
// and updates, which it takes from the user agent: what earlier versions of the controllers
// own fields as.
func LegacyFieldManager(cfg *rest.Config) string {
	ua := cfg.UserAgent
	if ua == "" {
		ua = rest.DefaultKubernetesUserAgent()
	}
	name, _, _ := strings.Cut(ua, "/")
	return name
}

// adoptUpdates hands the fields of obj (subresource "" or "status") that the given managers
// own by updates to owner, once, so that a field owner stops applying is removed rather than
// kept by the old entry.
func adoptUpdates(ctx context.Context, c client.Client, obj client.Object, owner, subresource string, managers sets.Set[string]) error {
	found := sets.New[string]()
	for _, e := range obj.GetManagedFields() {
		// Field owners named "kubelb-…" are this project's deliberate writers (e.g. the status
		// writer's pruning patch of TenantState rejections), never legacy ones.
		if strings.HasPrefix(e.Manager, "kubelb-") {
			continue
		}
		if e.Subresource == subresource && e.Operation == metav1.ManagedFieldsOperationUpdate && (managers == nil || managers.Has(e.Manager)) {
			found.Insert(e.Manager)
		}
	}
	if found.Len() == 0 {
		return nil
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(obj, found, owner, csaupgrade.Subresource(subresource))
	if err != nil || patch == nil {
		return err
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("adopting the fields of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return nil
}
