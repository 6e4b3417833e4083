// Package translator is kubelb's back end: it turns the IR (internal/ir) of one tenant into
// Envoy resources by xDS type URL — listeners, route configurations (RDS), clusters, cluster
// load assignments (EDS) and secrets (SDS) — ready for the transport in internal/xds.
//
// Every resource is built from Envoy's protos and validated (protoc-gen-validate, including
// every typed config before it is packed). An element that fails is left out and reported as
// a problem on the objects that own it, together with whatever depends on it, so the result
// is always a consistent configuration Envoy accepts. The output is deterministic: resources
// sorted by name, Any values marshalled deterministically.
package translator

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"kubelb.dev/kubelb/internal/ir"
)

// ReasonInvalidConfig is the reason of problems for elements whose Envoy resources failed
// validation; they are left out. It means a bug in kubelb, not in the tenant's input.
const ReasonInvalidConfig = "InvalidConfig"

// Resources are Envoy resources keyed by xDS type URL, each list sorted by name.
type Resources map[string][]types.Resource

// Translate turns a Config into Envoy resources. It returns an error when the Config does not
// validate (a front end bug: nothing is built); problems name the objects whose elements
// were left out because their Envoy resources did not validate.
func Translate(cfg *ir.Config) (Resources, ir.Problems, error) {
	return translate(cfg, nil)
}

// Cache is Translate for one tenant translated again after every change: it keeps the Envoy
// resources built (and validated) for each IR element of the last Translate, by the
// element's identity, and builds only the elements it has not seen. translate.Incremental
// hands on the elements of unchanged LoadBalancers as the same pointers, so the back end's
// cost follows the change too; its output is Translate's (TestCacheMatchesTranslate).
// Elements must not be modified once given to it. A Cache is not safe for concurrent use; the
// zero value is ready.
type Cache struct {
	clusters, endpoints map[*ir.Cluster]built
	listeners           map[*ir.Listener]built
	routes              map[*ir.RouteConfig]built
	secrets             map[*ir.Secret]built
	// hosts are the virtual hosts of the route configurations built, by IR virtual host: a
	// route configuration that changed reuses those of its virtual hosts that did not.
	hosts map[*ir.VirtualHost]builtHost
	// owners: what Owners keeps (owners.go); valid: what the validation of the last Config
	// found valid (ir.Config.ValidateWith).
	owners ownersMemo
	valid  ir.ValidationMemo
	// Built and Reused count the resources built and reused by the last Translate.
	Built, Reused int
}

// built is one element's validated resource, or why it failed.
type built struct {
	m   proto.Message
	err error
}

// Translate is the package's Translate, reusing the resources of the elements it built last
// time.
func (c *Cache) Translate(cfg *ir.Config) (Resources, ir.Problems, error) {
	return translate(cfg, c)
}

// memo returns build, validated, through the previous and next maps of a Cache (nil maps: no
// cache); c counts what was built and reused.
func memo[K comparable](c *Cache, prev, next map[K]built, k K, build func() (proto.Message, error)) func() (proto.Message, error) {
	return memoValidated(c, prev, next, k, func() (proto.Message, error) {
		m, err := build()
		if err == nil {
			err = validate(m)
		}
		return m, err
	})
}

// memoValidated is memo for a build that validates what it builds (routeConfigWith).
func memoValidated[K comparable](c *Cache, prev, next map[K]built, k K, build func() (proto.Message, error)) func() (proto.Message, error) {
	return func() (proto.Message, error) {
		if b, ok := prev[k]; ok {
			next[k] = b
			c.Reused++
			return b.m, b.err
		}
		m, err := build()
		if next != nil {
			next[k] = built{m, err}
		}
		c.Built++
		return m, err
	}
}

