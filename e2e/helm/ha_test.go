package helm

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// podLabels are the labels of a Deployment's pod template.
func podLabels(t *testing.T, d *unstructured.Unstructured) map[string]string {
	t.Helper()
	l, _, err := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// selects: every label of the selector is on the pods.
func selects(selector, pods map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if pods[k] != v {
			return false
		}
	}
	return true
}

func matchLabels(t *testing.T, term map[string]any) map[string]string {
	t.Helper()
	l, _, err := unstructured.NestedStringMap(term, "labelSelector", "matchLabels")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// antiAffinity returns the pod anti-affinity terms of a Deployment: the preferred ones
// (weight and term) and the required ones.
func antiAffinity(t *testing.T, d *unstructured.Unstructured) (preferred, required []map[string]any) {
	t.Helper()
	pa, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec", "affinity", "podAntiAffinity")
	return asMaps(pa["preferredDuringSchedulingIgnoredDuringExecution"]), asMaps(pa["requiredDuringSchedulingIgnoredDuringExecution"])
}

func asMaps(v any) []map[string]any {
	var out []map[string]any
	s, _ := v.([]any)
	for _, e := range s {
		out = append(out, e.(map[string]any))
	}
	return out
}

func strategy(d *unstructured.Unstructured) string {
	return jsonString(d.Object["spec"].(map[string]any)["strategy"])
}

func pdbs(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "PodDisruptionBudget" {
			out = append(out, o)
		}
	}
	return out
}

// TestManagerChartHAByDefault: the default install runs two manager replicas that the
// scheduler spreads over nodes, that an upgrade replaces one at a time with a new replica
// ready first, and that a node drain never takes down both.
func TestManagerChartHAByDefault(t *testing.T) {
	t.Parallel()
	objs := Template(t, ManagerChart, "kubelb-manager", ns)
	d := find(t, objs, "Deployment", "kubelb-manager")
	pods := podLabels(t, d)
	if got, want := strategy(d), `{"rollingUpdate":{"maxSurge":1,"maxUnavailable":0},"type":"RollingUpdate"}`; got != want {
		t.Errorf("strategy %s, want %s (a new replica first, none down before it is ready)", got, want)
	}
	pdb := find(t, objs, "PodDisruptionBudget", "kubelb-manager")
	if pdb.GetNamespace() != ns || pdb.GetAPIVersion() != "policy/v1" {
		t.Errorf("PodDisruptionBudget %s/%s %s", pdb.GetNamespace(), pdb.GetName(), pdb.GetAPIVersion())
	}
	preferred := expectHADefaults(t, d, pdb)
	term := preferred["podAffinityTerm"].(map[string]any)
	if term["topologyKey"] != "kubernetes.io/hostname" || jsonString(preferred["weight"]) != "100" || !selects(matchLabels(t, term), pods) {
		t.Errorf("preferred anti-affinity %s: want weight 100, by hostname, against the manager pods %v", jsonString(preferred), pods)
	}
	// Another release in the same namespace is not repelled: the selector names the instance.
	if matchLabels(t, term)["app.kubernetes.io/instance"] != "kubelb-manager" {
		t.Errorf("anti-affinity selector %v lacks the release instance", matchLabels(t, term))
	}
}

