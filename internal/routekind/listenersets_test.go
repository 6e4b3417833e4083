package routekind

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// route embeds obj (apiVersion gateway.networking.k8s.io/v1) with source context ctx.
func route(name string, created time.Time, obj map[string]any, ctx *v1alpha1.SourceContext) *v1alpha1.Route {
	obj["apiVersion"] = "gateway.networking.k8s.io/v1"
	rt := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	rt.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: obj}, Context: ctx}
	return rt
}

func listeners(n, port int) []any {
	out := make([]any, 0, n)
	for i := range n {
		out = append(out, map[string]any{"name": fmt.Sprintf("l%d", i), "port": int64(port + i), "protocol": "HTTP"})
	}
	return out
}

// TestGatewaySets: a Gateway takes the ListenerSets naming it that its allowedListeners
// allow, oldest ListenerSet first (by the ListenerSet's own creationTimestamp, not its
// Route's), and their listeners get ports only within the Gateway's 64 listeners.
func TestGatewaySets(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	gw := route("gw", t0, map[string]any{"kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": "web"},
		"spec": map[string]any{"listeners": listeners(60, 1000),
			"allowedListeners": map[string]any{"namespaces": map[string]any{"from": "Selector",
				"selector": map[string]any{"matchLabels": map[string]any{"team": "a"}}}}}}, nil)
	set := func(name, ns string, created time.Time, parent map[string]any, labels map[string]string, n, port int) *v1alpha1.Route {
		return route(name, t0, map[string]any{"kind": "ListenerSet",
			"metadata": map[string]any{"name": name, "namespace": ns, "creationTimestamp": created.Format(time.RFC3339)},
			"spec":     map[string]any{"parentRef": parent, "listeners": listeners(n, port)}},
			&v1alpha1.SourceContext{NamespaceLabels: labels})
	}
	team := map[string]string{"team": "a"}
	toGW := map[string]any{"name": "gw", "namespace": "web"}
	younger := set("younger", "apps", t0.Add(2*time.Minute), toGW, team, 3, 3000)
	older := set("older", "apps", t0.Add(time.Minute), toGW, team, 2, 2000)
	sets := []*v1alpha1.Route{
		younger, older,
		set("other-team", "other", t0, toGW, map[string]string{"team": "b"}, 1, 4000),
		set("other-gateway", "apps", t0, map[string]any{"name": "gw2", "namespace": "web"}, team, 1, 5000),
		set("not-a-gateway", "apps", t0, map[string]any{"name": "gw", "namespace": "web", "kind": "Service", "group": ""}, team, 1, 6000),
		gw, // not a ListenerSet
	}
	got := GatewaySets(gw, sets)
	if len(got) != 2 || got[0] != older || got[1] != younger {
		t.Fatalf("GatewaySets = %v, want [older younger]", names(got))
	}
	var embedded []*unstructured.Unstructured
	for _, s := range got {
		embedded = append(embedded, &s.Spec.Source.Kubernetes.Route)
	}
	ports, problems := GatewayPortsWith(&gw.Spec.Source.Kubernetes.Route, embedded)
	// 60 of the Gateway's, 2 of older, then only 2 of younger's 3 (64 in all).
	if len(ports) != 64 || len(problems) != 0 {
		t.Fatalf("%d ports, problems %v; want 64, none", len(ports), problems)
	}
	for _, p := range ports {
		if p.Port == 3002 {
			t.Errorf("port 3002 (the 65th listener) was given a port")
		}
	}

	// A Gateway without allowedListeners takes none.
	closed := route("closed", t0, map[string]any{"kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": "web"}, "spec": map[string]any{"listeners": listeners(1, 80)}}, nil)
	if got := GatewaySets(closed, sets); len(got) != 0 {
		t.Errorf("a Gateway without allowedListeners takes %v", names(got))
	}
}

func names(rs []*v1alpha1.Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// TestListenerSetAllowed: each allowedListeners.namespaces.from, and a Route without source
// context, which cannot prove its namespace's labels.
func TestListenerSetAllowed(t *testing.T) {
	t.Parallel()
	ctx := &v1alpha1.SourceContext{NamespaceLabels: map[string]string{"team": "a"}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	for _, tc := range []struct {
		from   string
		sel    *metav1.LabelSelector
		lsNS   string
		ctx    *v1alpha1.SourceContext
		wantOK bool
	}{
		{"", nil, "web", ctx, false},
		{"None", nil, "web", ctx, false},
		{"Same", nil, "web", ctx, true},
		{"Same", nil, "apps", ctx, false},
		{"All", nil, "apps", ctx, true},
		{"All", nil, "apps", nil, false},
		{"All", nil, "web", nil, true},
		{"Selector", sel, "apps", ctx, true},
		{"Selector", sel, "apps", &v1alpha1.SourceContext{}, false},
		{"Selector", nil, "apps", ctx, false},
		{"Selector", sel, "apps", nil, false},
		{"Elsewhere", nil, "web", ctx, false},
	} {
		ok, why := ListenerSetAllowed(tc.from, tc.sel, "web", tc.lsNS, tc.ctx)
		if ok != tc.wantOK || ok != (why == "") {
			t.Errorf("from %q, namespace %s, context %v: %v %q; want %v", tc.from, tc.lsNS, tc.ctx != nil, ok, why, tc.wantOK)
		}
	}
}
