package translate

import (
	"slices"
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
	// ofSection is the policy of a section (a Gateway's listener, a route's rule).
	ofSection func(*v1alpha1.PolicySection) *P
	name      func(*P) (string, string)
	resolve   func(*P) (*S, error)
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

// forRoute is the policy that applies to rule (its name, "" for none) of Route r served by
// listener l (nil: none) of its Gateway (nil: none), as checked, and the Route carrying it:
// as Envoy Gateway, the rule's own (a policy targeting the rule by sectionName), else the
// route's own, else the listener's (a policy targeting the Gateway's listener by
// sectionName), else the Gateway's. A policy the hub cannot use is skipped for the next, as
// the ccm does with a policy that is Invalid.
func (c *policyChecks[P, S]) forRoute(t *l7, r *v1alpha1.Route, rule string, l *gwListener, owner ir.ObjectRef) (*S, string, *v1alpha1.Route) {
	return c.forRouteFit(t, r, rule, l, owner, nil)
}

// forRouteFit is forRoute for a route that takes only some settings (a TCPRoute: what acts on
// connections): fit gives what of a checked policy applies to it (nil: nothing, and no other
// level's does: a policy overrides the less specific ones entirely), or says why the policy
// cannot apply to it at all (then it is reported on owner and skipped for the next level, as
// one the hub cannot use); inherited tells a listener's or Gateway's policy from the route's
// own. fit nil: every policy applies as it is.
func (c *policyChecks[P, S]) forRouteFit(t *l7, r *v1alpha1.Route, rule string, l *gwListener, owner ir.ObjectRef, fit func(v *S, inherited bool) (*S, string)) (*S, string, *v1alpha1.Route) {
	type level struct {
		route     *v1alpha1.Route
		p         *P
		where     string
		inherited bool // the listener's or the Gateway's
	}
	var levels []level
	if ctx := sourceContext(r); ctx != nil {
		if sec := ctx.PolicySection(rule); rule != "" && sec != nil && c.ofSection(sec) != nil {
			levels = append(levels, level{r, c.ofSection(sec), "the route's rule " + truncate(rule) + "'s", false})
		}
		if c.of(ctx) != nil {
			levels = append(levels, level{r, c.of(ctx), "the route's own", false})
		}
	}
	if l != nil && l.gw != nil {
		if ctx := sourceContext(l.gw.route); ctx != nil {
			if name := gatewayListenerName(l); name != "" {
				if sec := ctx.PolicySection(name); sec != nil && c.ofSection(sec) != nil {
					levels = append(levels, level{l.gw.route, c.ofSection(sec), "its Gateway's listener " + truncate(name) + "'s", true})
				}
			}
			if c.of(ctx) != nil {
				levels = append(levels, level{l.gw.route, c.of(ctx), "its Gateway's", true})
			}
		}
	}
	if len(levels) > 0 {
		t.rec.taint() // a policy's check, and what its routes share, is made once per run
	}
	for _, lv := range levels {
		v, name := c.check(t, lv.p, lv.where, owner)
		if v == nil {
			continue
		}
		if fit != nil {
			use, msg := fit(v, lv.inherited)
			if msg != "" {
				t.problems.Add(owner, ir.SeverityWarning, c.reason, "%s %s (%s) does not apply here: %s; none of it applies", c.kind, truncateMessage(name), lv.where, msg)
				continue
			}
			if v = use; v == nil {
				return nil, "", nil
			}
		}
		return v, name, lv.route
	}
	return nil, "", nil
}

// policyName is the name of policy ns/name as the translation reports and names it.
func policyName(ns, name string) string { return truncate(ns) + "/" + truncate(name) }

// gatewayListenerName is the name of l when it is one of its Gateway's own listeners (a
// policy may target it by sectionName), "" for a ListenerSet's.
func gatewayListenerName(l *gwListener) string {
	if l.set != nil {
		return ""
	}
	return string(l.spec.Name)
}

// ReasonUnknownPolicySection: a Route carries policies for a section (a listener, a rule)
// its object does not have; they apply nowhere.
const ReasonUnknownPolicySection = "UnknownPolicySection"

// checkPolicySections reports the sections Route r's context carries policies for that its
// object does not have (names: its listeners' or rules'; word: "listener", "rule"). Such a
// section's policies never apply: they are looked up by the names of the object's sections.
func (t *l7) checkPolicySections(r *v1alpha1.Route, names []string, word string) {
	ctx := sourceContext(r)
	if ctx == nil {
		return
	}
	for _, s := range ctx.PolicySections {
		if !slices.Contains(names, s.Name) {
			t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonUnknownPolicySection,
				"the policies of %s %s do not apply: the object has no %s of that name", word, truncate(s.Name), word)
		}
	}
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
		res.policy = policyName(ns, name)
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
