package translate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// OpenID Connect login (a SecurityPolicy's oidc): the listeners serving the policy's routes
// run one Envoy oauth2 filter per login (ir.OIDC, one per policy and Route carrying it: the
// filter's provider cannot change per route). The token endpoint is reached through the
// Service of the policy's namespace the ccm embeds in the Route (as backends and extAuth's
// service are): the hub makes a cluster of it as of any backend (the tenant's nodes × its
// NodePort, the endpoint policy and budget applied), never of an address the tenant writes.
// The client secret comes from the hub Secret the ccm mirrors (key client-secret); the key
// that signs the session cookies is random, made by the manager for each login and kept only
// on the hub (Input.OIDCCookieKeys: stable across rebuilds and restarts, different for every
// login, unknown to the tenant). Both reach Envoy by SDS. The logins a tenant's translation
// serves are bounded (maxOIDCLogins); the routes of the others answer 500.

// ReasonOIDCUnusable: the OIDC login of a SecurityPolicy cannot be served (its token
// endpoint's Service is not carried or has no NodePort, its client secret has not reached the
// hub or is unusable, or the tenant has too many); its routes answer 500 until then.
const ReasonOIDCUnusable = "OIDCUnusable"

// maxOIDCLogins bounds the OIDC logins of a tenant's translation, so that a listener never
// runs more than ir.MaxListenerOIDCs oauth2 filters.
const maxOIDCLogins = ir.MaxListenerOIDCs

// oidcFor is the name of the OIDC login of the routes of SecurityPolicy policy
// ("namespace/name") carried by Route carrier, the login added for the listeners (markListeners);
// "" when it cannot be served, reported on owner.
func (t *l7) oidcFor(carrier *v1alpha1.Route, policy string, o *trafficpolicy.OIDC, owner ir.ObjectRef) string {
	name := carrier.Name + "/" + policy
	login, again, msg := t.oidcs.get(name,
		func() (*ir.OIDC, string) { return t.makeOIDC(carrier, name, policy, o, owner) },
		func() string {
			return fmt.Sprintf("SecurityPolicy %s: the tenant's routes are under more than %d OIDC logins (SecurityPolicies with oidc, counted per object they apply to); its routes answer 500 until fewer are used", truncateMessage(policy), maxOIDCLogins)
		},
		func(why string) string {
			return fmt.Sprintf("SecurityPolicy %s: its oidc cannot be used: %s; its routes answer 500 until then", truncateMessage(policy), why)
		})
	if login == nil {
		t.problems.Add(owner, ir.SeverityWarning, ReasonOIDCUnusable, "%s", msg)
		return ""
	}
	if again { // its secrets are also owner's
		for _, s := range []string{login.ClientSecret, login.HMACSecret} {
			t.secrets[s].Owners = append(t.secrets[s].Owners, owner)
		}
	}
	return name
}

// makeOIDC makes login name (its cluster, its secrets); nil and why it cannot.
func (t *l7) makeOIDC(carrier *v1alpha1.Route, name, policy string, o *trafficpolicy.OIDC, owner ir.ObjectRef) (*ir.OIDC, string) {
	ns, _, _ := strings.Cut(policy, "/")
	if reason, msg := checkObjectName("Secret", ns, o.ClientSecret); reason != "" {
		return nil, msg
	}
	found := t.secretByOrigin()[nsName{ns, o.ClientSecret}]
	if found == nil {
		return nil, fmt.Sprintf("Secret %s/%s has not reached the hub (the ccm mirrors it once it exists in the tenant cluster)", truncate(ns), truncate(o.ClientSecret))
	}
	clientSecret, err := trafficpolicy.CheckOIDCClientSecret(found.Data)
	if err != nil {
		return nil, fmt.Sprintf("Secret %s/%s: %s", truncate(ns), truncate(o.ClientSecret), err)
	}
	b, _, why := t.backend(carrier, owner, ns, o.Service, o.Port, false, "")
	if why != "" {
		return nil, "the Service of its token endpoint: " + why
	}
	authorization, token := o.AuthorizationEndpoint, o.TokenEndpoint
	if o.Discover { // the endpoints the manager read from the issuer's discovery document
		found, ok := t.in.OIDCProviders[o.Issuer]
		switch {
		case !ok:
			return nil, "the discovery document of its issuer " + truncate(o.Issuer) + " has not been read by the hub yet"
		case found.Error != "":
			return nil, "the hub could not read the discovery document of its issuer " + truncate(o.Issuer) + ": " + truncateMessage(found.Error)
		}
		if err := trafficpolicy.CheckOIDCDiscovered(found.AuthorizationEndpoint, found.TokenEndpoint); err != nil {
			return nil, "the discovery document of its issuer " + truncate(o.Issuer) + " gives endpoints kubelb cannot use: " + truncateMessage(err.Error())
		}
		authorization, token = found.AuthorizationEndpoint, found.TokenEndpoint
	}
	// The cookies' key: the manager's, made for this login and kept only on the hub.
	cookieKey := t.in.OIDCCookieKeys[OIDCCookieKeyName(name)]
	if len(cookieKey) != OIDCCookieKeySize {
		return nil, "the key that signs its session cookies has not been made by the hub yet (the manager makes one per login, at most " + strconv.Itoa(MaxOIDCCookieKeys) + " per tenant)"
	}
	sum := sha256.Sum256([]byte(name))
	login := &ir.OIDC{
		Name: name, Cluster: b.cluster, TokenEndpoint: token, AuthorizationEndpoint: authorization,
		ClientID: o.ClientID, ClientSecret: "oidc/" + name + "/client", HMACSecret: "oidc/" + name + "/hmac",
		Scopes: slices.Clone(o.Scopes), Resources: slices.Clone(o.Resources),
		RedirectURL: o.RedirectURL, RedirectPath: o.RedirectPath, LogoutPath: o.LogoutPath,
		ForwardAccessToken: o.ForwardAccessToken, RefreshToken: o.RefreshToken, CookieDomain: o.CookieDomain,
		CookieSuffix: hex.EncodeToString(sum[:4]), AccessTokenCookie: o.AccessTokenCookie, IDTokenCookie: o.IDTokenCookie,
		SameSite: o.SameSite, DefaultTokenTTL: ir.Duration(o.DefaultTokenTTL), DefaultRefreshTokenTTL: ir.Duration(o.DefaultRefreshTokenTTL),
		CSRFTokenTTL: ir.Duration(o.CSRFTokenTTL), DisableTokenEncryption: o.DisableTokenEncryption,
	}
	for _, m := range o.DenyRedirect {
		typ := m.Type
		if typ == trafficpolicy.MatchRegex {
			typ = ir.MatchRegex
		}
		login.DenyRedirect = append(login.DenyRedirect, ir.HeaderMatch{Name: m.Name, Type: typ, Value: m.Value})
	}
	for _, h := range o.PassThrough {
		login.PassThrough = append(login.PassThrough, ir.JWTHeader{Name: h.Name, ValuePrefix: h.ValuePrefix})
	}
	for secret, value := range map[string][]byte{login.ClientSecret: []byte(clientSecret), login.HMACSecret: slices.Clone(cookieKey)} {
		s := &ir.Secret{Name: secret, Owners: []ir.ObjectRef{owner}, Generic: value}
		t.secrets[secret] = s
		t.cfg.Secrets = append(t.cfg.Secrets, s)
	}
	return login, ""
}

