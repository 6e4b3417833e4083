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
	st, err := StatusFields(status, Pruning{})
	if err != nil {
		return fmt.Errorf("the status of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
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

// Pruning says what StatusFields leaves out of a status besides its empty objects.
type Pruning struct {
	// Nulls and EmptyLists leave out null fields and empty lists too, so that two statuses
	// that write the same fields encode alike whatever their Go form (nil or empty).
	Nulls, EmptyLists bool
	// Raw names a field kept as it is wherever it appears (unless null): raw JSON of
	// another API's status, say, whose empty values are meaningful.
	Raw string
}

// StatusFields is status (an API status struct) as the JSON fields an apply sends. Through
// JSON, not the unstructured converter: the JSON tags' omitempty leave out what the owner
// does not set, and structs stay objects ({}), never null. Empty objects are left out
// (deepest first): an owner that applies an empty object owns it without its fields; when
// those were set before, the API server is left with null there, which a CRD's "type:
// object" rejects. Left out, the object and its fields are released instead.
func StatusFields(status any, p Pruning) (map[string]any, error) {
	raw, err := json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encoding: %w", err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	p.prune(st)
	return st, nil
}

func (p Pruning) prune(m map[string]any) {
	for k, v := range m {
		if p.Raw != "" && k == p.Raw && v != nil {
			continue
		}
		switch v := v.(type) {
		case nil:
			if p.Nulls {
				delete(m, k)
			}
		case map[string]any:
			p.prune(v)
			if len(v) == 0 {
				delete(m, k)
			}
		case []any:
			for _, item := range v {
				if im, ok := item.(map[string]any); ok {
					p.prune(im)
				}
			}
			if len(v) == 0 && p.EmptyLists {
				delete(m, k)
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
