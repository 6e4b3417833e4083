package hubschema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// doc is an OpenAPI v3 document of the shape the API server publishes for CRDs: kinds marked
// by x-kubernetes-group-version-kind, metadata by $ref in allOf, maps by
// additionalProperties, embedded objects by x-kubernetes-preserve-unknown-fields.
const doc = `{"components":{"schemas":{
 "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta":{"type":"object","properties":{"name":{"type":"string"}}},
 "io.k8c.kubelb.v1alpha1.Widget":{
  "x-kubernetes-group-version-kind":[{"group":"kubelb.k8c.io","version":"v1alpha1","kind":"Widget"}],
  "type":"object",
  "properties":{
   "apiVersion":{"type":"string"},"kind":{"type":"string"},
   "metadata":{"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
   "spec":{"type":"object","properties":{
     "ports":{"type":"array","items":{"type":"object","properties":{"port":{"type":"integer"}}}},
     "labels":{"type":"object","additionalProperties":{"type":"string"}},
     "resource":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
     "nested":{"type":"object","properties":{"keep":{"type":"string"}}}
   }}
  }},
 "io.k8c.kubelb.v1alpha1.Other":{
  "x-kubernetes-group-version-kind":[{"group":"other.example.com","version":"v1","kind":"Other"}],
  "type":"object"}
}}}`

func TestPruneRemovesWhatTheHubDoesNotDeclare(t *testing.T) {
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Knows("Widget") || s.Knows("Other") {
		t.Fatalf("kinds: Widget %v, Other %v (another group)", s.Knows("Widget"), s.Knows("Other"))
	}
	in := `{"apiVersion":"kubelb.k8c.io/v1alpha1","kind":"Widget",
	 "metadata":{"name":"w","labels":{"a":"b"},"unknownMeta":1},
	 "spec":{"ports":[{"port":1,"appProtocol":"h2"},{"port":2}],"labels":{"x":"y"},
	  "resource":{"anything":{"goes":true}},"nested":{"keep":"k","drop":"d"},"ipFamilies":["IPv6"]},
	 "status":{"x":1}}`
	var obj map[string]any
	if err := json.Unmarshal([]byte(in), &obj); err != nil {
		t.Fatal(err)
	}
	undeclared := s.Undeclared("Widget", obj)
	removed := s.Prune("Widget", obj)
	want := []string{"spec.ipFamilies", "spec.nested.drop", "spec.ports[].appProtocol", "status"}
	if !reflect.DeepEqual(removed, want) || !reflect.DeepEqual(undeclared, want) {
		t.Fatalf("removed %v, undeclared %v, want %v", removed, undeclared, want)
	}
	out, _ := json.Marshal(obj)
	const expect = `{"apiVersion":"kubelb.k8c.io/v1alpha1","kind":"Widget","metadata":{"labels":{"a":"b"},"name":"w","unknownMeta":1},` +
		`"spec":{"labels":{"x":"y"},"nested":{"keep":"k"},"ports":[{"port":1},{"port":2}],"resource":{"anything":{"goes":true}}}}`
	if string(out) != expect {
		t.Fatalf("pruned object\n%s\nwant\n%s", out, expect)
	}
	// An unknown kind and a nil schema leave everything.
	if r := s.Prune("Other", obj); r != nil {
		t.Fatalf("Prune of a kind the hub does not serve removed %v", r)
	}
	var none *Schema
	if r := none.Prune("Widget", map[string]any{"spec": map[string]any{"x": 1}}); r != nil {
		t.Fatalf("a nil schema removed %v", r)
	}
}

func TestUnavailableNamesWhatTheUserLoses(t *testing.T) {
	lb := func(policy string, fams ...any) map[string]any {
		spec := map[string]any{"ipFamilies": fams}
		if policy != "" {
			spec["ipFamilyPolicy"] = policy
		}
		return map[string]any{"spec": spec}
	}
	removed := []string{"spec.ipFamilies", "spec.ipFamilyPolicy"}
	for _, tc := range []struct {
		name string
		obj  map[string]any
		want []string
	}{
		{"single-stack IPv4 loses nothing", lb("SingleStack", "IPv4"), []string{}},
		{"no policy, IPv4", lb("", "IPv4"), []string{}},
		{"IPv6", lb("SingleStack", "IPv6"), []string{"IPv6 and dual-stack addresses"}},
		{"dual-stack", lb("RequireDualStack", "IPv4", "IPv6"), []string{"IPv6 and dual-stack addresses"}},
		{"prefer dual-stack", lb("PreferDualStack", "IPv4"), []string{"IPv6 and dual-stack addresses"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unavailable("LoadBalancer", tc.obj, removed); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	route := map[string]any{"spec": map[string]any{"source": map[string]any{"kubernetes": map[string]any{
		"context": map[string]any{"grantedRefs": []any{map[string]any{"kind": "Service"}}}}}}}
	if got := Unavailable("Route", route, []string{"spec.source.kubernetes.context"}); len(got) != 1 {
		t.Fatalf("a Route with granted references: %v", got)
	}
	tlsRoute := map[string]any{"spec": map[string]any{"source": map[string]any{"kubernetes": map[string]any{
		"context": map[string]any{"backendTLS": []any{map[string]any{"name": "secure"}}}}}}}
	for _, removed := range []string{"spec.source.kubernetes.context", "spec.source.kubernetes.context.backendTLS"} {
		if got := Unavailable("Route", tlsRoute, []string{removed}); !reflect.DeepEqual(got, []string{backendTLSLost}) {
			t.Fatalf("a Route with backend TLS, %s left out: %v", removed, got)
		}
	}
	// A Gateway's ClientTrafficPolicy on a hub whose context lacks clientTraffic (an older
	// kubelb): the Warning says its listeners keep Envoy's defaults.
	ctpRoute := map[string]any{"spec": map[string]any{"source": map[string]any{"kubernetes": map[string]any{
		"context": map[string]any{"clientTraffic": map[string]any{"name": "clients"}}}}}}
	if got := Unavailable("Route", ctpRoute, []string{"spec.source.kubernetes.context.clientTraffic"}); len(got) != 1 || !strings.HasPrefix(got[0], "ClientTrafficPolicies (Envoy Gateway's)") {
		t.Fatalf("a Route with a ClientTrafficPolicy: %v", got)
	}
	if got := Unavailable("Route", tlsRoute, []string{"spec.source.kubernetes.context.clientTraffic"}); len(got) != 0 {
		t.Fatalf("a Route without a ClientTrafficPolicy loses nothing of it: %v", got)
	}
	if got := Unavailable("Route", map[string]any{}, []string{"spec.source.kubernetes.context", "spec.unheardOf"}); !reflect.DeepEqual(got, []string{"the field spec.unheardOf"}) {
		t.Fatalf("an unknown field is named by its path: %v", got)
	}
}

func TestReportedSaysEachChangeOnce(t *testing.T) {
	var r Reported
	removed, lost := []string{"spec.ipFamilies"}, []string{"IPv6 and dual-stack addresses"}
	if _, ok := r.Note("ns/a", "LoadBalancer", removed, lost); !ok {
		t.Fatal("first note not said")
	}
	if _, ok := r.Note("ns/a", "LoadBalancer", removed, lost); ok {
		t.Fatal("same note said twice")
	}
	if _, ok := r.Note("ns/a", "LoadBalancer", nil, nil); ok {
		t.Fatal("nothing lost said something")
	}
	if _, ok := r.Note("ns/a", "LoadBalancer", removed, lost); !ok {
		t.Fatal("a loss after a time without one not said again")
	}
}
