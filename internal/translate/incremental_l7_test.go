package translate_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// Layer 7 changes for TestIncrementalMatchesRun: a tenant's Routes change, go and come back
// as an informer shows them (a changed copy with a new resourceVersion).

// stampRoutes gives every Route, Route Service and hub Secret a UID and a resourceVersion.
func (s *tenantState) stampRoutes() {
	routes := slices.Clone(s.in.Routes)
	for i := range routes {
		routes[i].UID, routes[i].ResourceVersion = types.UID(fmt.Sprintf("uid-route-%d-%s", i, routes[i].Name)), s.nextVersion()
	}
	s.in.Routes = routes
	svcs := slices.Clone(s.in.RouteServices)
	for i := range svcs {
		svcs[i].UID, svcs[i].ResourceVersion = types.UID("uid-route-service-"+svcs[i].Name), s.nextVersion()
	}
	s.in.RouteServices = svcs
	secrets := slices.Clone(s.in.Secrets)
	for i := range secrets {
		secrets[i].UID, secrets[i].ResourceVersion = types.UID("uid-secret-"+secrets[i].Name), s.nextVersion()
	}
	s.in.Secrets = secrets
}

// hubChange changes what the routes read on the hub besides the Routes, and says what: a hub
// Secret's certificate gone or back, a Route Service's first port gone.
func (s *tenantState) hubChange() string {
	in := &s.in
	switch {
	case len(in.Secrets) > 0 && s.rng.IntN(2) == 0:
		secrets := slices.Clone(in.Secrets)
		i := s.rng.IntN(len(secrets))
		sec := secrets[i].DeepCopy()
		if crt, ok := sec.Data["tls.crt"]; ok {
			delete(sec.Data, "tls.crt")
			if sec.Annotations == nil {
				sec.Annotations = map[string]string{}
			}
			sec.Annotations["test/tls.crt"] = string(crt)
		} else if crt, ok := sec.Annotations["test/tls.crt"]; ok {
			sec.Data["tls.crt"] = []byte(crt)
			delete(sec.Annotations, "test/tls.crt")
		}
		sec.ResourceVersion = s.nextVersion()
		secrets[i] = *sec
		in.Secrets = secrets
		return "hub Secret " + sec.Name + " changed"
	case len(in.RouteServices) > 0:
		svcs := slices.Clone(in.RouteServices)
		i := s.rng.IntN(len(svcs))
		svc := svcs[i].DeepCopy()
		if len(svc.Spec.Ports) > 0 {
			svc.Spec.Ports = svc.Spec.Ports[1:]
		}
		svc.ResourceVersion = s.nextVersion()
		svcs[i] = *svc
		in.RouteServices = svcs
		return "Route Service " + svc.Name + " lost a port"
	}
	return "nothing"
}

// routeChange applies one random change to the tenant's Routes and says what it was: a
// Route's tenant object changed in one place, a Route given another Route's object of the
// same kind, a Route gone, one come back, one written again unchanged (a new
// resourceVersion only).
func (s *tenantState) routeChange(gone *[]gonePiece) string {
	in := &s.in
	routes := slices.Clone(in.Routes)
	defer func() { in.Routes = routes }()
	if len(routes) == 0 || (len(*gone) > 0 && s.rng.IntN(4) == 0) {
		if len(*gone) == 0 {
			return "nothing"
		}
		g := (*gone)[len(*gone)-1]
		*gone = (*gone)[:len(*gone)-1]
		g.route.ResourceVersion = s.nextVersion()
		routes = slices.Insert(routes, min(g.index, len(routes)), g.route)
		return "route back " + g.route.Name
	}
	if s.rng.IntN(12) == 0 {
		return s.hubChange()
	}
	i := s.rng.IntN(len(routes))
	r := routes[i].DeepCopy()
	switch op := s.rng.IntN(10); {
	case op == 0:
		*gone = append(*gone, gonePiece{index: i, route: routes[i]})
		routes = slices.Delete(routes, i, i+1)
		return "route gone " + r.Name
	case op == 1:
		r.ResourceVersion = s.nextVersion()
		routes[i] = *r
		return "route touched " + r.Name
	case op == 2:
		j := s.rng.IntN(len(routes))
		src, dst := routes[j].Spec.Source.Kubernetes, r.Spec.Source.Kubernetes
		if src == nil || dst == nil || src.Route.GetKind() != dst.Route.GetKind() {
			return "nothing"
		}
		spec, _ := src.Route.Object["spec"].(map[string]any)
		dst.Route.Object["spec"] = runtime.DeepCopyJSONValue(spec)
		if spec == nil {
			delete(dst.Route.Object, "spec")
		}
		r.ResourceVersion = s.nextVersion()
		routes[i] = *r
		return fmt.Sprintf("route %s given the spec of %s", r.Name, routes[j].Name)
	default:
		if r.Spec.Source.Kubernetes == nil || r.Spec.Source.Kubernetes.Route.Object == nil {
			return "nothing"
		}
		what := s.mutate(r.Spec.Source.Kubernetes.Route.Object)
		r.ResourceVersion = s.nextVersion()
		routes[i] = *r
		return "route " + r.Name + " changed: " + what
	}
}

