package trafficpolicy

import (
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Bounds of a policy's targetSelectors (tenants are untrusted: every object selected is one
// more ancestor in the policy's status and one more Route carrying it).
const (
	// MaxSelectors bounds the targetSelectors of a policy (targetRefs' maxItems in Envoy
	// Gateway's CRDs).
	MaxSelectors = 16
	// MaxSelected bounds the objects a policy's targetSelectors select together: a policy
	// selecting more applies to none of them (the status of a policy names at most 16
	// ancestors).
	MaxSelected = 16
	// MaxSelectorTerms bounds the matchLabels and matchExpressions of one selector together,
	// and MaxSelectorValues the values of one expression.
	MaxSelectorTerms  = 32
	MaxSelectorValues = 64
	// gatewayAPIGroup is a selector's group when it names none (Envoy Gateway's default).
	gatewayAPIGroup = "gateway.networking.k8s.io"
)

// Selector is one of a policy's targetSelectors: the objects of Group and Kind of the
// policy's namespace whose labels match Labels.
type Selector struct {
	Group, Kind string
	Labels      labels.Selector
}

// Matches tells whether the selector selects an object of group, kind and labels.
func (s Selector) Matches(group, kind string, objLabels map[string]string) bool {
	return s.Group == group && s.Kind == kind && s.Labels.Matches(labels.Set(objLabels))
}

// targetSelector is a targetSelectors entry as Envoy Gateway's CRD writes it.
type targetSelector struct {
	Group            *string                           `json:"group,omitempty"`
	Kind             string                            `json:"kind"`
	MatchLabels      map[string]string                 `json:"matchLabels,omitempty"`
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
	Namespaces       *struct {
		From     string         `json:"from,omitempty"`
		Selector map[string]any `json:"selector,omitempty"`
	} `json:"namespaces,omitempty"`
}

// Selectors reads a policy's targetSelectors (unstructured spec): every problem found,
// joined, when one cannot be used as written (then the policy cannot be used at all).
// Selecting objects of other namespaces (namespaces.from All or Selector) is not yet
// supported.
func Selectors(spec map[string]any) ([]Selector, error) {
	raw, ok := spec["targetSelectors"]
	if !ok || raw == nil {
		return nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, errors.New("spec.targetSelectors is not a list")
	}
	if len(list) > MaxSelectors {
		return nil, fmt.Errorf("spec.targetSelectors has %d selectors; at most %d", len(list), MaxSelectors)
	}
	var out []Selector
	var errs []error
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("spec.targetSelectors[%d] is not an object", i))
			continue
		}
		var ts targetSelector
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, &ts, true); err != nil {
			errs = append(errs, fmt.Errorf("spec.targetSelectors[%d] cannot be read: %s", i, truncate(err.Error())))
			continue
		}
		if ns := ts.Namespaces; ns != nil && ns.From != "" && ns.From != "Same" {
			errs = append(errs, fmt.Errorf("spec.targetSelectors[%d].namespaces.from %s: selecting objects of other namespaces is not yet supported by kubelb; use Same", i, truncate(ns.From)))
			continue
		}
		if ts.Kind == "" {
			errs = append(errs, fmt.Errorf("spec.targetSelectors[%d].kind is required", i))
			continue
		}
		if n := len(ts.MatchLabels) + len(ts.MatchExpressions); n > MaxSelectorTerms {
			errs = append(errs, fmt.Errorf("spec.targetSelectors[%d] has %d matchLabels and matchExpressions; at most %d", i, n, MaxSelectorTerms))
			continue
		}
		if j := slices.IndexFunc(ts.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool { return len(r.Values) > MaxSelectorValues }); j >= 0 {
			errs = append(errs, fmt.Errorf("spec.targetSelectors[%d].matchExpressions[%d] has %d values; at most %d", i, j, len(ts.MatchExpressions[j].Values), MaxSelectorValues))
			continue
		}
		group := gatewayAPIGroup
		if ts.Group != nil {
			group = *ts.Group
		}
		sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: ts.MatchLabels, MatchExpressions: ts.MatchExpressions})
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.targetSelectors[%d] is not a valid label selector: %s", i, truncate(err.Error())))
			continue
		}
		out = append(out, Selector{Group: group, Kind: ts.Kind, Labels: sel})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
