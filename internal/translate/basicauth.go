package translate

import (
	"maps"
	"slices"
	"strings"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// ReasonBasicAuthUnusable: the users of a basic authentication (a SecurityPolicy's basicAuth,
// an Ingress's auth-secret) cannot be used: their Secret has not reached the hub, has no such
// key, or holds lines Envoy cannot check. The routes answer 500 until it is fixed: never
// served without the authentication asked for.
const ReasonBasicAuthUnusable = "BasicAuthUnusable"

// basicAuthKey is a hub Secret, by the namespace and name of its tenant Secret, and a key.
type basicAuthKey struct {
	ns, name, key string
}

// basicAuthResult is a checked key: the users, or why they cannot be used.
type basicAuthResult struct {
	users *ir.BasicAuth
	err   string
}

// basicAuth reads the users of a basic authentication from the hub Secret made from tenant
// Secret ns/name (key: the htpasswd key; "": one key per user), checked once per translation; nil when they cannot
// be used, reported on owner (what: whose authentication it is). The messages never hold the
// Secret's content.
func (t *l7) basicAuth(owner ir.ObjectRef, what, ns, name, key string) *ir.BasicAuth {
	k := basicAuthKey{ns, name, key}
	res, ok := t.basicAuths[k]
	if !ok {
		res = t.readBasicAuth(k)
		if t.basicAuths == nil {
			t.basicAuths = map[basicAuthKey]basicAuthResult{}
		}
		t.basicAuths[k] = res
	}
	if res.err != "" {
		t.problems.Add(owner, ir.SeverityWarning, ReasonBasicAuthUnusable, "%s: the users of its basic authentication cannot be used: %s; its routes answer 500 until then", what, res.err)
	}
	return res.users
}

func (t *l7) readBasicAuth(k basicAuthKey) basicAuthResult {
	secret := truncate(k.ns) + "/" + truncate(k.name)
	if reason, msg := checkObjectName("Secret", k.ns, k.name); reason != "" {
		return basicAuthResult{err: msg}
	}
	found, ok := t.secretByOrigin()[nsName{k.ns, k.name}], false
	if found == nil {
		return basicAuthResult{err: "Secret " + secret + " has not reached the hub (the ccm mirrors it once it exists in the tenant cluster)"}
	}
	var data []byte
	if k.key == "" { // one key per user, holding its hash (ingress-nginx's auth-map)
		data = authMap(found.Data)
	} else if data, ok = found.Data[k.key]; !ok {
		return basicAuthResult{err: "Secret " + secret + " has no key " + k.key}
	}
	users, err := trafficpolicy.ParseHtpasswd(data)
	if err != nil {
		where := "key " + k.key
		if k.key == "" {
			where = "(auth-map, a line per key in key order)"
		}
		return basicAuthResult{err: "Secret " + secret + " " + where + ": " + truncateMessage(strings.ReplaceAll(err.Error(), "\n", "; "))}
	}
	return basicAuthResult{users: &ir.BasicAuth{Users: users}}
}

// authMap is the htpasswd lines of a Secret of one key per user holding its hash, in key
// order.
func authMap(data map[string][]byte) []byte {
	var b strings.Builder
	for _, user := range slices.Sorted(maps.Keys(data)) {
		b.WriteString(user + ":" + strings.TrimSpace(string(data[user])) + "\n")
	}
	return []byte(b.String())
}
