package translate

import (
	"slices"
	"strings"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// JWT authentication (a SecurityPolicy's jwt): each route under the policy requires a token
// of one of the policy's providers (ir.Route.JWT); the listeners serving the route hold the
// providers (ir.Listener.JWT), named "<policy namespace>/<policy>/<provider>" so that two
// policies never share one. Every provider's key set goes into each listener serving one of
// its routes: the policies with JWT a tenant's translation serves are bounded
// (maxJWTPolicies), the routes of the others answer 500.

// ReasonJWTUnusable: the JWT authentication of a SecurityPolicy cannot be served (the tenant
// has too many policies with jwt); its routes answer 500 until then.
const ReasonJWTUnusable = "JWTUnusable"

// maxJWTPolicies bounds the SecurityPolicies with jwt served in one tenant's translation:
// a listener then holds at most maxJWTPolicies × trafficpolicy.MaxJWTProviders providers
// (ir.MaxListenerJWTProviders) of at most 16 KiB of keys each.
const maxJWTPolicies = ir.MaxListenerJWTProviders / trafficpolicy.MaxJWTProviders

// jwtFor is the requirement of the routes of SecurityPolicy policy ("namespace/name") with
// JWT authentication j, its providers registered for the listeners (markJWT); nil when the
// tenant's policies with jwt are over maxJWTPolicies, reported on owner.
func (t *l7) jwtFor(policy string, j *trafficpolicy.JWT, owner ir.ObjectRef) *ir.JWT {
	if t.jwtPolicies == nil {
		t.jwtPolicies, t.jwtProviders = map[string]*ir.JWT{}, map[string]*ir.JWTProvider{}
	}
	if req, ok := t.jwtPolicies[policy]; ok {
		if req == nil {
			t.problems.Add(owner, ir.SeverityWarning, ReasonJWTUnusable, "SecurityPolicy %s: the tenant's routes are under more than %d SecurityPolicies with jwt; its routes answer 500 until fewer are used", truncateMessage(policy), maxJWTPolicies)
		}
		return req
	}
	if len(t.jwtPolicies) >= maxJWTPolicies {
		t.jwtPolicies[policy] = nil
		return t.jwtFor(policy, j, owner)
	}
	req := &ir.JWT{AllowMissing: j.Optional}
	for _, p := range j.Providers {
		name := policy + "/" + p.Name
		prov := &ir.JWTProvider{Name: name, Issuer: p.Issuer, Audiences: slices.Clone(p.Audiences), JWKS: p.JWKS,
			FromCookies: slices.Clone(p.FromCookies), FromParams: slices.Clone(p.FromParams)}
		for _, h := range p.FromHeaders {
			prov.FromHeaders = append(prov.FromHeaders, ir.JWTHeader{Name: h.Name, ValuePrefix: h.ValuePrefix})
		}
		for _, c := range p.ClaimToHeaders {
			prov.ClaimToHeaders = append(prov.ClaimToHeaders, ir.ClaimToHeader{Claim: c.Claim, Header: c.Header})
		}
		t.jwtProviders[name] = prov
		req.Providers = append(req.Providers, name)
	}
	slices.Sort(req.Providers)
	t.jwtPolicies[policy] = req
	return req
}

// markJWT gives every HTTP and HTTPS listener the JWT providers and requirements of the
// routes of the route configurations it serves (providers: by name), none when they have
// none.
func markJWT(cfg *ir.Config, providers map[string]*ir.JWTProvider) {
	if len(providers) == 0 {
		return
	}
	reqs := map[string][]ir.JWT{}
	for _, rc := range cfg.RouteConfigs {
		if r := rc.JWTRequirements(); len(r) > 0 {
			reqs[rc.Name] = r
		}
	}
	for _, l := range cfg.Listeners {
		served, ok := routeConfigsOf(l)
		if !ok {
			continue
		}
		var want []ir.JWT
		for _, name := range served {
			want = append(want, reqs[name]...)
		}
		if len(want) == 0 {
			l.JWT = nil
			continue
		}
		slices.SortFunc(want, func(a, b ir.JWT) int { return strings.Compare(a.Key(), b.Key()) })
		want = slices.CompactFunc(want, func(a, b ir.JWT) bool { return a.Key() == b.Key() })
		var names []string
		for _, r := range want {
			names = append(names, r.Providers...)
		}
		slices.Sort(names)
		names = slices.Compact(names)
		lj := &ir.ListenerJWT{Requirements: want}
		for _, n := range names {
			lj.Providers = append(lj.Providers, providers[n])
		}
		l.JWT = lj
	}
}
