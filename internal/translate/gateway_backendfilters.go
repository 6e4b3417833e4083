package translate

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/ir"
)

// Filters on a backendRef of an HTTPRoute or a GRPCRoute apply only to the requests sent to
// that backend (Gateway API: HTTPRouteBackendRequestHeaderModification). kubelb serves the
// header modifiers there (request and response: the weighted cluster entry of the backend
// carries them); any other filter type on a backendRef is ignored with a warning.

// backendRefOf is one backendRef of a rule and its filters, read as the kind's rule filters.
type backendRefOf struct {
	ref     gwv1.BackendRef
	filters []ruleFilter
}

// backendRefs reads a rule's backendRefs of a kind (B), with their filters (F) read by filter.
func backendRefs[B, F any](bs []B, read func(*B) (gwv1.BackendRef, []F), filter func(*F) ruleFilter) []backendRefOf {
	out := make([]backendRefOf, len(bs))
	for i := range bs {
		ref, fs := read(&bs[i])
		out[i].ref = ref
		for j := range fs {
			out[i].filters = append(out[i].filters, filter(&fs[j]))
		}
	}
	return out
}

// backendHeaderMods is what a backendRef's filters change (nil: nothing).
type backendHeaderMods struct {
	request, response *ir.HeaderModifier
}

// backendHeaders reads the header modifiers of every backendRef of a rule (by index), or
// says why the rule cannot be served; other filter types are reported and ignored.
func backendHeaders(t *l7, owner ir.ObjectRef, brefs []backendRefOf) ([]backendHeaderMods, string) {
	out := make([]backendHeaderMods, len(brefs))
	for i, b := range brefs {
		if len(b.filters) > maxFilters {
			return nil, fmt.Sprintf("backendRef %d has %d filters; at most %d are served", i, len(b.filters), maxFilters)
		}
		for _, fl := range b.filters {
			var err string
			switch fl.typ {
			case gwv1.HTTPRouteFilterRequestHeaderModifier:
				out[i].request, err = headerModifier(fl.request, out[i].request)
			case gwv1.HTTPRouteFilterResponseHeaderModifier:
				out[i].response, err = headerModifier(fl.response, out[i].response)
			default:
				t.problems.Add(owner, ir.SeverityWarning, ReasonUnsupportedFilter, "filter %s on a backendRef is not supported (only RequestHeaderModifier and ResponseHeaderModifier are); ignored", truncate(string(fl.typ)))
			}
			if err != "" {
				return nil, fmt.Sprintf("backendRef %d: filter %s: %s", i, fl.typ, err)
			}
		}
	}
	return out, ""
}
