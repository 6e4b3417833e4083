package trafficpolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/sourcerange"
)

// servedSecurity is the tree of the SecurityPolicy spec fields kubelb serves: authorization
// by client address.
var servedSecurity = map[string]any{
	"targetRef":  nil,
	"targetRefs": nil,
	"authorization": map[string]any{
		"defaultAction": nil,
		"rules":         nil, // each rule's fields: securityRuleFields
	},
}

// securityRuleFields are the fields of an authorization rule kubelb serves.
var securityRuleFields = map[string]any{"name": nil, "action": nil, "principal": map[string]any{"clientCIDRs": nil}}

// Authorization actions.
const (
	Allow = "Allow"
	Deny  = "Deny"
)

// MaxClientCIDRs bounds the client address ranges of one policy (all its rules), as a
// LoadBalancer's source ranges are bounded.
const MaxClientCIDRs = sourcerange.Max

// ReadSecurity reads a SecurityPolicy's spec into kubelb's subset: what Route contexts carry.
// It fails when the spec (or one of its authorization rules) has fields kubelb does not serve,
// naming them, or when a field has the wrong type. ResolveSecurity then checks the values.
func ReadSecurity(namespace, name string, spec map[string]any) (*v1alpha1.Security, error) {
	var un []string
	if a, ok := spec["authorization"].(map[string]any); ok {
		if rules, ok := a["rules"].([]any); ok {
			for i, r := range rules {
				if m, ok := r.(map[string]any); ok {
					for _, f := range unsupported(m, securityRuleFields) {
						un = append(un, fmt.Sprintf("spec.authorization.rules[%d]%s", i, f[len("spec"):]))
					}
				}
			}
		}
	}
	if len(un) > maxUnsupported {
		un = append(un[:maxUnsupported], "…")
	}
	if len(un) > 0 {
		return nil, fmt.Errorf("%s not yet supported by kubelb", strings.Join(un, ", "))
	}
	out := &v1alpha1.Security{}
	if err := readSpec(spec, servedSecurity, out); err != nil {
		return nil, err
	}
	out.Namespace, out.Name = namespace, name
	return out, nil
}

// Authorization is a checked SecurityPolicy authorization: the first rule whose ranges hold
// the client address decides, DefaultAllow when none does.
type Authorization struct {
	DefaultAllow bool
	Rules        []AuthorizationRule
}

// AuthorizationRule is one rule: canonical CIDRs (sourcerange.Parse), sorted, unique.
type AuthorizationRule struct {
	Allow  bool
	Ranges []string
}

// ResolveSecurity checks a Security (from a tenant's policy, or from a Route) and returns its
// authorization (nil when the policy has none), or every problem found.
func ResolveSecurity(sec *v1alpha1.Security) (*Authorization, error) {
	a := sec.Authorization
	if a == nil {
		return nil, errors.New("the policy has no authorization, the only part of a SecurityPolicy kubelb serves")
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	action := func(field, v string) bool {
		switch v {
		case Allow:
			return true
		case Deny:
		default:
			bad("%s %q is not an action; use Allow or Deny", field, truncate(v))
		}
		return false
	}
	out := &Authorization{}
	if a.DefaultAction != "" { // unset: Deny, as Envoy Gateway
		out.DefaultAllow = action("authorization.defaultAction", a.DefaultAction)
	}
	total := 0
	for i, r := range a.Rules {
		field := fmt.Sprintf("authorization.rules[%d]", i)
		rule := AuthorizationRule{Allow: action(field+".action", r.Action)}
		if len(r.Principal.ClientCIDRs) == 0 {
			bad("%s.principal.clientCIDRs is empty; kubelb matches clients by address only", field)
		}
		total += len(r.Principal.ClientCIDRs)
		if total > MaxClientCIDRs {
			bad("the policy has more than %d clientCIDRs", MaxClientCIDRs)
			break
		}
		for _, c := range r.Principal.ClientCIDRs {
			p, err := sourcerange.Parse(c)
			if err != nil {
				bad("%s.principal.clientCIDRs %q is not a CIDR such as 203.0.113.0/24 or 2001:db8::/32", field, truncate(c))
			} else if !slices.Contains(rule.Ranges, p) {
				rule.Ranges = append(rule.Ranges, p)
			}
		}
		slices.Sort(rule.Ranges)
		out.Rules = append(out.Rules, rule)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
