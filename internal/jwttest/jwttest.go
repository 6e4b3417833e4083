// Package jwttest makes JSON Web Tokens for tests: an RSA key, its public JSON Web Key Set,
// and tokens it signs (RS256), with the standard library only.
package jwttest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"
)

// Key is an RSA signing key and its key ID.
type Key struct {
	ID  string
	key *rsa.PrivateKey
}

// NewKey generates a 2048-bit RSA key.
func NewKey(t testing.TB, id string) *Key {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{ID: id, key: k}
}

var b64 = base64.RawURLEncoding

// JWK is the public key as a JSON Web Key.
func (k *Key) JWK() map[string]any {
	return map[string]any{
		"kty": "RSA", "kid": k.ID, "alg": "RS256", "use": "sig",
		"n": b64.EncodeToString(k.key.N.Bytes()),
		"e": b64.EncodeToString(big.NewInt(int64(k.key.E)).Bytes()),
	}
}

// JWKS is a JSON Web Key Set of the public keys given.
func JWKS(keys ...*Key) string {
	set := struct {
		Keys []map[string]any `json:"keys"`
	}{}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.JWK())
	}
	b, _ := json.Marshal(set)
	return string(b)
}

// Sign makes a token of the claims signed with RS256.
func (k *Key) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": k.ID})
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signed := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(fmt.Errorf("signing: %w", err))
	}
	return signed + "." + b64.EncodeToString(sig)
}