// TestManagerChartHAValues: each HA piece can be tuned or turned off.
func TestManagerChartHAValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, objs []*unstructured.Unstructured, d *unstructured.Unstructured)
	}{
		{"one replica: no PodDisruptionBudget", []string{"--set", "replicaCount=1"}, func(t *testing.T, objs []*unstructured.Unstructured, d *unstructured.Unstructured) {
			if n := len(pdbs(objs)); n != 0 {
				t.Errorf("%d PodDisruptionBudgets over one replica (would block node drains or protect nothing)", n)
			}
		}},
		{"PodDisruptionBudget off", []string{"--set", "podDisruptionBudget.enabled=false"}, func(t *testing.T, objs []*unstructured.Unstructured, d *unstructured.Unstructured) {
			if n := len(pdbs(objs)); n != 0 {
				t.Errorf("%d PodDisruptionBudgets with podDisruptionBudget.enabled=false", n)
			}
		}},
		{"minAvailable instead", []string{"--set", "podDisruptionBudget.minAvailable=50%"}, func(t *testing.T, objs []*unstructured.Unstructured, d *unstructured.Unstructured) {
			spec := find(t, objs, "PodDisruptionBudget", "kubelb-manager").Object["spec"].(map[string]any)
			if spec["minAvailable"] != "50%" || spec["maxUnavailable"] != nil {
				t.Errorf("PodDisruptionBudget spec %s, want minAvailable 50%% only", jsonString(spec))
			}
		}},
		{"no anti-affinity", []string{"--set", "podAntiAffinity.type="}, func(t *testing.T, objs []*unstructured.Unstructured, d *unstructured.Unstructured) {
			if a := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["affinity"]; a != nil {
				t.Errorf("affinity %s with podAntiAffinity.type empty", jsonString(a))
			}
		}},
		{"required by zone", []string{"--set", "podAntiAffinity.type=required", "--set", "podAntiAffinity.topologyKey=topology.kubernetes.io/zone"},
			func(t *testing.T, objs []*unstructured.Unstructured, d *unstructured.Unstructured) {
				preferred, required := antiAffinity(t, d)
				if len(preferred) != 0 || len(required) != 1 || required[0]["topologyKey"] != "topology.kubernetes.io/zone" ||
					!selects(matchLabels(t, required[0]), podLabels(t, d)) {
					t.Errorf("anti-affinity preferred %s required %s, want one required term by zone", jsonString(preferred), jsonString(required))
				}
			}},
		{"affinity's own podAntiAffinity wins", []string{"--set-json", `affinity={"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"example.com/rack","labelSelector":{"matchLabels":{"app":"x"}}}]}}`},
			func(t *testing.T, objs []*unstructured.Unstructured, d *unstructured.Unstructured) {
				preferred, required := antiAffinity(t, d)
				if len(preferred) != 0 || len(required) != 1 || required[0]["topologyKey"] != "example.com/rack" {
					t.Errorf("anti-affinity preferred %s required %s, want only the one from affinity", jsonString(preferred), jsonString(required))
				}
			}},
		{"Recreate", []string{"--set", "strategy.type=Recreate"}, func(t *testing.T, objs []*unstructured.Unstructured, d *unstructured.Unstructured) {
			if got := strategy(d); got != `{"type":"Recreate"}` {
				t.Errorf("strategy %s, want Recreate without rollingUpdate", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := Template(t, ManagerChart, "kubelb-manager", ns, tc.args...)
			tc.check(t, objs, find(t, objs, "Deployment", "kubelb-manager"))
		})
	}

	_, err := Run(t, "template", "kubelb-manager", ChartDir(ManagerChart), "--set", "podAntiAffinity.type=soft")
	if err == nil || !strings.Contains(err.Error(), "podAntiAffinity.type must be preferred, required or empty") {
		t.Errorf("helm template with podAntiAffinity.type=soft: %v", err)
	}
}

// checkFullValuesHA: ci/full-values.yaml's HA values reach the objects: 3 replicas, a surge
// of 2, a PodDisruptionBudget keeping 2, the node affinity from affinity plus the required
// anti-affinity by zone from podAntiAffinity.
func checkFullValuesHA(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	d := find(t, objs, "Deployment", "kubelb-manager")
	if got, want := strategy(d), `{"rollingUpdate":{"maxSurge":2,"maxUnavailable":0},"type":"RollingUpdate"}`; got != want {
		t.Errorf("strategy %s, want %s", got, want)
	}
	spec := find(t, objs, "PodDisruptionBudget", "kubelb-manager").Object["spec"].(map[string]any)
	if jsonString(spec["minAvailable"]) != "2" || spec["maxUnavailable"] != nil {
		t.Errorf("PodDisruptionBudget spec %s, want minAvailable 2 only", jsonString(spec))
	}
	aff, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec", "affinity")
	keys := slices.Sorted(maps.Keys(aff))
	_, required := antiAffinity(t, d)
	if !slices.Equal(keys, []string{"nodeAffinity", "podAntiAffinity"}) || len(required) != 1 || required[0]["topologyKey"] != "topology.kubernetes.io/zone" {
		t.Errorf("affinity %s, want the values' nodeAffinity and a required anti-affinity by zone", jsonString(aff))
	}
}

// expectHADefaults checks what both the chart and the kustomize install give the manager by
// default: two replicas, a PodDisruptionBudget of maxUnavailable 1 only that selects the
// Deployment's pods, and one preferred (no required) pod anti-affinity term, which it returns.
func expectHADefaults(t *testing.T, d, pdb *unstructured.Unstructured) map[string]any {
	t.Helper()
	pods := podLabels(t, d)
	if r := jsonString(d.Object["spec"].(map[string]any)["replicas"]); r != "2" {
		t.Errorf("replicas %s, want 2", r)
	}
	spec := pdb.Object["spec"].(map[string]any)
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
	return preferred[0]
}
