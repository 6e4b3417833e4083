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
	preferred := expectHADefaults(t, d, found[0])
	term := preferred["podAffinityTerm"].(map[string]any)
	cpreferred, _ := antiAffinity(t, cd)
	cterm := cpreferred[0]["podAffinityTerm"].(map[string]any)
	if term["topologyKey"] != cterm["topologyKey"] || jsonString(preferred["weight"]) != jsonString(cpreferred[0]["weight"]) ||
		!selects(matchLabels(t, term), pods) {
		t.Errorf("preferred anti-affinity %s: want the chart's weight and topology key (%s) against the manager pods %v",
			jsonString(preferred), jsonString(cpreferred[0]), pods)
	}
}
