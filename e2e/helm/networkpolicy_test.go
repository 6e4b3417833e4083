package helm

import (
	"flag"
	"io"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/tenant"
)

// managerEnvoyPolicy reads the manager Deployment's arguments the way the manager does
// (tenant.NetworkPolicyFlags, the parser cmd/kubelb binds) and returns the NetworkPolicy the
// manager keeps in a tenant namespace with them (tenant.DesiredNetworkPolicy), or nil when
// they turn it off.
func managerEnvoyPolicy(t *testing.T, objs []*unstructured.Unstructured, tenantNS string) *networkingv1.NetworkPolicy {
	t.Helper()
	d := find(t, objs, "Deployment", "kubelb-manager")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	fs := flag.NewFlagSet("kubelb", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f tenant.NetworkPolicyFlags
	f.Bind(fs)
	var ours []string
	listen, namespace := "", ""
	for _, a := range args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch {
		case fs.Lookup(name) != nil:
			ours = append(ours, a)
		case name == "listen-address":
			listen = value
		case name == "namespace":
			namespace = value
		}
	}
	if err := fs.Parse(ours); err != nil {
		t.Fatalf("the manager's NetworkPolicy flags %v: %v", ours, err)
	}
	o, err := f.Options(listen)
	if err != nil {
		t.Fatalf("the manager's NetworkPolicy flags %v: %v", ours, err)
	}
	if o.Disabled {
		return nil
	}
	return tenant.DesiredNetworkPolicy(hubnames.TenantName(tenantNS), namespace, o)
}

// TestManagerNetworkPolicy: the manager chart renders no NetworkPolicy itself (tenant
// namespaces come and go after install; the manager keeps the policy in each); it passes its
// values to the manager, whose policy — read from the rendered arguments with the manager's
// own parser — selects the fleet's pods (the labels the envoyfleet controller puts on them)
// and restricts egress only: to the tenant node CIDRs minus the hub ranges, to the manager
// pods' xDS port and to the cluster DNS. It is off when turned off. (Nothing in the test
// harness enforces NetworkPolicies: this checks objects, not traffic.)
func TestManagerNetworkPolicy(t *testing.T) {
	t.Parallel()
	tenantNS := hubnames.TenantNamespace("shop")
	objs := Template(t, ManagerChart, "kubelb-manager", ns,
		"--set", "networkPolicy.exceptCIDRs={169.254.0.0/16,fe80::/10,10.96.0.0/12}")
	if n := count(objs, "NetworkPolicy"); n != 0 {
		t.Errorf("the chart renders %d NetworkPolicies; the manager makes them", n)
	}
	np := managerEnvoyPolicy(t, objs, tenantNS)
	if np == nil {
		t.Fatal("the chart turns the manager's NetworkPolicy off by default")
	}
	if np.Name != "kubelb-envoy" || np.Namespace != tenantNS {
		t.Errorf("policy %s/%s, want %s/kubelb-envoy", np.Namespace, np.Name, tenantNS)
	}
	sel := np.Spec.PodSelector.MatchLabels
	pod := hubnames.EnvoyPodLabels(tenantNS)
	for k, v := range sel {
		if pod[k] != v {
			t.Errorf("podSelector %v does not select the Envoy pods (labels %v)", sel, pod)
		}
	}
	if len(sel) == 0 {
		t.Error("empty podSelector: it would select every pod of the namespace")
	}
	if types := np.Spec.PolicyTypes; len(types) != 1 || types[0] != networkingv1.PolicyTypeEgress {
		t.Errorf("policyTypes %v, want [Egress] (ingress stays as it is)", types)
	}
	if len(np.Spec.Ingress) > 0 {
		t.Error("the policy has ingress rules")
	}
	egress := np.Spec.Egress
	if len(egress) != 4 {
		t.Fatalf("%d egress rules, want 4 (tenant nodes, xDS, rate-limit service, DNS): %s", len(egress), jsonString(egress))
	}
	if got := jsonString(egress[0]); got != `{"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["169.254.0.0/16","10.96.0.0/12"]}},{"ipBlock":{"cidr":"::/0","except":["fe80::/10"]}}]}` {
		t.Errorf("tenant node rule %s, want everything but the hub ranges, per address family", got)
	}
	d := find(t, objs, "Deployment", "kubelb-manager")
	managerPod, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	xds := egress[1]
	peer := xds.To[0]
	if peer.PodSelector == nil || len(peer.PodSelector.MatchLabels) == 0 || peer.NamespaceSelector == nil ||
		peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != ns {
		t.Errorf("xDS rule peer %s, want the manager pods in namespace %s", jsonString(peer), ns)
	} else {
		for k, v := range peer.PodSelector.MatchLabels {
			if managerPod[k] != v {
				t.Errorf("xDS rule selects pods %v, not the manager's (%v)", peer.PodSelector.MatchLabels, managerPod)
			}
		}
	}
	if got := jsonString(xds.Ports); got != `[{"protocol":"TCP","port":8001}]` {
		t.Errorf("xDS rule ports %s, want TCP 8001 only", got)
	}
	if got := jsonString(egress[2]); !strings.Contains(got, `"app.kubernetes.io/name":"ratelimit"`) || strings.Contains(got, "namespaceSelector") {
		t.Errorf("rate-limit rule %s, want the rate-limit pods of the tenant's own namespace", got)
	}
	if got := jsonString(egress[3]); !strings.Contains(got, `"k8s-app":"kube-dns"`) || !strings.Contains(got, `{"protocol":"UDP","port":53}`) ||
		!strings.Contains(got, `"kubernetes.io/metadata.name":"kube-system"`) {
		t.Errorf("DNS rule %s", got)
	}

	// dns: null allows no DNS.
	objs = Template(t, ManagerChart, "kubelb-manager", ns, "--set", "networkPolicy.dns=null")
	if np := managerEnvoyPolicy(t, objs, tenantNS); np == nil || len(np.Spec.Egress) != 3 {
		t.Errorf("with networkPolicy.dns=null: %v, want the tenant node, xDS and rate-limit rules only", np)
	}

	objs = Template(t, ManagerChart, "kubelb-manager", ns, "--set", "networkPolicy.enabled=false")
	if np := managerEnvoyPolicy(t, objs, tenantNS); np != nil {
		t.Errorf("networkPolicy.enabled=false still has the manager make %s", jsonString(np))
	}
	if n := count(objs, "NetworkPolicy"); n != 0 {
		t.Errorf("%d NetworkPolicies with networkPolicy.enabled=false, want none", n)
	}
}