func translate(cfg *ir.Config, c *Cache) (Resources, ir.Problems, error) {
	if cfg == nil {
		cfg = &ir.Config{}
	}
	var valid *ir.ValidationMemo // what the last Config's validation found valid
	if c != nil {
		valid = &c.valid
	}
	if err := cfg.ValidateWith(valid); err != nil {
		return nil, nil, fmt.Errorf("invalid IR: %w", err)
	}
	var next Cache
	if c != nil {
		next = Cache{
			clusters:  make(map[*ir.Cluster]built, len(cfg.Clusters)),
			endpoints: make(map[*ir.Cluster]built, len(cfg.Clusters)),
			listeners: make(map[*ir.Listener]built, len(cfg.Listeners)),
			routes:    make(map[*ir.RouteConfig]built, len(cfg.RouteConfigs)),
			secrets:   make(map[*ir.Secret]built, len(cfg.Secrets)),
			hosts:     make(map[*ir.VirtualHost]builtHost, len(c.hosts)),
		}
		defer func() {
			next.Built, next.Reused = c.Built, c.Reused
			next.owners, next.valid = c.owners, c.valid
			*c = next
		}()
		c.Built, c.Reused = 0, 0
	} else {
		c = &Cache{} // counts only
	}
	b := &builder{out: Resources{}, dropped: map[string]bool{}}
	for _, s := range cfg.Secrets {
		b.add(resource.SecretType, s.Name, s.Owners, memo(c, c.secrets, next.secrets, s, func() (proto.Message, error) { return secret(s) }))
	}
	for _, cl := range cfg.Clusters {
		ok := b.add(resource.ClusterType, cl.Name, cl.Owners, memo(c, c.clusters, next.clusters, cl, func() (proto.Message, error) { return cluster(cl) }))
		if ok {
			b.add(resource.EndpointType, cl.Name, cl.Owners, memo(c, c.endpoints, next.endpoints, cl, func() (proto.Message, error) { return loadAssignment(cl), nil }))
		}
	}
	for _, rc := range cfg.RouteConfigs {
		// Its owners are those of its routes, worked out only for a problem: a route
		// configuration of thousands of virtual hosts is reused whole on most rebuilds.
		owners := func() []ir.ObjectRef {
			var owners []ir.ObjectRef
			for _, vh := range rc.VirtualHosts {
				for _, r := range vh.Routes {
					owners = append(owners, r.Owners...)
				}
			}
			return ir.NormalizeRefs(owners)
		}
		b.addOwnedBy(resource.RouteType, rc.Name, owners, memoValidated(c, c.routes, next.routes, rc, func() (proto.Message, error) { return routeConfigWith(rc, c.hosts, next.hosts) }))
		if next.hosts != nil {
			// Kept for when the route configuration changes (reused whole, it built none).
			for _, vh := range rc.VirtualHosts {
				if h, ok := c.hosts[vh]; ok {
					next.hosts[vh] = h
				}
			}
		}
	}
	for _, l := range cfg.Listeners {
		if dep := b.missingDependency(l); dep != "" {
			b.problem(l.Owners, "listener %s is left out: %s was left out", l.Name, dep)
			continue
		}
		b.add(resource.ListenerType, l.Name, l.Owners, memo(c, c.listeners, next.listeners, l, func() (proto.Message, error) { return listener(l) }))
	}
	for _, rs := range b.out {
		slices.SortFunc(rs, func(a, b types.Resource) int {
			return cmp.Compare(resourceName(a), resourceName(b))
		})
	}
	return b.out, b.problems.List(), nil
}

type builder struct {
	out      Resources
	problems ir.ProblemSet
	dropped  map[string]bool // "<type URL>/<name>" of elements left out
}

// add builds and adds one resource (build validates it: memo); a failure is a problem on the
// owners.
func (b *builder) add(typeURL, name string, owners []ir.ObjectRef, build func() (proto.Message, error)) bool {
	m, err := build()
	if err != nil {
		b.drop(typeURL, name, owners, err)
		return false
	}
	b.out[typeURL] = append(b.out[typeURL], m.(types.Resource))
	return true
}

// addOwnedBy is add with the owners worked out only when there is a problem.
func (b *builder) addOwnedBy(typeURL, name string, owners func() []ir.ObjectRef, build func() (proto.Message, error)) bool {
	m, err := build()
	if err != nil {
		b.drop(typeURL, name, owners(), err)
		return false
	}
	b.out[typeURL] = append(b.out[typeURL], m.(types.Resource))
	return true
}

// drop leaves a resource out, a problem on its owners.
func (b *builder) drop(typeURL, name string, owners []ir.ObjectRef, err error) {
	b.dropped[typeURL+"/"+name] = true
	b.problem(owners, "generated Envoy %s %s is invalid and left out: %v", shortType(typeURL), name, err)
}

func (b *builder) problem(owners []ir.ObjectRef, format string, args ...any) {
	for _, o := range owners {
		b.problems.Add(o, ir.SeverityError, ReasonInvalidConfig, format, args...)
	}
}

// missingDependency names a resource the listener needs that was left out, or "".
func (b *builder) missingDependency(l *ir.Listener) string {
	if len(b.dropped) == 0 {
		return ""
	}
	type dep struct{ typeURL, name string }
	deps := []dep{{resource.ClusterType, l.Cluster}, {resource.RouteType, l.RouteConfig}}
	for _, b := range l.Backends {
		deps = append(deps, dep{resource.ClusterType, b.Cluster})
	}
	for _, t := range l.TLS {
		deps = append(deps, dep{resource.RouteType, t.RouteConfig}, dep{resource.ClusterType, t.Cluster})
		for _, s := range t.Secrets {
			deps = append(deps, dep{resource.SecretType, s})
		}
		for _, b := range t.Backends {
			deps = append(deps, dep{resource.ClusterType, b.Cluster})
		}
	}
	for _, d := range deps {
		if b.dropped[d.typeURL+"/"+d.name] {
			return shortType(d.typeURL) + " " + d.name
		}
	}
	return ""
}

