package translate

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// ReasonHostnameNotResolved: an endpoint hostname has no resolved addresses in the input
// (the manager could not resolve it, or has not yet); it is left out.
const ReasonHostnameNotResolved = "HostnameNotResolved"

// Resolved is what the manager's resolver found for one endpoint hostname. Translation never
// resolves a name itself: a hostname endpoint becomes one endpoint per resolved address, each
// checked by the endpoint policy, so Envoy is never given a tenant-supplied name.
type Resolved struct {
	// Addrs are the addresses the name resolved to.
	Addrs []netip.Addr `json:"addrs,omitempty"`
	// Error says why the name has no addresses (not found, timed out, over a limit), in
	// words the tenant may read: never the hub's resolver addresses.
	Error string `json:"error,omitempty"`
	// Detail is the resolver's own error, for the manager's log only (ir.Problem.Detail).
	Detail string `json:"detail,omitempty"`
}

// EndpointHostnames lists the hostname endpoints of the input (in Addresses objects and in
// the inline addresses of LoadBalancers and Routes) and the hosts of the key servers its
// Routes' SecurityPolicies fetch from at their URL (keyServerHosts), normalized as translation keys
// Input.Resolved (lower case, no trailing dot), sorted and unique. Invalid names are left
// out: translation reports them as InvalidAddress.
func EndpointHostnames(in *Input) []string {
	var names []string
	add := func(addrs []v1alpha1.EndpointAddress) {
		for _, a := range addrs {
			if a.IP != "" || a.Hostname == "" {
				continue
			}
			if ep, ip, ok := parseAddress(a); ok && !ip.IsValid() {
				names = append(names, ep.Address)
			}
		}
	}
	for _, a := range in.Addresses {
		add(a.Spec.Addresses)
	}
	for i := range in.LoadBalancers {
		for _, g := range in.LoadBalancers[i].Spec.Endpoints {
			add(g.Addresses)
		}
	}
	for i := range in.Routes {
		for _, g := range in.Routes[i].Spec.Endpoints {
			add(g.Addresses)
		}
		names = append(names, keyServerHosts(&in.Routes[i])...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// keyServerHosts are the hosts of the key servers the SecurityPolicies Route r carries fetch
// from at their URL (jwt remoteJWKS without backendRefs): the manager resolves them as it
// does endpoint hostnames, and the translation makes clusters of their addresses the endpoint
// policy allows (keyServerCluster).
func keyServerHosts(r *v1alpha1.Route) []string {
	ctx := sourceContext(r)
	if ctx == nil {
		return nil
	}
	var out []string
	add := func(s *v1alpha1.Security) {
		if s == nil || s.JWT == nil {
			return
		}
		for _, p := range s.JWT.Providers {
			if p.RemoteJWKS == nil || len(p.RemoteJWKS.BackendRefs) > 0 {
				continue
			}
			if h := trafficpolicy.KeyServerHost(p.RemoteJWKS.URI); h != "" {
				out = append(out, h)
			}
		}
	}
	add(ctx.Security)
	for i := range ctx.PolicySections {
		add(ctx.PolicySections[i].Security)
	}
	return out
}

// DeniedByPolicy is how a problem a tenant reads says that the endpoint policy refused an
// address: it never names the rule, since the hub's own ranges (Service and Pod CIDRs, node
// addresses) and what the hub's DNS answered are not the tenant's to know. The manager's log
// has the detail (ir.Problem.Detail).
const DeniedByPolicy = "denied by the hub's endpoint policy"

// endpointIPs turns one parsed endpoint address (parseAddress: ip is invalid for a hostname)
// into the IPs that may be used: the IP itself unless the policy denies it, or for a hostname
// each address it resolved to (Input.Resolved) that the policy allows. Every left-out address
// is reported through problem: the message names only what the tenant wrote; the detail
// (for the manager's log) names the rule and the resolved addresses.
func endpointIPs(in *Input, pol *policy, ep ir.Endpoint, ip netip.Addr, problem func(reason, detail, format string, args ...any)) []string {
	if ip.IsValid() {
		if d := pol.denied(ip); d != nil {
			problem(ReasonEndpointDenied, fmt.Sprintf("%s is denied by %s (%s)", ep.Address, d.Prefix, d.Source),
				"endpoint address %s is %s; left out", ep.Address, DeniedByPolicy)
			return nil
		}
		return []string{ep.Address}
	}
	r, ok := in.Resolved[ep.Address]
	if !ok || len(r.Addrs) == 0 {
		why := "it has not been resolved yet"
		if r.Error != "" {
			why = "resolving it failed: " + truncate(r.Error)
		}
		problem(ReasonHostnameNotResolved, r.Detail, "endpoint hostname %s has no address (%s); left out", truncate(ep.Address), why)
		return nil
	}
	out := make([]string, 0, len(r.Addrs))
	var denied, unusable []string
	for _, a := range r.Addrs {
		a = a.Unmap()
		if !a.IsValid() || a.Zone() != "" || a.IsUnspecified() {
			unusable = append(unusable, a.String())
			continue
		}
		if d := pol.denied(a); d != nil {
			denied = append(denied, fmt.Sprintf("%s is denied by %s (%s)", a, d.Prefix, d.Source))
			continue
		}
		out = append(out, a.String())
	}
	if len(unusable) > 0 {
		problem(ReasonInvalidAddress, fmt.Sprintf("%s resolves to %s", ep.Address, strings.Join(unusable, ", ")),
			"endpoint hostname %s resolves to addresses that are not usable; they are left out", truncate(ep.Address))
	}
	if len(denied) > 0 {
		problem(ReasonEndpointDenied, fmt.Sprintf("%s resolves to: %s", ep.Address, strings.Join(denied, "; ")),
			"endpoint hostname %s resolves to addresses %s; they are left out", truncate(ep.Address), DeniedByPolicy)
	}
	return out
}
