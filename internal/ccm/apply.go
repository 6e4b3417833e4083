package ccm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ssa"
)

// hubApplier writes hub objects with server-side apply under hubnames.FieldOwnerCCM (ssa.Apply).
// Legacy is the field manager of earlier ccm versions, which created and merge-patched
// (ssa.LegacyFieldManager of the hub client's config); "" adopts nothing.
type hubApplier struct {
	hub    client.Client
	legacy string
}

// present returns p as a client.Object: nil when p is nil (not a typed nil in an interface).
func present[T any, P interface {
	*T
	client.Object
}](p P) client.Object {
	if p == nil {
		return nil
	}
	return p
}

// ownedBy tells whether a managedFields entry of the main resource holds fields of the ccm:
// its apply, or the creates and updates of an earlier version.
func (a hubApplier) ownedBy(e metav1.ManagedFieldsEntry) bool {
	if e.Subresource != "" {
		return false
	}
	return (e.Manager == hubnames.FieldOwnerCCM && e.Operation == metav1.ManagedFieldsOperationApply) ||
		(a.legacy != "" && e.Manager == a.legacy && e.Operation == metav1.ManagedFieldsOperationUpdate)
}

// drifted tells whether current (nil: none) lacks what desired says: a label, annotation or
// finalizer of desired is missing or different, a top-level spec field differs, or a field
// the ccm owns and desired no longer has is still there. Fields only others own are not
// looked at: the ccm neither owns nor removes them.
func (a hubApplier) drifted(current, desired client.Object) (bool, error) {
	if current == nil {
		return true, nil
	}
	var owned ownedFields
	for _, e := range current.GetManagedFields() {
		if a.ownedBy(e) {
			if err := owned.add(e); err != nil {
				return false, fmt.Errorf("reading the managed fields of %s: %w", client.ObjectKeyFromObject(current), err)
			}
		}
	}
	if mapDrifted(current.GetLabels(), desired.GetLabels(), owned.labels) ||
		mapDrifted(current.GetAnnotations(), desired.GetAnnotations(), owned.annotations) ||
		mapDrifted(asSet(current.GetFinalizers()), asSet(desired.GetFinalizers()), owned.finalizers) {
		return true, nil
	}
	cur, err := specOf(current)
	if err != nil {
		return false, err
	}
	want, err := specOf(desired)
	if err != nil {
		return false, err
	}
	return mapDrifted(cur, want, owned.spec), nil
}

// apply writes desired (a typed object holding exactly the fields the ccm owns) to the hub;
// current (nil: none) is the object as it is, whose fields owned by an earlier ccm version
// are handed to hubnames.FieldOwnerCCM first, once, so that a field the ccm stops applying goes.
func (a hubApplier) apply(ctx context.Context, current, desired client.Object) error {
	return ssa.Apply(ctx, a.hub, desired, current, hubnames.FieldOwnerCCM, a.legacy)
}

// ownedFields are the keys of the fields the ccm owns that drifted compares: label,
// annotation and finalizer keys and top-level spec fields.
type ownedFields struct {
	labels, annotations, finalizers, spec sets.Set[string]
}

// add adds the fields of a managedFields entry.
func (o *ownedFields) add(e metav1.ManagedFieldsEntry) error {
	if e.FieldsV1 == nil {
		return nil
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(e.FieldsV1.Raw, &root); err != nil {
		return err
	}
	var meta map[string]json.RawMessage
	if raw, ok := root["f:metadata"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return err
		}
	}
	var err error
	if o.labels, err = addKeys(o.labels, meta["f:labels"], "f:"); err != nil {
		return err
	}
	if o.annotations, err = addKeys(o.annotations, meta["f:annotations"], "f:"); err != nil {
		return err
	}
	if o.finalizers, err = addKeys(o.finalizers, meta["f:finalizers"], "v:"); err != nil {
		return err
	}
	o.spec, err = addKeys(o.spec, root["f:spec"], "f:")
	return err
}

// addKeys adds to s the keys of a fields set (raw JSON, may be nil) that start with prefix,
// without it; "v:" keys hold a JSON string.
func addKeys(s sets.Set[string], raw json.RawMessage, prefix string) (sets.Set[string], error) {
	if s == nil {
		s = sets.New[string]()
	}
	if raw == nil {
		return s, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return s, err
	}
	for k := range m {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if prefix == "v:" {
			if err := json.Unmarshal([]byte(name), &name); err != nil {
				return s, err
			}
		}
		s.Insert(name)
	}
	return s, nil
}

// mapDrifted tells whether current differs from desired in a key of desired, or still has a
// key of owned that desired dropped.
func mapDrifted[V any](current, desired map[string]V, owned sets.Set[string]) bool {
	for k, v := range desired {
		c, ok := current[k]
		if !ok || !equality.Semantic.DeepEqual(c, v) {
			return true
		}
	}
	for k := range owned {
		if _, want := desired[k]; want {
			continue
		}
		if _, ok := current[k]; ok {
			return true
		}
	}
	return false
}

// asSet is a list of strings (finalizers) as a map.
func asSet(list []string) map[string]struct{} {
	m := make(map[string]struct{}, len(list))
	for _, s := range list {
		m[s] = struct{}{}
	}
	return m
}

// specOf returns obj's spec as unstructured content.
func specOf(obj client.Object) (map[string]any, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	spec, _ := raw["spec"].(map[string]any)
	return spec, nil
}
