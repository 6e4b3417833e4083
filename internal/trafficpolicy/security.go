package trafficpolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/sourcerange"
)

// servedSecurity is the tree of the SecurityPolicy spec fields kubelb serves: authorization
// by client address, basic authentication (not its forwardUsernameHeader: Envoy sets
// that header per filter, not per route) and JWT authentication with keys given inline or
// fetched through a Service of the policy's namespace (jwt.go), API keys (apikey.go), external authorization (extauth.go) and OpenID Connect
// login (oidc.go).
var servedSecurity = map[string]any{
	"targetRef":  nil,
	"targetRefs": nil,
	// targetSelectors: read by Selectors.
	"targetSelectors": nil,
	"authorization": map[string]any{
		"defaultAction": nil,
		"rules":         nil, // each rule's fields: securityRuleFields
	},
	"basicAuth": map[string]any{
		"users": map[string]any{"group": nil, "kind": nil, "name": nil, "namespace": nil},
	},
	"jwt":        servedJWT,
	"apiKeyAuth": servedAPIKeyAuth,
	"extAuth":    servedExtAuth,
	"oidc":       servedOIDC,
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
	un = append(un, jwtUnsupported(spec)...)
	un = append(un, extAuthUnsupported(spec)...)
	un = append(un, oidcUnsupported(spec)...)
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

// SecuritySettings is a checked SecurityPolicy: its authorization, its basic authentication
// and its JWT authentication, at least one of them.
type SecuritySettings struct {
	// Authorization is nil when the policy has none.
	Authorization *Authorization
	// BasicAuthSecret is the name of the Secret of the policy's namespace holding the users
	// of its basic authentication ("" when it has none). Its content is checked by
	// ParseHtpasswd where it is read.
	BasicAuthSecret string
	// JWT is nil when the policy has none.
	JWT *JWT
	// APIKeyAuth is nil when the policy has none. The keys of its Secrets are checked by
	// ParseAPIKeys where they are read.
	APIKeyAuth *APIKeyAuth
	// ExtAuth is nil when the policy has none.
	ExtAuth *ExtAuth
	// OIDC is nil when the policy has none.
	OIDC *OIDC
}

// ResolveSecurity checks a Security (from a tenant's policy, or from a Route) and returns its
// settings, or every problem found.
func ResolveSecurity(sec *v1alpha1.Security) (*SecuritySettings, error) {
	if sec.Authorization == nil && sec.BasicAuth == nil && sec.JWT == nil && sec.APIKeyAuth == nil && sec.ExtAuth == nil && sec.OIDC == nil {
		return nil, errors.New("the policy has no authorization, basicAuth, jwt, apiKeyAuth, extAuth or oidc, the parts of a SecurityPolicy kubelb serves")
	}
	out := &SecuritySettings{}
	var errs []error
	if sec.Authorization != nil {
		a, err := resolveAuthorization(sec.Authorization)
		if err != nil {
			errs = append(errs, err)
		}
		out.Authorization = a
	}
	if b := sec.BasicAuth; b != nil {
		name, err := basicAuthSecret(sec.Namespace, b.Users)
		if err != nil {
			errs = append(errs, err)
		}
		out.BasicAuthSecret = name
	}
	if sec.JWT != nil {
		j, err := resolveJWT(sec.Namespace, sec.JWT)
		if err != nil {
			errs = append(errs, err)
		}
		out.JWT = j
	}
	if sec.APIKeyAuth != nil {
		a, err := resolveAPIKeyAuth(sec.Namespace, sec.APIKeyAuth)
		if err != nil {
			errs = append(errs, err)
		}
		out.APIKeyAuth = a
	}
	if sec.ExtAuth != nil {
		e, err := resolveExtAuth(sec.Namespace, sec.ExtAuth)
		if err != nil {
			errs = append(errs, err)
		}
		out.ExtAuth = e
	}
	if sec.OIDC != nil {
		o, err := resolveOIDC(sec.Namespace, sec.OIDC)
		if err != nil {
			errs = append(errs, err)
		}
		out.OIDC = o
	}
	if out.OIDC != nil && (sec.JWT == nil || out.JWT != nil) {
		if err := oidcPassThrough(out.OIDC, out.JWT); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// secretRef checks a reference to a Secret of the policy's namespace ns (field names it in
// messages) and returns the Secret's name.
func secretRef(field, ns string, u v1alpha1.SecurityBasicAuthUsers) (string, error) {
	switch {
	case u.Group != nil && *u.Group != "" && *u.Group != "core":
		return "", fmt.Errorf("%s group %q: a core Secret is needed", field, truncate(*u.Group))
	case u.Kind != nil && *u.Kind != "Secret":
		return "", fmt.Errorf("%s kind %q: a Secret is needed", field, truncate(*u.Kind))
	case u.Namespace != nil && *u.Namespace != "" && *u.Namespace != ns:
		return "", fmt.Errorf("%s namespace %q: a Secret of another namespace is not yet supported by kubelb; use one of the policy's namespace", field, truncate(*u.Namespace))
	case len(validation.IsDNS1123Subdomain(u.Name)) > 0:
		return "", fmt.Errorf("%s name %q is not a Secret name", field, truncate(u.Name))
	}
	return u.Name, nil
}

// basicAuthSecret checks basicAuth.users, a reference to a Secret of the policy's namespace
// ns, and returns its name.
func basicAuthSecret(ns string, u v1alpha1.SecurityBasicAuthUsers) (string, error) {
	return secretRef("basicAuth.users", ns, u)
}

// resolveAuthorization checks an authorization.
func resolveAuthorization(a *v1alpha1.SecurityAuthorization) (*Authorization, error) {
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
