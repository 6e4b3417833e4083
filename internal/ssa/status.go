package ssa

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyStatus writes status (a pointer to an API status struct holding only the fields the
// caller owns) to obj's status subresource with server-side apply under field owner owner,
// forcing ownership. Fields other owners applied (another condition type of a
// +listType=map conditions list, say) are kept; a field the owner applied before and leaves
// out now is removed. Status fields an update owns (earlier versions wrote statuses with
// updates) are handed to owner first. On success obj is what the API server returned.
func ApplyStatus(ctx context.Context, c client.Client, obj client.Object, owner string, status any) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return fmt.Errorf("finding the kind of %T: %w", obj, err)
	}
	// Through JSON, not the unstructured converter: the JSON tags' omitempty leave out what
	// the owner does not set, and structs stay objects ({}), never null.
	raw, err := json.Marshal(status)
	if err != nil {
		return fmt.Errorf("encoding the status of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("decoding the status of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	pruneEmptyObjects(st)
	return ApplyStatusFields(ctx, c, obj, owner, st)
}

// ApplyStatusFields is ApplyStatus with the status given as its JSON fields, applied as they
// are (the caller leaves out empty objects where the API server would keep null).
func ApplyStatusFields(ctx context.Context, c client.Client, obj client.Object, owner string, st map[string]any) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return fmt.Errorf("finding the kind of %T: %w", obj, err)
	}
	// Every status updater: only earlier versions of the controllers update these statuses.
	if err := adoptUpdates(ctx, c, obj, owner, "status", nil); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": st}}
	u.SetGroupVersionKind(gvk)
	u.SetName(obj.GetName())
	u.SetNamespace(obj.GetNamespace())
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(owner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the status of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	reflect.ValueOf(obj).Elem().SetZero()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("reading the applied %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// pruneEmptyObjects deletes the empty objects ({}) from m, deepest first. An owner that
// applies an empty object owns it without its fields; when those were set before, the API
// server is left with null there, which a CRD's "type: object" rejects. Left out, the object
// and its fields are released instead.
func pruneEmptyObjects(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case map[string]any:
			pruneEmptyObjects(v)
			if len(v) == 0 {
				delete(m, k)
			}
		case []any:
			for _, item := range v {
				if im, ok := item.(map[string]any); ok {
					pruneEmptyObjects(im)
				}
			}
		}
	}
}

// OwnConditions returns the conditions of the given types from conds (nil when none): a
// controller applies only the condition types it owns, so those of other owners stay.
func OwnConditions(conds []metav1.Condition, types ...string) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conds {
		if slices.Contains(types, c.Type) {
			out = append(out, c)
		}
	}
	return out
}
