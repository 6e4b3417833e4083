package translate

import (
	"fmt"
	"slices"
	"strings"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// ReasonAPIKeyAuthUnusable: the API keys of a SecurityPolicy's apiKeyAuth cannot be used: a
// Secret has not reached the hub, holds a client or key Envoy cannot use, or two clients share
// a key. The routes answer 500 until it is fixed: never served without the keys asked for.
const ReasonAPIKeyAuthUnusable = "APIKeyAuthUnusable"

// apiKeyAuth is the API-key authentication of SecurityPolicy policy ("namespace/name") with
// checked settings a, its keys read from the hub Secrets made from the policy's Secrets;
// nil when they cannot be used, reported on owner. The messages name Secrets and clients,
// never keys.
func (t *l7) apiKeyAuth(owner ir.ObjectRef, policy string, a *trafficpolicy.APIKeyAuth) *ir.APIKeyAuth {
	// Once per policy and translation: every rule and listener of its routes asks.
	if made, ok := t.apiKeyIR[a]; ok {
		if made.err != "" {
			t.problems.Add(owner, ir.SeverityWarning, ReasonAPIKeyAuthUnusable, "%s", made.err)
		}
		return made.auth
	}
	if t.apiKeyIR == nil {
		t.apiKeyIR = map[*trafficpolicy.APIKeyAuth]apiKeyResult{}
	}
	auth, msg := t.readAPIKeys(policy, a)
	t.apiKeyIR[a] = apiKeyResult{auth, msg}
	if msg != "" {
		t.problems.Add(owner, ir.SeverityWarning, ReasonAPIKeyAuthUnusable, "%s", msg)
	}
	return auth
}

// apiKeyResult is a policy's API-key authentication, or why it cannot be used.
type apiKeyResult struct {
	auth *ir.APIKeyAuth
	err  string
}

// readAPIKeys reads the keys of a policy's apiKeyAuth from the hub Secrets: the IR, or the
// message saying why they cannot be used.
func (t *l7) readAPIKeys(policy string, a *trafficpolicy.APIKeyAuth) (*ir.APIKeyAuth, string) {
	ns, _, _ := strings.Cut(policy, "/")
	out := &ir.APIKeyAuth{ForwardClientIDHeader: a.ForwardClientIDHeader, Sanitize: a.Sanitize}
	for _, s := range a.Sources {
		out.Sources = append(out.Sources, ir.APIKeySource{Header: s.Header, Param: s.Param, Cookie: s.Cookie})
	}
	unusable := func(format string, args ...any) (*ir.APIKeyAuth, string) {
		return nil, fmt.Sprintf("SecurityPolicy %s: its API keys cannot be used: "+format+"; its routes answer 500 until then",
			append([]any{truncateMessage(policy)}, args...)...)
	}
	owners := map[string]string{} // key → client
	for _, name := range a.Secrets {
		secret := truncate(ns) + "/" + truncate(name)
		if reason, msg := checkObjectName("Secret", ns, name); reason != "" {
			return unusable("%s", msg)
		}
		found := t.secretByOrigin()[nsName{ns, name}]
		if found == nil {
			return unusable("Secret %s has not reached the hub (the ccm mirrors it once it exists in the tenant cluster)", secret)
		}
		keys, err := trafficpolicy.ParseAPIKeys(found.Data)
		if err != nil {
			return unusable("Secret %s: %s", secret, truncateMessage(strings.ReplaceAll(err.Error(), "\n", "; ")))
		}
		for _, k := range keys {
			if other, ok := owners[k.Key]; ok {
				return unusable("clients %s and %s have the same key", truncate(other), truncate(k.Client))
			}
			if slices.ContainsFunc(out.Credentials, func(c ir.APIKeyCredential) bool { return c.Client == k.Client }) {
				return unusable("client %s is in more than one Secret", truncate(k.Client))
			}
			owners[k.Key] = k.Client
			out.Credentials = append(out.Credentials, ir.APIKeyCredential{Client: k.Client, Key: k.Key})
		}
	}
	if len(out.Credentials) > trafficpolicy.MaxAPIKeyClients {
		return unusable("%d clients, at most %d", len(out.Credentials), trafficpolicy.MaxAPIKeyClients)
	}
	slices.SortFunc(out.Credentials, func(a, b ir.APIKeyCredential) int { return strings.Compare(a.Client, b.Client) })
	return out, ""
}
