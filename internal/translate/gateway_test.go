package translate

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/ir"
)

// TestIntersectHostnames checks Gateway API's hostname matching between a listener and a
// route: what a route with these hostnames serves on a listener with this hostname.
func TestIntersectHostnames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listener string
		route    []string
		want     []string
	}{
		{"", nil, []string{"*"}},
		{"", []string{"a.example.com", "*.b.com"}, []string{"a.example.com", "*.b.com"}},
		{"a.example.com", nil, []string{"a.example.com"}},
		{"a.example.com", []string{"a.example.com"}, []string{"a.example.com"}},
		{"a.example.com", []string{"b.example.com"}, nil},
		// A wildcard matches one or more labels, never the bare suffix.
		{"*.example.com", []string{"a.example.com", "a.b.example.com", "example.com"}, []string{"a.example.com", "a.b.example.com"}},
		{"a.example.com", []string{"*.example.com"}, []string{"a.example.com"}},
		{"example.com", []string{"*.example.com"}, nil},
		// Two wildcards: the more specific one.
		{"*.example.com", []string{"*.a.example.com"}, []string{"*.a.example.com"}},
		{"*.a.example.com", []string{"*.example.com"}, []string{"*.a.example.com"}},
		{"*.example.com", []string{"*.com"}, []string{"*.example.com"}},
		{"*.example.com", []string{"*.example.org"}, nil},
		// Suffixes match on label boundaries only.
		{"*.example.com", []string{"badexample.com"}, nil},
		// A route whose hostnames were all invalid matches nothing.
		{"", []string{}, nil},
		// Duplicates from several route hostnames are kept once.
		{"a.example.com", []string{"*.example.com", "a.example.com"}, []string{"a.example.com"}},
	} {
		if got := intersectHostnames(tc.listener, tc.route); !slices.Equal(got, tc.want) {
			t.Errorf("listener %q, route %q: got %q, want %q", tc.listener, tc.route, got, tc.want)
		}
	}
}

func TestValidHostname(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]bool{
		"example.com": true, "*.example.com": true, "a-b.c": true,
		"*": false, "a.*.com": false, "*example.com": false, "10.0.0.1": false, "::1": false,
		"Example.com": false, "a_b.com": false, "": false, "a..b": false,
	} {
		if got := validHostname(h, true); got != want {
			t.Errorf("validHostname(%q) = %v, want %v", h, got, want)
		}
	}
	if validHostname("*.example.com", false) {
		t.Error("a wildcard is accepted where a precise hostname is required")
	}
}

// TestPrecedence sorts matches the way Gateway API orders routes within a virtual host.
func TestPrecedence(t *testing.T) {
	t.Parallel()
	old, young := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	mk := func(name string, m ir.RouteMatch, created time.Time, route string, rule int) *candidate {
		k := matchPrecedence(m)
		k.created, k.namespace, k.name, k.rule = created, "ns", route, rule
		return &candidate{route: &ir.Route{Name: name, Match: m}, key: k}
	}
	h := []ir.StringMatch{{Name: "x", Value: "1"}}
	hh := []ir.StringMatch{{Name: "x", Value: "1"}, {Name: "y", Value: "1"}}
	q := []ir.StringMatch{{Name: "q", Value: "1"}}
	want := []*candidate{
		mk("exact-long", ir.RouteMatch{PathExact: "/api/v1"}, young, "b", 0),
		mk("exact", ir.RouteMatch{PathExact: "/api"}, young, "b", 0),
		mk("regex", ir.RouteMatch{PathRegex: "^/api/.*$"}, young, "b", 0),
		mk("prefix-long", ir.RouteMatch{PathPrefix: "/api/v1"}, young, "b", 0),
		mk("method", ir.RouteMatch{PathPrefix: "/api", Method: "GET"}, young, "b", 0),
		mk("two-headers", ir.RouteMatch{PathPrefix: "/api", Headers: hh}, young, "b", 0),
		mk("header-and-query", ir.RouteMatch{PathPrefix: "/api", Headers: h, QueryParams: q}, young, "b", 0),
		mk("header-old", ir.RouteMatch{PathPrefix: "/api", Headers: h}, old, "z", 0),
		mk("header-young-a", ir.RouteMatch{PathPrefix: "/api", Headers: h}, young, "a", 0),
		mk("header-young-b-rule0", ir.RouteMatch{PathPrefix: "/api", Headers: h}, young, "b", 0),
		mk("header-young-b-rule1", ir.RouteMatch{PathPrefix: "/api/", Headers: h}, young, "b", 1),
		mk("query", ir.RouteMatch{PathPrefix: "/api", QueryParams: q}, young, "b", 0),
		mk("prefix", ir.RouteMatch{PathPrefix: "/api"}, young, "b", 0),
		mk("all", ir.RouteMatch{PathPrefix: "/"}, old, "a", 0),
	}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortStableFunc(got, func(a, b *candidate) int { return a.key.compare(b.key) })
	for i := range want {
		if got[i] != want[i] {
			var names []string
			for _, c := range got {
				names = append(names, c.route.Name)
			}
			t.Fatalf("order %q; want %q at %d", names, want[i].route.Name, i)
		}
	}
}

