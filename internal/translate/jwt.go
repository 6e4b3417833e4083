package translate

import (
	"fmt"
	"slices"
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// JWT authentication (a SecurityPolicy's jwt): each route under the policy requires a token
// of one of the policy's providers (ir.Route.JWT); the listeners serving the route hold the
// providers (ir.Listener.JWT), named "<policy namespace>/<policy>/<provider>" so that two
// policies never share one. Every provider's key set goes into each listener serving one of
// its routes: the policies with JWT a tenant's translation serves are bounded
// (maxJWTPolicies), the routes of the others answer 500.
//
// A provider whose keys are fetched (remoteJWKS) reaches its key server through the Service
// of the policy's namespace the ccm embeds in the Route carrying the policy (as backends,
// extAuth's and oidc's Services are): the hub makes a cluster of it as of any backend (the
// tenant's nodes × its NodePort, the endpoint policy and budget applied); or, without
// backendRefs, at its https URL: the addresses the manager resolved its host to, each allowed
// by the endpoint policy (keyServerCluster), never a name Envoy resolves. Such a policy's
// providers are made per Route carrying it, named
// "<Route>/<policy namespace>/<policy>/<provider>", and counted per Route; the key servers of
// a tenant's translation are bounded (maxRemoteJWKS).

// ReasonJWTUnusable: the JWT authentication of a SecurityPolicy cannot be served (the tenant
// has too many policies with jwt or key servers, or a key server's Service is not carried or
// has no NodePort); its routes answer 500 until then.
const ReasonJWTUnusable = "JWTUnusable"

// maxJWTPolicies bounds the SecurityPolicies with jwt served in one tenant's translation:
// a listener then holds at most maxJWTPolicies × trafficpolicy.MaxJWTProviders providers
// (ir.MaxListenerJWTProviders) of at most 16 KiB of keys each.
const maxJWTPolicies = ir.MaxListenerJWTProviders / trafficpolicy.MaxJWTProviders

// maxRemoteJWKS bounds the key servers (remoteJWKS providers, counted per Route carrying
// their policy) of one tenant's translation: each is a cluster every Envoy of the tenant
// fetches from.
const maxRemoteJWKS = 16

// jwtFor is the requirement of the routes of SecurityPolicy policy ("namespace/name") with
// JWT authentication j carried by Route carrier, its providers registered for the listeners
// (markJWT); nil when it cannot be served (the tenant's policies with jwt over maxJWTPolicies,
// its key servers over maxRemoteJWKS, a key server's Service unusable), reported on owner.
func (t *l7) jwtFor(carrier *v1alpha1.Route, policy string, j *trafficpolicy.JWT, owner ir.ObjectRef) *ir.JWT {
	name := policy
	remote := 0
	for _, p := range j.Providers {
		if p.Remote != nil {
			remote++
		}
	}
	if remote > 0 { // its key servers' clusters are the carrier's
		name = carrier.Name + "/" + policy
	}
	req, _, msg := t.jwts.get(name,
		func() (*ir.JWT, string) {
			if remote > 0 && t.remoteJWKS+remote > maxRemoteJWKS {
				return nil, fmt.Sprintf("the tenant's routes are under more than %d key sets fetched from key servers (remoteJWKS providers, counted per object their policy applies to); its routes answer 500 until fewer are used", maxRemoteJWKS)
			}
			ns, _, _ := strings.Cut(policy, "/")
			req := &ir.JWT{AllowMissing: j.Optional}
			provs := make([]*ir.JWTProvider, 0, len(j.Providers))
			for _, p := range j.Providers {
				prov := &ir.JWTProvider{Name: name + "/" + p.Name, Issuer: p.Issuer, Audiences: slices.Clone(p.Audiences), JWKS: p.JWKS,
					FromCookies: slices.Clone(p.FromCookies), FromParams: slices.Clone(p.FromParams)}
				if r := p.Remote; r != nil && r.Service == "" {
					cluster, why := t.keyServerCluster(owner, prov.Name, r)
					if why != "" {
						return nil, fmt.Sprintf("provider %s's key server %s cannot be reached: %s; its routes answer 500 until then", truncate(p.Name), truncate(r.Host), why)
					}
					prov.Remote = &ir.RemoteJWKS{Cluster: cluster, URI: r.URI, CacheDuration: ir.Duration(r.CacheDuration), FailedRefetch: ir.Duration(r.FailedRefetch)}
				} else if r != nil {
					b, _, why := t.backend(carrier, owner, ns, r.Service, r.Port, false, "")
					if why != "" {
						return nil, fmt.Sprintf("the Service of provider %s's key server cannot be used: %s; its routes answer 500 until then", truncate(p.Name), why)
					}
					prov.Remote = &ir.RemoteJWKS{Cluster: b.cluster, URI: r.URI, CacheDuration: ir.Duration(r.CacheDuration), FailedRefetch: ir.Duration(r.FailedRefetch)}
				}
				for _, h := range p.FromHeaders {
					prov.FromHeaders = append(prov.FromHeaders, ir.JWTHeader{Name: h.Name, ValuePrefix: h.ValuePrefix})
				}
				for _, c := range p.ClaimToHeaders {
					prov.ClaimToHeaders = append(prov.ClaimToHeaders, ir.ClaimToHeader{Claim: c.Claim, Header: c.Header})
				}
				provs = append(provs, prov)
				req.Providers = append(req.Providers, prov.Name)
			}
			for _, prov := range provs {
				t.jwtProviders[prov.Name] = prov
			}
			t.remoteJWKS += remote
			slices.Sort(req.Providers)
			return req, ""
		},
		func() string {
			return fmt.Sprintf("the tenant's routes are under more than %d SecurityPolicies with jwt; its routes answer 500 until fewer are used", maxJWTPolicies)
		},
		func(why string) string { return why })
	if req == nil {
		t.problems.Add(owner, ir.SeverityWarning, ReasonJWTUnusable, "SecurityPolicy %s: %s", truncateMessage(policy), msg)
	}
	return req
}

// keyServerCluster makes the cluster of provider's key server reached at its https URL
// (remoteJWKS without backendRefs): the addresses the manager resolved the URL's host to
// (Input.Resolved; translation never resolves a name) that the endpoint policy allows, at the
// URL's port, within the tenant's endpoint limits, over TLS with the host as SNI, the server's
// certificate verified against the host name by Envoy's system CA bundle (or
// Options.KeyServerCAs). The left-out addresses are reported on owner (EndpointDenied,
// HostnameNotResolved); "" and why when none is left.
func (t *l7) keyServerCluster(owner ir.ObjectRef, provider string, r *trafficpolicy.RemoteJWKS) (string, string) {
	name := "jwks/" + provider
	if c, ok := t.clusterIndex()[name]; ok {
		c.Owners = append(c.Owners, owner)
		return name, ""
	}
	e := t.expander.expand([]v1alpha1.EndpointAddress{{Hostname: r.Host}}, "the key server "+truncate(r.Host))
	e.report(&t.problems, owner)
	var eps clusterEndpoints
	eps.add(e, uint32(r.HostPort))
	list, quota := t.expander.take(&eps, t.opts)
	if quota != "" {
		t.problems.AddMessage(owner, ir.SeverityWarning, ReasonQuotaExceeded, quota)
	}
	if len(list) == 0 {
		if len(e.ips) > 0 {
			return "", "the tenant's endpoint limits leave it no address"
		}
		return "", "it has no address the hub may reach (the hub resolves the name itself and reaches only the addresses its endpoint policy allows)"
	}
	upTLS := &ir.UpstreamTLS{SNI: r.Host, SubjectAltNames: []ir.SubjectAltName{{Type: ir.SANDNS, Value: r.Host}}}
	if t.opts.KeyServerCAs != "" {
		upTLS.CACertificates = t.opts.KeyServerCAs
	} else {
		upTLS.SystemCA = true
	}
	c := &ir.Cluster{
		Name: name, StatName: strings.ReplaceAll("jwks/"+r.Host, ".", "_"), Protocol: ir.UpstreamHTTP1,
		Owners: []ir.ObjectRef{owner}, Endpoints: list, ConnectTimeout: ir.Duration(t.opts.ConnectTimeout),
		MaxConnections: t.opts.MaxConnectionsPerCluster, TLS: upTLS,
	}
	t.clusters[name] = c
	t.cfg.Clusters = append(t.cfg.Clusters, c)
	return name, ""
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
