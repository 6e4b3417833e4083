package trafficpolicy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// HtpasswdKey is the key of a basicAuth Secret holding the users (Envoy Gateway's).
const HtpasswdKey = ".htpasswd"

// Bounds of the users of one basic authentication: the htpasswd content a tenant's Secret may
// hold, and its users. Each user is a line of Envoy's route configuration.
const (
	MaxHtpasswdBytes = 64 * 1024
	MaxHtpasswdUsers = 256
	// maxUserName bounds a user name (bytes).
	maxUserName = 256
)

// maxHtpasswdProblems bounds the lines an error names.
const maxHtpasswdProblems = 8

// ParseHtpasswd checks htpasswd content (a Secret's .htpasswd, or ingress-nginx's auth) and
// returns it normalized for Envoy's basic_auth filter: one "user:{SHA}<base64>" line per user,
// in the order given, blank lines left out. Envoy accepts only SHA-1 hashes; a line with
// another hash (bcrypt, MD5, crypt, plain text), a user name that is empty, repeated or holds
// characters other than printable ASCII, or more than MaxHtpasswdUsers users, are refused.
// Errors name line numbers, never a line's content: it is a secret.
func ParseHtpasswd(data []byte) (string, error) {
	if len(data) > MaxHtpasswdBytes {
		return "", fmt.Errorf("the users are %d bytes, more than the %d kubelb serves", len(data), MaxHtpasswdBytes)
	}
	var out strings.Builder
	var problems []string
	bad := func(n int, format string, args ...any) {
		if len(problems) < maxHtpasswdProblems {
			problems = append(problems, fmt.Sprintf("line %d: ", n)+fmt.Sprintf(format, args...))
		} else if len(problems) == maxHtpasswdProblems {
			problems = append(problems, "…")
		}
	}
	seen := map[string]bool{}
	users := 0
	for i, line := range bytes.Split(data, []byte("\n")) {
		n := i + 1
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		user, hash, ok := strings.Cut(string(line), ":")
		switch {
		case !ok:
			bad(n, "not user:hash")
			continue
		case user == "" || len(user) > maxUserName || !printableName(user):
			bad(n, "the user name is empty, longer than %d bytes, or has characters other than printable ASCII", maxUserName)
			continue
		case seen[user]:
			bad(n, "the user is named on an earlier line too")
			continue
		}
		if f := hashFormat(hash); f != "" {
			bad(n, "the password is hashed with %s; Envoy accepts only SHA-1 ({SHA}, htpasswd -s)", f)
			continue
		}
		seen[user] = true
		users++
		if users > MaxHtpasswdUsers {
			return "", fmt.Errorf("more than %d users; kubelb serves at most %d", MaxHtpasswdUsers, MaxHtpasswdUsers)
		}
		out.WriteString(user + ":" + hash + "\n")
	}
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "; "))
	}
	if users == 0 {
		return "", errors.New("no users")
	}
	return out.String(), nil
}

// printableName tells whether a user name is printable ASCII without spaces.
func printableName(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// hashFormat is "" for a {SHA} hash Envoy accepts (base64 of 20 bytes), else the name of the
// format found, for the message.
func hashFormat(hash string) string {
	if sha, ok := strings.CutPrefix(hash, "{SHA}"); ok {
		if b, err := base64.StdEncoding.DecodeString(sha); err != nil || len(b) != 20 {
			return "{SHA} but not the base64 of a SHA-1 digest"
		}
		return ""
	}
	switch {
	case strings.HasPrefix(hash, "$2y$"), strings.HasPrefix(hash, "$2a$"), strings.HasPrefix(hash, "$2b$"):
		return "bcrypt"
	case strings.HasPrefix(hash, "$apr1$"):
		return "MD5 (apr1)"
	case strings.HasPrefix(hash, "$5$"), strings.HasPrefix(hash, "$6$"):
		return "SHA-256/512 crypt"
	case strings.HasPrefix(hash, "$"):
		return "an unknown scheme"
	}
	return "crypt or plain text"
}