// TestVirtualHostsCarryCoveringHostnames: a request for a.example.com reaches the routes of
// a.example.com first, then those of *.example.com, then those of any host.
func TestVirtualHostsCarryCoveringHostnames(t *testing.T) {
	t.Parallel()
	c := func(name string) *candidate {
		return &candidate{route: &ir.Route{Name: name, Match: ir.RouteMatch{PathPrefix: "/"}}, key: matchPrecedence(ir.RouteMatch{PathPrefix: "/"})}
	}
	vhs := virtualHosts(map[string][]*candidate{
		"*":             {c("any")},
		"*.example.com": {c("wild")},
		"a.example.com": {c("precise")},
		"b.example.org": {c("other")},
	}, nil)
	got := map[string][]string{}
	for _, vh := range vhs {
		for _, r := range vh.Routes {
			got[vh.Name] = append(got[vh.Name], r.Name)
		}
	}
	want := map[string][]string{
		"*":             {"any"},
		"*.example.com": {"wild", "any"},
		"a.example.com": {"precise", "wild", "any"},
		"b.example.org": {"other", "any"},
	}
	for h, w := range want {
		if !slices.Equal(got[h], w) {
			t.Errorf("virtual host %s: routes %q, want %q", h, got[h], w)
		}
	}
}

// TestPrefixRewrite checks ReplacePrefixMatch as Gateway API defines it, applying the
// generated rewrite the way Envoy does (RE2, the path without its query).
func TestPrefixRewrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ prefix, replacement, path, want string }{
		{"/foo", "/xyz", "/foo/bar", "/xyz/bar"},
		{"/foo", "/xyz", "/foo", "/xyz"},
		{"/foo", "/xyz", "/foo/", "/xyz/"},
		{"/foo", "/xyz/", "/foo/bar", "/xyz/bar"},
		{"/foo/", "/xyz", "/foo/bar", "/xyz/bar"},
		{"/foo", "/", "/foo/bar", "/bar"},
		{"/foo", "/", "/foo", "/"},
		{"/foo", "/", "/foo/", "/"},
		{"/", "/xyz", "/bar", "/xyz/bar"},
		{"/", "/", "/bar", "/bar"},
		{"/a.b", "/c", "/a.b/x", "/c/x"},
	} {
		rr := prefixRewrite(tc.prefix, tc.replacement)
		re := regexp.MustCompile(rr.Pattern)
		got := re.ReplaceAllString(tc.path, strings.ReplaceAll(rr.Substitution, `\1`, "${1}"))
		if got != tc.want {
			t.Errorf("prefix %s → %s: %s became %s, want %s (%+v)", tc.prefix, tc.replacement, tc.path, got, tc.want, rr)
		}
	}
}

