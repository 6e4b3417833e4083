package translator

import (
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/ir"
)

// TestRouteConfigValidatedByVirtualHost: routeConfigWith validates each virtual host until it
// is found valid, and the rest of the configuration on its own; an invalid virtual host is
// refused with protoc-gen-validate's message for the whole configuration (naming the host),
// built again or reused.
func TestRouteConfigValidatedByVirtualHost(t *testing.T) {
	direct := &ir.DirectResponse{Status: 200}
	vh := func(name string, domains ...string) *ir.VirtualHost {
		return &ir.VirtualHost{Name: name, Domains: domains, Routes: []*ir.Route{{Name: name + "/r", DirectResponse: direct}}}
	}
	good := &ir.RouteConfig{Name: "rc", VirtualHosts: []*ir.VirtualHost{vh("a", "a.example"), vh("b", "b.example")}}
	prev := map[*ir.VirtualHost]builtHost{}
	if _, err := routeConfigWith(good, nil, prev); err != nil {
		t.Fatalf("a valid configuration: %v", err)
	}
	for _, h := range good.VirtualHosts {
		if b, ok := prev[h]; !ok || !b.valid {
			t.Fatalf("virtual host %s: recorded %v, valid %v", h.Name, ok, b.valid)
		}
	}
	// One new virtual host without domains beside the two built before: the whole is refused,
	// naming it, whether it is built now or reused from the last build.
	bad := &ir.RouteConfig{Name: "rc", VirtualHosts: []*ir.VirtualHost{good.VirtualHosts[0], vh("c"), good.VirtualHosts[1]}}
	next := map[*ir.VirtualHost]builtHost{}
	_, err := routeConfigWith(bad, prev, next)
	if err == nil || !strings.Contains(err.Error(), "VirtualHosts[1]") {
		t.Fatalf("a virtual host without domains: %v, want an error naming VirtualHosts[1]", err)
	}
	if next[bad.VirtualHosts[1]].valid {
		t.Error("the invalid virtual host is recorded as valid")
	}
	if _, again := routeConfigWith(bad, next, map[*ir.VirtualHost]builtHost{}); again == nil || again.Error() != err.Error() {
		t.Errorf("reused: %v, want %v", again, err)
	}
	// The fields beside the virtual hosts (HTTP/3's alt-svc header) are validated and pass.
	if _, err := routeConfigWith(&ir.RouteConfig{Name: "rc", VirtualHosts: good.VirtualHosts, HTTP3Port: 443}, next, nil); err != nil {
		t.Errorf("HTTP/3 on 443: %v", err)
	}
}
