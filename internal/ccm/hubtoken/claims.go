package hubtoken

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Claims are what the renewer reads from a ServiceAccount token: who it is and how long it
// lives. The signature is not checked; the hub's API server does that on every request.
type Claims struct {
	// Namespace and ServiceAccount name the ServiceAccount the token belongs to.
	Namespace, ServiceAccount string
	// ServiceAccountUID is the UID of that ServiceAccount; a re-created one has another.
	ServiceAccountUID string
	// ID is the token's jti; the API server reports it as the credential ID of requests.
	ID string
	// Audiences the token was issued for.
	Audiences []string
	// IssuedAt (iat) and ExpiresAt (exp); IssuedAt is zero when the token has no iat.
	IssuedAt, ExpiresAt time.Time
}

// Lifetime is exp − iat, or zero when the token has no iat.
func (c Claims) Lifetime() time.Duration {
	if c.IssuedAt.IsZero() {
		return 0
	}
	return c.ExpiresAt.Sub(c.IssuedAt)
}

// SameServiceAccount tells whether both tokens belong to the same ServiceAccount object (not
// only the same name: a re-created ServiceAccount has another UID).
func (c Claims) SameServiceAccount(o Claims) bool {
	return c.Namespace == o.Namespace && c.ServiceAccount == o.ServiceAccount && c.ServiceAccountUID == o.ServiceAccountUID
}

// ErrNotServiceAccountToken says a token is not a JWT of a Kubernetes ServiceAccount.
var ErrNotServiceAccountToken = errors.New("not a ServiceAccount token")

// jwtClaims is the JSON payload of a ServiceAccount token from the TokenRequest API.
type jwtClaims struct {
	Subject    string      `json:"sub"`
	ID         string      `json:"jti"`
	Audience   audience    `json:"aud"`
	IssuedAt   json.Number `json:"iat"`
	Expiry     json.Number `json:"exp"`
	Kubernetes *struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// audience is the "aud" claim: a string or an array of strings (RFC 7519 section 4.1.3).
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("aud is neither a string nor a list of strings: %w", err)
	}
	*a = many
	return nil
}

// ParseToken reads the claims of a ServiceAccount token (a JWT) without verifying it. It
// fails with ErrNotServiceAccountToken for anything else: an opaque token, a JWT without the
// kubernetes.io claims (nor a system:serviceaccount subject), or one without an expiry (a
// legacy token Secret's token, which never expires and needs no renewal).
func ParseToken(raw string) (Claims, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return Claims{}, fmt.Errorf("%w: not a JWT (%d parts)", ErrNotServiceAccountToken, len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return Claims{}, fmt.Errorf("%w: payload is not base64url: %w", ErrNotServiceAccountToken, err)
	}
	var jc jwtClaims
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.UseNumber()
	if err := dec.Decode(&jc); err != nil {
		return Claims{}, fmt.Errorf("%w: payload is not JSON claims: %w", ErrNotServiceAccountToken, err)
	}
	c := Claims{ID: jc.ID, Audiences: jc.Audience}
	if jc.Kubernetes != nil {
		c.Namespace, c.ServiceAccount, c.ServiceAccountUID = jc.Kubernetes.Namespace, jc.Kubernetes.ServiceAccount.Name, jc.Kubernetes.ServiceAccount.UID
	} else if ns, name, ok := serviceAccountSubject(jc.Subject); ok {
		c.Namespace, c.ServiceAccount = ns, name
	}
	if c.Namespace == "" || c.ServiceAccount == "" {
		return Claims{}, fmt.Errorf("%w: no ServiceAccount claims (subject %q)", ErrNotServiceAccountToken, jc.Subject)
	}
	if jc.Expiry == "" {
		return Claims{}, fmt.Errorf("%w: no expiry (a legacy token, which needs no renewal)", ErrNotServiceAccountToken)
	}
	if c.ExpiresAt, err = numericDate(jc.Expiry); err != nil {
		return Claims{}, fmt.Errorf("%w: exp: %w", ErrNotServiceAccountToken, err)
	}
	if jc.IssuedAt != "" {
		if c.IssuedAt, err = numericDate(jc.IssuedAt); err != nil {
			return Claims{}, fmt.Errorf("%w: iat: %w", ErrNotServiceAccountToken, err)
		}
		if !c.ExpiresAt.After(c.IssuedAt) {
			return Claims{}, fmt.Errorf("%w: exp %s is not after iat %s", ErrNotServiceAccountToken, c.ExpiresAt, c.IssuedAt)
		}
	}
	return c, nil
}

// serviceAccountSubject splits "system:serviceaccount:<namespace>:<name>".
func serviceAccountSubject(sub string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(sub, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok && namespace != "" && name != "" && !strings.Contains(name, ":")
}

// numericDate turns a JWT NumericDate (seconds since the epoch, possibly fractional) into a
// time.
func numericDate(n json.Number) (time.Time, error) {
	f, err := n.Float64()
	if err != nil || f < 0 || f > math.MaxInt32*4 {
		return time.Time{}, fmt.Errorf("invalid NumericDate %q", n)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
}