// TestHTTPSChainsAnswerMisdirected: on the SNI chain of one HTTPS listener, a request whose
// host belongs to another listener of the port (or, for a listener with a hostname, to none)
// gets 421; the others are routed as usual, with the chain's own routes only (isolation). The
// virtual host a request reaches is picked as Envoy does: exact domain, longest wildcard, "*".
func TestHTTPSChainsAnswerMisdirected(t *testing.T) {
	t.Parallel()
	c := func(name string) []*candidate {
		return []*candidate{{route: &ir.Route{Name: name, Match: ir.RouteMatch{PathPrefix: "/"}, Backends: []ir.WeightedCluster{{Cluster: name, Weight: 1}}}, key: matchPrecedence(ir.RouteMatch{PathPrefix: "/"})}}
	}
	fallback := &gwListener{vhosts: map[string][]*candidate{"*.org": c("fallback-org"), "a.wildcard.org": c("fallback-a")}}
	wild := &gwListener{hostname: "*.wildcard.org", vhosts: map[string][]*candidate{"*.wildcard.org": c("wild")}}
	deep := &gwListener{hostname: "*.deep.wildcard.org", vhosts: map[string][]*candidate{}}
	second := &gwListener{hostname: "second.org", vhosts: map[string][]*candidate{"second.org": c("second")}}
	ls := []*gwListener{fallback, wild, deep, second}
	answer := func(l *gwListener, host string) string {
		vhs := httpsVirtualHosts(l, ls, ir.ObjectRef{Kind: "Route"}, nil)
		seen := map[string]bool{}
		var pick *ir.VirtualHost
		best := -1
		for _, vh := range vhs {
			for _, d := range vh.Domains {
				if seen[d] {
					t.Fatalf("domain %s in two virtual hosts", d)
				}
				seen[d] = true
				rank := -1
				switch {
				case d == host:
					rank = 1 << 20
				case d == "*":
					rank = 0
				case strings.HasPrefix(d, "*.") && strings.HasSuffix(host, d[1:]):
					rank = len(d)
				}
				if rank > best {
					best, pick = rank, vh
				}
			}
		}
		switch {
		case pick == nil || len(pick.Routes) == 0:
			return "404"
		case pick.Routes[0].DirectResponse != nil:
			return fmt.Sprint(pick.Routes[0].DirectResponse.Status)
		}
		return pick.Routes[0].Name
	}
	for _, tc := range []struct {
		l          *gwListener
		host, want string
	}{
		{fallback, "x.org", "fallback-org"},
		{fallback, "a.wildcard.org", "421"}, // wild's host: the fallback's route is not served there
		{fallback, "second.org", "421"},
		{fallback, "x.deep.wildcard.org", "421"},
		{fallback, "example.com", "404"},
		{wild, "b.wildcard.org", "wild"},
		{wild, "a.wildcard.org", "wild"},
		{wild, "x.deep.wildcard.org", "421"},
		{wild, "second.org", "421"},
		{wild, "x.org", "421"},
		{deep, "x.deep.wildcard.org", "404"}, // its own host, nothing attached
		{deep, "b.wildcard.org", "421"},
		{deep, "example.com", "421"},
		{second, "second.org", "second"},
		{second, "x.org", "421"},
		{second, "b.wildcard.org", "421"},
	} {
		if got := answer(tc.l, tc.host); got != tc.want {
			t.Errorf("chain of %q, host %s: %s, want %s", cmp.Or(tc.l.hostname, "(none)"), tc.host, got, tc.want)
		}
	}
}

// TestGRPCMethodRegexCheckedAsEnvoyGetsIt: a GRPCRoute's service and method regexes become
// one path regex; each may pass on its own while the whole is too large for Envoy's RE2, so
// the whole is checked too, and the match is refused with the reason instead of reaching Envoy.
func TestGRPCMethodRegexCheckedAsEnvoyGetsIt(t *testing.T) {
	t.Parallel()
	typ := gwv1.GRPCMethodMatchRegularExpression
	part := "[a-z]{45}"
	if err := regexProblem(part); err != "" {
		t.Fatalf("%s alone: %s", part, err)
	}
	_, msg := grpcMatch(&gwv1.GRPCRouteMatch{Method: &gwv1.GRPCMethodMatch{Type: &typ, Service: &part, Method: &part}})
	if !strings.Contains(msg, "service and method together") || !strings.Contains(msg, "RE2 program size") {
		t.Errorf("service and method %s: %q, want the combined regex refused", part, msg)
	}
	short := "[a-z]{5}"
	if m, msg := grpcMatch(&gwv1.GRPCRouteMatch{Method: &gwv1.GRPCMethodMatch{Type: &typ, Service: &short, Method: &short}}); msg != "" || m.PathRegex == "" {
		t.Errorf("service and method %s: %q (%+v), want a path regex", short, msg, m)
	}
}
