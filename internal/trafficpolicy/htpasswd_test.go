package trafficpolicy

import (
	"crypto/sha1" //nolint:gosec // htpasswd's {SHA} scheme is SHA-1, the one Envoy accepts
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// shaLine is an htpasswd line of the {SHA} scheme (htpasswd -s).
func shaLine(user, password string) string {
	sum := sha1.Sum([]byte(password)) //nolint:gosec // see the import
	return user + ":{SHA}" + base64.StdEncoding.EncodeToString(sum[:])
}

// TestParseHtpasswd: {SHA} users come out one per line, blank lines and CRLF endings dropped.
func TestParseHtpasswd(t *testing.T) {
	in := shaLine("alice", "wonderland") + "\r\n\n" + shaLine("bob", "builder") + "\n"
	got, err := ParseHtpasswd([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := shaLine("alice", "wonderland") + "\n" + shaLine("bob", "builder") + "\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestParseHtpasswdRefuses: hashes Envoy cannot check, bad and repeated names and too many
// users are refused, the message naming the line and the format, never the line's content.
func TestParseHtpasswdRefuses(t *testing.T) {
	many := strings.Builder{}
	for i := range MaxHtpasswdUsers + 1 {
		many.WriteString(shaLine(fmt.Sprintf("u%d", i), "p") + "\n")
	}
	for _, tc := range []struct{ in, want string }{
		{shaLine("a", "x") + "\nbob:$2y$05$secrethashsecrethash", "line 2: the password is hashed with bcrypt; Envoy accepts only SHA-1"},
		{"carol:$apr1$salt$secrethash", "line 1: the password is hashed with MD5 (apr1)"},
		{"dave:plainsecret", "line 1: the password is hashed with crypt or plain text"},
		{"erin:{SHA}c2VjcmV0", "line 1: the password is hashed with {SHA} but not the base64 of a SHA-1 digest"},
		{"no colon secret", "line 1: not user:hash"},
		{shaLine("a", "x") + "\n" + shaLine("a", "y"), "line 2: the user is named on an earlier line too"},
		{shaLine("a b", "x"), "line 1: the user name is empty"},
		{"\n\n", "no users"},
		{many.String(), "more than 256 users"},
		{strings.Repeat("x", MaxHtpasswdBytes+1), "more than the 65536 kubelb serves"},
	} {
		_, err := ParseHtpasswd([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
			continue
		}
		for _, secret := range []string{"secret", "c2VjcmV0", "salt", "bob", "carol"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the message %q shows the line's content", err)
			}
		}
	}
}
