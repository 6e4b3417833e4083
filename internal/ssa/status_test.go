package ssa

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPruneEmptyObjects(t *testing.T) {
	t.Parallel()
	m := map[string]any{
		"loadBalancer": map[string]any{},
		"service":      map[string]any{"inner": map[string]any{}},
		"hostname":     map[string]any{"hostname": "a"},
		"conditions":   []any{map[string]any{"type": "Ready", "extra": map[string]any{}}},
		"observed":     float64(0),
		"empty":        []any{},
		"unset":        nil,
		"status":       map[string]any{"raw": map[string]any{}},
	}
	Pruning{}.prune(m)
	want := map[string]any{
		"hostname":   map[string]any{"hostname": "a"},
		"conditions": []any{map[string]any{"type": "Ready"}},
		"observed":   float64(0),
		"empty":      []any{},
		"unset":      nil,
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("Pruning{}: (-want +got):\n%s", diff)
	}
}

// The Sink's pruning: nulls and empty lists go too, and a raw field is kept as it is.
func TestPruneAllButRaw(t *testing.T) {
	t.Parallel()
	m := map[string]any{
		"empty":      []any{},
		"unset":      nil,
		"conditions": []any{map[string]any{"type": "Ready", "reason": nil}},
		"resources":  map[string]any{"route": map[string]any{"status": map[string]any{"raw": map[string]any{}, "list": []any{}}}},
		"service":    map[string]any{"status": nil},
	}
	Pruning{Nulls: true, EmptyLists: true, Raw: "status"}.prune(m)
	want := map[string]any{
		"conditions": []any{map[string]any{"type": "Ready"}},
		"resources":  map[string]any{"route": map[string]any{"status": map[string]any{"raw": map[string]any{}, "list": []any{}}}},
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestOwnConditions(t *testing.T) {
	t.Parallel()
	conds := []metav1.Condition{{Type: "Ready"}, {Type: "Programmed"}, {Type: "Accepted"}}
	got := OwnConditions(conds, "Ready", "Accepted")
	if diff := cmp.Diff([]metav1.Condition{{Type: "Ready"}, {Type: "Accepted"}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := OwnConditions(conds, "Other"); got != nil {
		t.Errorf("OwnConditions of an absent type = %v, want nil", got)
	}
}