// OIDCCookieKeySize is the size in bytes of the key that signs an OIDC login's session cookies
// (HMAC-SHA256: a key of the hash's size).
const OIDCCookieKeySize = sha256.Size

// MaxOIDCCookieKeys bounds the cookie keys the hub keeps for one tenant: twice the logins a
// translation serves, so that the logins served always have theirs while others come and go.
const MaxOIDCCookieKeys = 2 * maxOIDCLogins

// OIDCCookieKeyName is the name of login's cookie key in Input.OIDCCookieKeys (and in the
// Secret the manager keeps them in): a hash of the login's name, a valid Secret data key.
func OIDCCookieKeyName(login string) string {
	sum := sha256.Sum256([]byte("kubelb oidc cookie key\x00" + login))
	return hex.EncodeToString(sum[:16])
}

// OIDCLogins are the OIDC logins routes carry, named as the translation names them: one per
// SecurityPolicy with oidc and Route carrying it (as its own, a rule's, a Gateway's or a
// listener's policy), in the order of routes, each once. The translation serves some of them
// (those its routes use, at most maxOIDCLogins); the manager makes a cookie key for each.
func OIDCLogins(routes []v1alpha1.Route) []string {
	var out []string
	seen := map[string]bool{}
	add := func(r *v1alpha1.Route, s *v1alpha1.Security) {
		if s == nil || s.OIDC == nil {
			return
		}
		name := r.Name + "/" + policyName(s.Namespace, s.Name)
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for i := range routes {
		ctx := sourceContext(&routes[i])
		if ctx == nil {
			continue
		}
		add(&routes[i], ctx.Security)
		for j := range ctx.PolicySections {
			add(&routes[i], ctx.PolicySections[j].Security)
		}
	}
	return out
}

// maxOIDCIssuers bounds the discovery documents the manager reads for one tenant: the issuers
// of twice the logins a translation serves.
const maxOIDCIssuers = 2 * maxOIDCLogins

// OIDCIssuers are the issuers whose discovery documents the logins the input's Routes carry
// need (those that give neither endpoint), sorted, each once, at most maxOIDCIssuers: the
// manager reads them (Input.OIDCProviders).
func OIDCIssuers(in *Input) []string {
	var out []string
	add := func(s *v1alpha1.Security) {
		if s == nil || s.OIDC == nil {
			return
		}
		p := s.OIDC.Provider
		if (p.AuthorizationEndpoint == nil || *p.AuthorizationEndpoint == "") && (p.TokenEndpoint == nil || *p.TokenEndpoint == "") &&
			trafficpolicy.CheckOIDCIssuer(p.Issuer) == nil {
			out = append(out, p.Issuer)
		}
	}
	for i := range in.Routes {
		ctx := sourceContext(&in.Routes[i])
		if ctx == nil {
			continue
		}
		add(ctx.Security)
		for j := range ctx.PolicySections {
			add(ctx.PolicySections[j].Security)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > maxOIDCIssuers {
		out = out[:maxOIDCIssuers]
	}
	return out
}
