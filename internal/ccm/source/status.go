package source

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// gatewayStatusFields are the fields of a Gateway's status the hub's status replaces;
// listenerSetStatusFields a ListenerSet's.
var (
	gatewayStatusFields     = []string{"addresses", "conditions", "listeners", "attachedListenerSets"}
	listenerSetStatusFields = []string{"conditions", "listeners"}
)

// ownedStatusFields are the status fields of kind k that the hub's status replaces whole
// (nil: another merge).
func ownedStatusFields(k Kind) []string {
	switch k.Name {
	case Gateway.Name:
		return gatewayStatusFields
	case ListenerSet.Name:
		return listenerSetStatusFields
	}
	return nil
}

// HubStatus decodes the status the manager wrote for the tenant object
// (Route.status.resources.route.status) as the status of kind k, in the unstructured form
// of the tenant's objects (fields the kind does not have are dropped); nil when there is
// none yet.
func HubStatus(k Kind, r *v1alpha1.Route) (map[string]any, error) {
	raw := r.Status.Resources.Route.Status.Raw
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	obj := k.New()
	wrapped, err := json.Marshal(map[string]json.RawMessage{"status": raw})
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(wrapped, obj); err != nil {
		return nil, fmt.Errorf("decoding the status of Route %s/%s as a %s status: %w", r.Namespace, r.Name, k.String(), err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	st, _ := u["status"].(map[string]any)
	return orEmpty(st), nil
}

// MergeStatus is the tenant object's status (cur, its unstructured status; may be nil) with
// the hub's status (hub, not nil) copied in: an Ingress's loadBalancer, a Gateway's addresses,
// conditions, listeners and attachedListenerSets, a ListenerSet's conditions and listeners, a route's status.parents entries of kubelb's controllerName
// (entries of other controllers stay, in their order, before kubelb's).
func MergeStatus(k Kind, cur, hub map[string]any) map[string]any {
	out := runtime.DeepCopyJSON(orEmpty(cur))
	switch {
	case k.Name == Ingress.Name:
		lb, ok := hub["loadBalancer"]
		if !ok {
			lb = map[string]any{}
		}
		out["loadBalancer"] = runtime.DeepCopyJSONValue(lb)
	case ownedStatusFields(k) != nil:
		for _, f := range ownedStatusFields(k) {
			if v, ok := hub[f]; ok {
				out[f] = runtime.DeepCopyJSONValue(v)
			} else {
				delete(out, f)
			}
		}
	case k.AttachesToGateway():
		parents := otherParents(out)
		hp, _ := hub["parents"].([]any)
		for _, p := range hp {
			if isOurParent(p) {
				parents = append(parents, runtime.DeepCopyJSONValue(p))
			}
		}
		out["parents"] = parents
	}
	return out
}

// ReleaseStatus is the tenant object's status (cur) without what the ccm copied from the hub
// (hub, nil when unknown), for an object the ccm no longer serves: a route's parents of
// kubelb's controllerName go; an Ingress's loadBalancer and a Gateway's fields are cleared
// only when they are still the hub's (another implementation may have written them since).
func ReleaseStatus(k Kind, cur, hub map[string]any) map[string]any {
	out := runtime.DeepCopyJSON(orEmpty(cur))
	switch {
	case k.Name == Ingress.Name:
		if hub != nil && reflect.DeepEqual(out["loadBalancer"], hub["loadBalancer"]) {
			out["loadBalancer"] = map[string]any{}
		}
	case ownedStatusFields(k) != nil:
		if hub == nil {
			break
		}
		same := true
		for _, f := range ownedStatusFields(k) {
			same = same && reflect.DeepEqual(out[f], hub[f])
		}
		if same {
			for _, f := range ownedStatusFields(k) {
				delete(out, f)
			}
		}
	case k.AttachesToGateway():
		if _, ok := out["parents"]; ok {
			out["parents"] = otherParents(out)
		}
	}
	return out
}

// otherParents are the entries of status.parents of controllers other than kubelb.
func otherParents(status map[string]any) []any {
	cur, _ := status["parents"].([]any)
	out := []any{}
	for _, p := range cur {
		if !isOurParent(p) {
			out = append(out, p)
		}
	}
	return out
}

// isOurParent tells whether a status.parents entry is kubelb's.
func isOurParent(p any) bool {
	m, _ := p.(map[string]any)
	return m["controllerName"] == ControllerName
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