// validator is implemented by every generated (protoc-gen-validate) Envoy message.
type validator interface{ Validate() error }

// validate runs protoc-gen-validate on a message. Validate does not look inside Any, so every
// typed config is validated before it is packed (see pack).
func validate(m proto.Message) error {
	v, ok := m.(validator)
	if !ok {
		return fmt.Errorf("%T cannot be validated", m)
	}
	return v.Validate()
}

// pack validates a typed config and wraps it in an Any, deterministically.
func pack(m proto.Message) (*anypb.Any, error) {
	if err := validate(m); err != nil {
		return nil, err
	}
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}

// mustPack packs typed configs that are constant or built only from validated IR values; an
// error is collected in errs.
func mustPack(errs *[]error, m proto.Message) *anypb.Any {
	a, err := pack(m)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%T: %w", m, err))
	}
	return a
}

func joined(errs []error) error { return errors.Join(errs...) }

type named interface{ GetName() string }

type namedCLA interface{ GetClusterName() string }

func resourceName(r types.Resource) string {
	switch v := r.(type) {
	case named:
		return v.GetName()
	case namedCLA:
		return v.GetClusterName()
	}
	return ""
}

func shortType(typeURL string) string {
	switch typeURL {
	case resource.ListenerType:
		return "listener"
	case resource.RouteType:
		return "route configuration"
	case resource.ClusterType:
		return "cluster"
	case resource.EndpointType:
		return "endpoints"
	case resource.SecretType:
		return "secret"
	}
	return typeURL
}

// Owners returns, for every resource the Config turns into, the objects it was made from:
// by type URL, then by resource name. A route configuration is owned by the owners of its
// routes, endpoints by the owners of their cluster. The status writer uses it to tell which
// objects an Envoy NACK concerns. The lists are read only: a resource made from one IR
// element has that element's own list when it is sorted and without repeats (the IR's
// usual case), so a tenant of thousands of clusters costs maps, not a copy of each list.
func Owners(cfg *ir.Config) map[string]map[string][]ir.ObjectRef {
	out := map[string]map[string][]ir.ObjectRef{
		resource.ListenerType: make(map[string][]ir.ObjectRef, len(cfg.Listeners)),
		resource.ClusterType:  make(map[string][]ir.ObjectRef, len(cfg.Clusters)),
		resource.EndpointType: make(map[string][]ir.ObjectRef, len(cfg.Clusters)),
	}
	// merged are the lists gathered from several elements (route configurations, repeated
	// names), sorted once at the end: a route configuration gathers the owners of its every
	// route (thousands of Ingress rules), and sorting at each step would be quadratic.
	merged := map[[2]string]bool{}
	add := func(typeURL, name string, refs []ir.ObjectRef) {
		byName := out[typeURL]
		if byName == nil {
			byName = map[string][]ir.ObjectRef{}
			out[typeURL] = byName
		}
		old, seen := byName[name]
		switch {
		case !seen && normalRefs(refs):
			byName[name] = refs // shared, never changed
		case !seen:
			byName[name] = slices.Clone(refs)
			merged[[2]string{typeURL, name}] = true
		default:
			if !merged[[2]string{typeURL, name}] {
				old = slices.Clone(old) // the element's own list is not appended to
				merged[[2]string{typeURL, name}] = true
			}
			byName[name] = append(old, refs...)
		}
	}
	for _, l := range cfg.Listeners {
		add(resource.ListenerType, l.Name, l.Owners)
	}
	for _, rc := range cfg.RouteConfigs {
		for _, vh := range rc.VirtualHosts {
			for _, r := range vh.Routes {
				add(resource.RouteType, rc.Name, r.Owners)
			}
		}
	}
	for _, c := range cfg.Clusters {
		add(resource.ClusterType, c.Name, c.Owners)
		add(resource.EndpointType, c.Name, c.Owners)
	}
	for _, s := range cfg.Secrets {
		add(resource.SecretType, s.Name, s.Owners)
	}
	for k := range merged {
		out[k[0]][k[1]] = ir.NormalizeRefs(out[k[0]][k[1]])
	}
	for typeURL, byName := range out {
		if len(byName) == 0 {
			delete(out, typeURL)
		}
	}
	return out
}

// normalRefs tells whether refs is as ir.NormalizeRefs makes it: not empty, sorted, no
// repeats.
func normalRefs(refs []ir.ObjectRef) bool {
	if len(refs) == 0 {
		return false
	}
	for i := 1; i < len(refs); i++ {
		if refs[i-1].Compare(refs[i]) >= 0 {
			return false
		}
	}
	return true
}
