package helm

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/internal/manager"
	"kubelb.dev/kubelb/internal/settings"
)

// networkPolicies returns the NetworkPolicies kubelb-envoy rendered, by namespace.
func networkPolicies(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() == "NetworkPolicy" && o.GetName() == "kubelb-envoy" {
			out[o.GetNamespace()] = o
		}
	}
	return out
}

// TestManagerNetworkPolicy: the manager chart renders, by default, a NetworkPolicy for the
// Envoy fleet of each tenant namespace: it selects the fleet's pods (the labels the
// envoyfleet controller puts on them), restricts egress only, to the tenant node CIDRs minus
// the hub ranges, to the manager pods' xDS port and to the cluster DNS. It is absent when
// turned off. (Nothing in the test harness enforces NetworkPolicies: this checks the
// rendered objects, not traffic.)
func TestManagerNetworkPolicy(t *testing.T) {
	t.Parallel()
	tenantNS := settings.Namespace("shop")
	objs := Template(t, ManagerChart, "kubelb-manager", ns, "--set", "networkPolicy.tenantNamespaces={"+tenantNS+"}",
		"--set", "networkPolicy.exceptCIDRs={169.254.0.0/16,fe80::/10,10.96.0.0/12}")
	nps := networkPolicies(objs)
	np := nps[tenantNS]
	if len(nps) != 1 || np == nil {
		t.Fatalf("NetworkPolicies kubelb-envoy in %v, want one in %s", keys(nps), tenantNS)
	}
	sel, _, _ := unstructured.NestedStringMap(np.Object, "spec", "podSelector", "matchLabels")
	pod := manager.EnvoyPodLabels(tenantNS)
	for k, v := range sel {
		if pod[k] != v {
			t.Errorf("podSelector %v does not select the Envoy pods (labels %v)", sel, pod)
		}
	}
	if len(sel) == 0 {
		t.Error("empty podSelector: it would select every pod of the namespace")
	}
	types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes")
	if len(types) != 1 || types[0] != "Egress" {
		t.Errorf("policyTypes %v, want [Egress] (ingress stays as it is)", types)
	}
	if _, found, _ := unstructured.NestedSlice(np.Object, "spec", "ingress"); found {
		t.Error("the policy has ingress rules")
	}
	egress, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
	if len(egress) != 3 {
		t.Fatalf("%d egress rules, want 3 (tenant nodes, xDS, DNS): %s", len(egress), jsonString(egress))
	}
	if got := jsonString(egress[0]); got != `{"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["169.254.0.0/16","10.96.0.0/12"]}},{"ipBlock":{"cidr":"::/0","except":["fe80::/10"]}}]}` {
		t.Errorf("tenant node rule %s, want everything but the hub ranges, per address family", got)
	}
	d := find(t, objs, "Deployment", "kubelb-manager")
	managerPod, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	xds := egress[1].(map[string]any)
	peer := xds["to"].([]any)[0].(map[string]any)
	peerPods, _, _ := unstructured.NestedStringMap(peer, "podSelector", "matchLabels")
	peerNS, _, _ := unstructured.NestedStringMap(peer, "namespaceSelector", "matchLabels")
	for k, v := range peerPods {
		if managerPod[k] != v {
			t.Errorf("xDS rule selects pods %v, not the manager's (%v)", peerPods, managerPod)
		}
	}
	if len(peerPods) == 0 || peerNS["kubernetes.io/metadata.name"] != ns {
		t.Errorf("xDS rule peer %s, want the manager pods in namespace %s", jsonString(peer), ns)
	}
	if got := jsonString(xds["ports"]); got != `[{"port":8001,"protocol":"TCP"}]` {
		t.Errorf("xDS rule ports %s, want TCP 8001 only", got)
	}
	if got := jsonString(egress[2]); !strings.Contains(got, `"k8s-app":"kube-dns"`) || !strings.Contains(got, `{"port":53,"protocol":"UDP"}`) {
		t.Errorf("DNS rule %s", got)
	}

	objs = Template(t, ManagerChart, "kubelb-manager", ns, "--set", "networkPolicy.tenantNamespaces={"+tenantNS+"}",
		"--set", "networkPolicy.enabled=false")
	if n := count(objs, "NetworkPolicy"); n != 0 {
		t.Errorf("%d NetworkPolicies with networkPolicy.enabled=false, want none", n)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