type gonePiece struct {
	index int
	route v1alpha1.Route
}

// mutate changes one leaf of an unstructured object (under spec when it has one, where
// changes matter): a string gets a suffix or another leaf's value, a number moves by one, a
// boolean flips, a list loses its last item or repeats its first.
func (s *tenantState) mutate(obj map[string]any) string {
	var root any = obj
	if spec, ok := obj["spec"]; ok {
		root = spec
	}
	type leaf struct {
		path string
		get  func() any
		set  func(any)
	}
	var leaves []leaf
	var strs []string
	var walk func(path string, v any, set func(any))
	walk = func(path string, v any, set func(any)) {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(path+"."+k, v[k], func(n any) { v[k] = n })
			}
		case []any:
			leaves = append(leaves, leaf{path, func() any { return v }, set})
			for i := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), v[i], func(n any) { v[i] = n })
			}
		default:
			if s, ok := v.(string); ok {
				strs = append(strs, s)
			}
			leaves = append(leaves, leaf{path, func() any { return v }, set})
		}
	}
	walk("spec", root, nil)
	if len(leaves) == 0 {
		return "nothing"
	}
	l := leaves[s.rng.IntN(len(leaves))]
	if l.set == nil {
		return "nothing"
	}
	switch v := l.get().(type) {
	case string:
		if s.rng.IntN(2) == 0 && len(strs) > 0 {
			l.set(strs[s.rng.IntN(len(strs))])
		} else {
			l.set(v + pick2(s, "x", "-2", ".", "/b"))
		}
	case int64:
		l.set(v + int64(s.rng.IntN(3)) - 1)
	case float64:
		l.set(v + 1)
	case bool:
		l.set(!v)
	case []any:
		if len(v) > 0 && s.rng.IntN(2) == 0 {
			l.set(v[:len(v)-1])
		} else if len(v) > 0 {
			l.set(append(slices.Clone(v), runtime.DeepCopyJSONValue(v[0])))
		}
	}
	return l.path
}

func pick2(s *tenantState, options ...string) string { return options[s.rng.IntN(len(options))] }

// TestIncrementalLayer7Reuses checks the cost side of the Layer 7 front ends in a tenant of
// a Gateway and 100 HTTPRoutes: after one HTTPRoute changed, only its tenant object is
// decoded and translated again (the others replay what they did), and of the result only the two route configurations (one per listener) and
// the route's two virtual hosts are new — every cluster, listener, secret and other virtual
// host is the last result's, so the back end builds two resources; the decoded objects of
// Routes gone are dropped.
func TestIncrementalLayer7Reuses(t *testing.T) {
	t.Parallel()
	in := translatetest.HTTPRoutesTenantCached(t, 100)
	var inc translate.Incremental
	var back translator.Cache
	vhosts := 0
	run := func(what string) {
		t.Helper()
		got, err := inc.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := translate.Run(in)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: differs from a full translation:\n%s", what, cmp.Diff(want, got))
		}
		if _, _, err := back.Translate(got.Config); err != nil {
			t.Fatal(err)
		}
		vhosts = 0
		for _, rc := range got.Config.RouteConfigs {
			vhosts += len(rc.VirtualHosts)
		}
	}
	run("first run")
	if s := inc.Stats; s.RoutesDecoded != 101 || s.RoutesDecodeReused != 0 || s.RoutesKept != 101 {
		t.Errorf("first run: %+v, want 101 Routes decoded and kept", s)
	}
	translatetest.ChangeOneHTTPRoute(&in, 42)
	run("one HTTPRoute changed")
	s := inc.Stats
	// The Gateway's object is read from the decode cache; the 99 HTTPRoutes that did not
	// change are replayed, unread.
	if s.RoutesDecoded != 1 || s.RoutesDecodeReused != 1 || s.RoutesKept != 101 || s.RoutesReplayed != 99 || s.RoutesTranslated != 1 {
		t.Errorf("one HTTPRoute changed: %+v, want 1 Route decoded and translated, 99 replayed", s)
	}
	if s.ElementsChanged != 2 || s.VirtualHostsChanged != 2 || s.VirtualHostsReused != vhosts-2 {
		t.Errorf("one HTTPRoute changed: %+v, want 2 route configurations and 2 virtual hosts new", s)
	}
	if back.Built != 2 {
		t.Errorf("the back end built %d resources, want the 2 route configurations", back.Built)
	}
	run("nothing changed")
	if s := inc.Stats; s.RoutesTranslated != 0 || s.RoutesDecoded != 0 || s.ElementsChanged != 0 || s.VirtualHostsChanged != 0 || back.Built != 0 {
		t.Errorf("nothing changed: %+v, back end built %d; want nothing new", s, back.Built)
	}
	in.Routes = slices.Clone(in.Routes[:51])
	run("50 HTTPRoutes gone")
	if s := inc.Stats; s.RoutesKept != 51 {
		t.Errorf("50 HTTPRoutes gone: %d decoded objects kept, want 51", s.RoutesKept)
	}
	in.Routes = nil
	run("every Route gone")
	if s := inc.Stats; s.RoutesKept != 0 {
		t.Errorf("every Route gone: %d decoded objects kept, want 0", s.RoutesKept)
	}
}

