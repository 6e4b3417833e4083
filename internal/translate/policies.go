package translate

import (
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// Envoy Gateway's policies carried in Route contexts (BackendTrafficPolicy, SecurityPolicy):
// what the kinds share in the translation. A route's own policy overrides its Gateway's
// (GEP-713); a policy the hub cannot use is reported on the object and applies not at all.

// policyChecks checks the carried policies of one kind once per translation: P is the carried
// type (v1alpha1.BackendTraffic), S what its check gives (trafficpolicy.Settings).
type policyChecks[P any, S any] struct {
	kind, reason string
	of           func(*v1alpha1.SourceContext) *P
	name         func(*P) (string, string)
	resolve      func(*P) (*S, error)
	// bound checks what resolve gave against the platform team's bounds
	// (Options.TrafficPolicies): an error wrapping trafficpolicy.ErrOverBound.
	bound   func(*trafficpolicy.Bounds, *S) error
	results map[*P]policyResult[S]
}

// ReasonOverPlatformBound: the BackendTrafficPolicy or SecurityPolicy a Route carries asks
// more than the platform team allows the tenant (Config/Tenant spec.trafficPolicies); none of
// it applies (the route is served as if it had none, or under its Gateway's).
const ReasonOverPlatformBound = trafficpolicy.ReasonOverPlatformBound

// policyResult is a checked policy: its name ("namespace/name", bounded) and what its check
// gave, or why it cannot be used.
type policyResult[S any] struct {
	policy string
	value  *S
	err    string
	// overBound: the policy is over the platform team's bounds (err says which).
	overBound bool
}

// forRoute is the policy that applies to Route r's rules served by Gateway gw (nil: none), as
// checked: the route's own when the hub can use it (then, as the ccm does with a route's own
// policy that is Invalid, its Gateway's).
func (c *policyChecks[P, S]) forRoute(t *l7, r *v1alpha1.Route, gw *gateway, owner ir.ObjectRef) (*S, string) {
	if ctx := sourceContext(r); ctx != nil && c.of(ctx) != nil {
		if v, name := c.check(t, c.of(ctx), "the route's own", owner); v != nil {
			return v, name
		}
	}
	if gw != nil {
		if ctx := sourceContext(gw.route); ctx != nil && c.of(ctx) != nil {
			return c.check(t, c.of(ctx), "its Gateway's", owner)
		}
	}
	return nil, ""
}

// check checks a carried policy once per translation; nil when it cannot be used, reported on
// owner (where: whose policy it is) the first time.
func (c *policyChecks[P, S]) check(t *l7, p *P, where string, owner ir.ObjectRef) (*S, string) {
	if c.results == nil {
		c.results = map[*P]policyResult[S]{}
	}
	ns, name := c.name(p)
	res, ok := c.results[p]
	if !ok {
		res.policy = truncate(ns) + "/" + truncate(name)
		if reason, msg := checkObjectName(c.kind, ns, name); reason != "" {
			res.err = msg
		} else if v, err := c.resolve(p); err != nil {
			res.err = truncateMessage(strings.ReplaceAll(err.Error(), "\n", "; "))
		} else if err := c.bound(t.opts.TrafficPolicies, v); err != nil {
			// Within what kubelb serves, over what the platform team allows.
			res.overBound = true
			res.err = truncateMessage(strings.ReplaceAll(strings.TrimPrefix(err.Error(), trafficpolicy.ErrOverBound.Error()+": "), "\n", "; "))
		} else {
			res.value = v
		}
		c.results[p] = res
		switch {
		case res.overBound:
			t.problems.Add(owner, ir.SeverityWarning, ReasonOverPlatformBound, "%s %s (%s) is over the platform team's bounds: %s; none of it applies", c.kind, res.policy, where, res.err)
		case res.err != "":
			t.problems.Add(owner, ir.SeverityWarning, c.reason, "%s %s (%s) cannot be used: %s; none of it applies", c.kind, res.policy, where, res.err)
		}
	}
	return res.value, ns + "/" + name
}
