package helm

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestConfigManagerHA: the kustomize install (config/default) runs the manager as the chart's
// defaults do: two replicas, an upgrade that starts a new replica before taking one down, a
// PodDisruptionBudget that lets a node drain take one replica at a time, and a preferred
// anti-affinity that spreads the replicas over nodes.
func TestConfigManagerHA(t *testing.T) {
	t.Parallel()
	objs := kustomize(t, "default")
	d := find(t, objs, "Deployment", "kubelb")
	pods := podLabels(t, d)
	chart := Template(t, ManagerChart, "kubelb-manager", ns)
	cd := find(t, chart, "Deployment", "kubelb-manager")

	if r := jsonString(d.Object["spec"].(map[string]any)["replicas"]); r != "2" {
		t.Errorf("replicas %s, want 2", r)
	}
	if got, want := strategy(d), strategy(cd); got != want {
		t.Errorf("strategy %s, want the chart's %s", got, want)
	}

	var found []*unstructured.Unstructured
	for _, p := range pdbs(objs) {
		if p.GetNamespace() == d.GetNamespace() {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d PodDisruptionBudgets in namespace %s, want 1", len(found), d.GetNamespace())
	}
	spec := found[0].Object["spec"].(map[string]any)
	if jsonString(spec["maxUnavailable"]) != "1" || spec["minAvailable"] != nil {
		t.Errorf("PodDisruptionBudget spec %s, want maxUnavailable 1 only", jsonString(spec))
	}
	sel, _, _ := unstructured.NestedStringMap(spec, "selector", "matchLabels")
	if !selects(sel, pods) {
		t.Errorf("PodDisruptionBudget selects %v, not the manager pods %v", sel, pods)
	}

	preferred, required := antiAffinity(t, d)
	if len(preferred) != 1 || len(required) != 0 {
		t.Fatalf("pod anti-affinity: %d preferred, %d required terms, want one preferred", len(preferred), len(required))
	}
	term := preferred[0]["podAffinityTerm"].(map[string]any)
	cpreferred, _ := antiAffinity(t, cd)
	cterm := cpreferred[0]["podAffinityTerm"].(map[string]any)
	if term["topologyKey"] != cterm["topologyKey"] || jsonString(preferred[0]["weight"]) != jsonString(cpreferred[0]["weight"]) ||
		!selects(matchLabels(t, term), pods) {
		t.Errorf("preferred anti-affinity %s: want the chart's weight and topology key (%s) against the manager pods %v",
			jsonString(preferred[0]), jsonString(cpreferred[0]), pods)
	}
}