// FuzzIncrementalGatewayAPI checks that translate.Incremental gives what translate.Run gives
// on any sequence of two fuzzed Gateway API tenants and a mix of their Routes (the second
// run reuses what the first decoded and built for the Routes they share), and that its back
// end's Cache builds what Translate builds.
func FuzzIncrementalGatewayAPI(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte("gateways, listeners, routes, hostnames, filters and backends all at once, twice"))
	f.Add([]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240, 239, 238})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &bytesource{b: data}
		a := s.gatewayInput()
		b := s.gatewayInput()
		mixed := a
		mixed.Routes = nil
		for i := range max(len(a.Routes), len(b.Routes)) {
			switch s.intn(3) {
			case 0:
				if i < len(a.Routes) {
					mixed.Routes = append(mixed.Routes, a.Routes[i])
				}
			case 1:
				if i < len(b.Routes) {
					mixed.Routes = append(mixed.Routes, b.Routes[i])
				}
			}
		}
		var inc translate.Incremental
		var back translator.Cache
		for step, in := range []translate.Input{a, mixed, b, mixed, a} {
			in.Routes = stampByContent(t, in.Routes)
			in.RouteServices = stampByContent(t, in.RouteServices)
			in.Secrets = stampByContent(t, in.Secrets)
			got, gotErr := inc.Run(in)
			want, wantErr := translate.Run(in)
			if (gotErr != nil) != (wantErr != nil) {
				t.Fatalf("step %d: errors %v and %v", step, gotErr, wantErr)
			}
			if gotErr != nil {
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d: incremental and full translations differ (-full +incremental):\n%s", step, cmp.Diff(want, got))
			}
			if inc.Stats.RoutesKept > len(in.Routes) {
				t.Fatalf("step %d: %d decoded objects kept for %d Routes", step, inc.Stats.RoutesKept, len(in.Routes))
			}
			gotRes, gotProblems, gotErr := back.Translate(got.Config)
			wantRes, wantProblems, wantErr := translator.Translate(want.Config)
			if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(gotProblems, wantProblems) {
				t.Fatalf("step %d: back end: %v, %v and %v, %v", step, gotErr, gotProblems, wantErr, wantProblems)
			}
			for typeURL, rs := range wantRes {
				if !reflect.DeepEqual(wire(t, gotRes[typeURL]), wire(t, rs)) {
					t.Fatalf("step %d: the back end's %s differ", step, typeURL)
				}
			}
			if gotOwners, wantOwners := back.Owners(got.Config), translator.Owners(want.Config); !reflect.DeepEqual(gotOwners, wantOwners) {
				t.Fatalf("step %d: the back end's owners differ (-Owners +Cache.Owners):\n%s", step, cmp.Diff(wantOwners, gotOwners))
			}
		}
	})
}

// stampByContent gives copies of objects (Routes, Services, Secrets) a UID from their name
// and a resourceVersion from their content: the same name and content, the same version, as
// an API server would give an object not written again.
func stampByContent[T any, P interface {
	*T
	metav1.Object
}](t *testing.T, objs []T) []T {
	out := make([]T, len(objs))
	for i := range objs {
		raw, err := json.Marshal(objs[i])
		if err != nil {
			t.Fatal(err)
		}
		out[i] = objs[i]
		o := P(&out[i])
		o.SetUID(types.UID("uid-" + o.GetName()))
		o.SetResourceVersion(fmt.Sprintf("%x", sha256.Sum256(raw)))
	}
	return out
}
