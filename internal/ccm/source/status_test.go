package source

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	"kubelb.dev/kubelb/api/v1alpha1"
)

func parent(controller, name string) map[string]any {
	return map[string]any{"controllerName": controller, "parentRef": map[string]any{"name": name}}
}

func TestMergeStatusParents(t *testing.T) {
	cur := map[string]any{"parents": []any{parent("example.com/other", "theirs"), parent(ControllerName, "old")}}
	hub := map[string]any{"parents": []any{parent(ControllerName, "edge"), parent("example.com/sneaky", "x")}}
	got := MergeStatus(HTTPRoute, cur, hub)
	want := map[string]any{"parents": []any{parent("example.com/other", "theirs"), parent(ControllerName, "edge")}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("merged (-want +got):\n%s", d)
	}
	rel := ReleaseStatus(HTTPRoute, got, nil)
	if d := cmp.Diff(map[string]any{"parents": []any{parent("example.com/other", "theirs")}}, rel); d != "" {
		t.Errorf("released (-want +got):\n%s", d)
	}
}

func TestMergeStatusIngressAndGateway(t *testing.T) {
	lb := map[string]any{"ingress": []any{map[string]any{"ip": "203.0.113.1"}}}
	got := MergeStatus(Ingress, nil, map[string]any{"loadBalancer": lb})
	if d := cmp.Diff(map[string]any{"loadBalancer": lb}, got); d != "" {
		t.Errorf("Ingress (-want +got):\n%s", d)
	}
	if rel := ReleaseStatus(Ingress, got, map[string]any{"loadBalancer": lb}); len(rel["loadBalancer"].(map[string]any)) != 0 {
		t.Errorf("released Ingress status %v", rel)
	}
	// Another implementation's status stays when it is not the hub's.
	theirs := map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "198.51.100.1"}}}}
	if rel := ReleaseStatus(Ingress, theirs, map[string]any{"loadBalancer": lb}); !cmp.Equal(rel, theirs) {
		t.Errorf("released another's Ingress status: %v", rel)
	}

	// The hub's Gateway status replaces addresses, conditions, listeners and
	// attachedListenerSets (a count it no longer reports goes); other fields stay.
	gwHub := map[string]any{"addresses": []any{map[string]any{"value": "203.0.113.2"}}, "listeners": []any{map[string]any{"name": "http"}}}
	cur := map[string]any{"conditions": []any{map[string]any{"type": "Accepted"}}, "attachedListenerSets": int64(1), "other": "kept"}
	got = MergeStatus(Gateway, cur, gwHub)
	want := map[string]any{"addresses": gwHub["addresses"], "listeners": gwHub["listeners"], "other": "kept"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Gateway (-want +got):\n%s", d)
	}
	withSets := map[string]any{"listeners": gwHub["listeners"], "attachedListenerSets": int64(2)}
	if got := MergeStatus(Gateway, cur, withSets); got["attachedListenerSets"] != int64(2) {
		t.Errorf("Gateway attachedListenerSets = %v, want the hub's 2", got["attachedListenerSets"])
	}

	// A ListenerSet's conditions and listeners are the hub's, and go with it.
	lsHub := map[string]any{"conditions": []any{map[string]any{"type": "Accepted", "status": "True"}}, "listeners": []any{map[string]any{"name": "a"}}}
	got = MergeStatus(ListenerSet, map[string]any{"conditions": []any{map[string]any{"type": "Accepted", "status": "False"}}}, lsHub)
	if d := cmp.Diff(lsHub, got); d != "" {
		t.Errorf("ListenerSet (-want +got):\n%s", d)
	}
	if rel := ReleaseStatus(ListenerSet, got, lsHub); len(rel) != 0 {
		t.Errorf("released ListenerSet status %v, want none", rel)
	}
}

func TestHubStatusDecodesAsTheKind(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"loadBalancer": map[string]any{"ingress": []any{
		map[string]any{"ip": "203.0.113.1", "ports": []any{map[string]any{"port": 443, "protocol": "TCP"}}}}}, "unknown": true})
	rt := &v1alpha1.Route{}
	rt.Status.Resources.Route.Status = runtime.RawExtension{Raw: raw}
	got, err := HubStatus(Ingress, rt)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"loadBalancer": map[string]any{"ingress": []any{
		map[string]any{"ip": "203.0.113.1", "ports": []any{map[string]any{"port": int64(443), "protocol": "TCP"}}}}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if st, err := HubStatus(Ingress, &v1alpha1.Route{}); st != nil || err != nil {
		t.Errorf("no status: %v, %v", st, err)
	}
}
