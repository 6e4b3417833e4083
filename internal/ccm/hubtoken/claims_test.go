package hubtoken

import (
	"encoding/base64"
	"errors"
	"slices"
	"testing"
	"time"
)

// jwt builds an unsigned JWT with the given JSON payload (the renewer does not verify).
func jwt(payload string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"RS256","kid":"x"}`)) + "." + enc.EncodeToString([]byte(payload)) + ".c2lnbmF0dXJl"
}

func TestParseToken(t *testing.T) {
	t.Parallel()
	// The claims of a real TokenRequest token (kube-apiserver 1.36).
	real := `{"aud":["https://kubernetes.default.svc.cluster.local"],"exp":1767312000,"iat":1767225600,` +
		`"iss":"https://kubernetes.default.svc.cluster.local","jti":"0b6c","kubernetes.io":{"namespace":"tenant-shop",` +
		`"serviceaccount":{"name":"kubelb-ccm","uid":"6c7a1f5e-1111-2222-3333-444455556666"}},"nbf":1767225600,` +
		`"sub":"system:serviceaccount:tenant-shop:kubelb-ccm"}`
	c, err := ParseToken(jwt(real))
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "tenant-shop" || c.ServiceAccount != "kubelb-ccm" || c.ServiceAccountUID != "6c7a1f5e-1111-2222-3333-444455556666" || c.ID != "0b6c" ||
		!slices.Equal(c.Audiences, []string{"https://kubernetes.default.svc.cluster.local"}) ||
		!c.IssuedAt.Equal(time.Unix(1767225600, 0)) || !c.ExpiresAt.Equal(time.Unix(1767312000, 0)) || c.Lifetime() != 24*time.Hour {
		t.Errorf("claims %+v", c)
	}

	for name, tc := range map[string]struct {
		payload string
		check   func(Claims) bool
	}{
		"aud as a string": {`{"aud":"api","exp":2000,"iat":1000,"sub":"system:serviceaccount:a:b"}`,
			func(c Claims) bool { return slices.Equal(c.Audiences, []string{"api"}) }},
		"subject only (no kubernetes.io claim)": {`{"exp":2000,"iat":1000,"sub":"system:serviceaccount:tenant-a:kubelb-ccm"}`,
			func(c Claims) bool {
				return c.Namespace == "tenant-a" && c.ServiceAccount == "kubelb-ccm" && c.ServiceAccountUID == ""
			}},
		"fractional NumericDate": {`{"exp":2000.5,"iat":1000,"sub":"system:serviceaccount:a:b"}`,
			func(c Claims) bool { return c.ExpiresAt.Equal(time.Unix(2000, 5e8)) }},
		"no iat": {`{"exp":2000,"sub":"system:serviceaccount:a:b"}`,
			func(c Claims) bool { return c.IssuedAt.IsZero() && c.Lifetime() == 0 }},
	} {
		c, err := ParseToken(jwt(tc.payload))
		if err != nil || !tc.check(c) {
			t.Errorf("%s: %+v, %v", name, c, err)
		}
	}
}

func TestParseTokenRejects(t *testing.T) {
	t.Parallel()
	for name, raw := range map[string]string{
		"opaque token":                 "abcdef.0123456789abcdef",
		"three parts, not base64":      "a.!!!.c",
		"not JSON":                     jwt(`not json`),
		"no expiry (legacy Secret)":    jwt(`{"iss":"kubernetes/serviceaccount","kubernetes.io/serviceaccount/namespace":"a","sub":"system:serviceaccount:a:b"}`),
		"a user, not a ServiceAccount": jwt(`{"exp":2000,"iat":1000,"sub":"alice"}`),
		"malformed subject":            jwt(`{"exp":2000,"iat":1000,"sub":"system:serviceaccount:a"}`),
		"exp before iat":               jwt(`{"exp":1000,"iat":2000,"sub":"system:serviceaccount:a:b"}`),
		"exp not a number":             jwt(`{"exp":"soon","sub":"system:serviceaccount:a:b"}`),
		"aud of numbers":               jwt(`{"aud":[1],"exp":2000,"sub":"system:serviceaccount:a:b"}`),
	} {
		if _, err := ParseToken(raw); !errors.Is(err, ErrNotServiceAccountToken) {
			t.Errorf("%s: err %v, want ErrNotServiceAccountToken", name, err)
		}
	}
}

func TestSameServiceAccount(t *testing.T) {
	t.Parallel()
	a := Claims{Namespace: "tenant-a", ServiceAccount: "kubelb-ccm", ServiceAccountUID: "1"}
	b := a
	b.ExpiresAt = time.Unix(5, 0)
	if !a.SameServiceAccount(b) {
		t.Error("same ServiceAccount, other token: want same")
	}
	b.ServiceAccountUID = "2"
	if a.SameServiceAccount(b) {
		t.Error("re-created ServiceAccount (other UID): want different")
	}
}
