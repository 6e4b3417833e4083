package translator

import (
	"reflect"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"kubelb.dev/kubelb/internal/ir"
)

// TestOwners: every resource names the objects it was made from, sorted and without
// repeats; a route configuration gathers its routes' owners; the IR's own lists are never
// changed (they are shared with later results).
func TestOwners(t *testing.T) {
	lb := func(n string) ir.ObjectRef { return ir.ObjectRef{Kind: "LoadBalancer", Namespace: "t", Name: n} }
	rt := func(n string) ir.ObjectRef { return ir.ObjectRef{Kind: "Route", Namespace: "t", Name: n} }
	unsorted := []ir.ObjectRef{rt("b"), rt("a"), rt("b")}
	cfg := &ir.Config{
		Listeners: []*ir.Listener{{Name: "l1", Owners: []ir.ObjectRef{lb("a")}}, {Name: "l2", Owners: unsorted}, {Name: "l3"}},
		RouteConfigs: []*ir.RouteConfig{{Name: "rc", VirtualHosts: []*ir.VirtualHost{
			{Name: "v1", Routes: []*ir.Route{{Owners: []ir.ObjectRef{rt("z")}}, {Owners: []ir.ObjectRef{rt("a")}}}},
			{Name: "v2", Routes: []*ir.Route{{Owners: []ir.ObjectRef{rt("z")}}}},
		}}},
		Clusters: []*ir.Cluster{{Name: "c1", Owners: []ir.ObjectRef{lb("a"), lb("b")}}, {Name: "c1", Owners: []ir.ObjectRef{lb("a")}}},
	}
	first := cfg.RouteConfigs[0].VirtualHosts[0].Routes[0].Owners
	got := Owners(cfg)
	want := map[string]map[string][]ir.ObjectRef{
		resource.ListenerType: {"l1": {lb("a")}, "l2": {rt("a"), rt("b")}, "l3": nil},
		resource.RouteType:    {"rc": {rt("a"), rt("z")}},
		resource.ClusterType:  {"c1": {lb("a"), lb("b")}},
		resource.EndpointType: {"c1": {lb("a"), lb("b")}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Owners = %v\nwant %v", got, want)
	}
	if !reflect.DeepEqual(first, []ir.ObjectRef{rt("z")}) || !reflect.DeepEqual(cfg.Clusters[0].Owners, []ir.ObjectRef{lb("a"), lb("b")}) ||
		!reflect.DeepEqual(unsorted, []ir.ObjectRef{rt("b"), rt("a"), rt("b")}) {
		t.Errorf("the IR's lists were changed: %v %v %v", first, cfg.Clusters[0].Owners, unsorted)
	}
	if &got[resource.ListenerType]["l1"][0] != &cfg.Listeners[0].Owners[0] {
		t.Errorf("a lone sorted list was copied")
	}
}
