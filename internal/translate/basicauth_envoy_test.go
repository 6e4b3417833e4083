package translate_test

import (
	"crypto/sha1" //nolint:gosec // htpasswd's {SHA} scheme is SHA-1, the one Envoy accepts
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// htpasswdSHA is an htpasswd line of the {SHA} scheme (htpasswd -s).
func htpasswdSHA(user, password string) string {
	sum := sha1.Sum([]byte(password)) //nolint:gosec // see the import
	return user + ":{SHA}" + base64.StdEncoding.EncodeToString(sum[:])
}

// hubHtpasswdSecret is the hub Secret made from tenant Secret shop/name (its SyncSecret's),
// with data key → value.
func hubHtpasswdSecret(tenant, name, key, value string) corev1.Secret {
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hub-" + name, Namespace: tenant, Labels: map[string]string{
			v1alpha1.LabelOriginNamespace: "shop", v1alpha1.LabelOriginName: name}},
		Data: map[string][]byte{key: []byte(value)},
	}
}

// basicAuthStatus sends GET / with the given Basic credentials (none when user is "") on a
// new connection and returns the status and the WWW-Authenticate header.
func basicAuthStatus(t *testing.T, addr, user, password string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// TestBasicAuthThroughEnvoy: an HTTPRoute's SecurityPolicy with basicAuth, whose users are in
// the hub Secret made from the tenant's Secret shop/htpasswd (key .htpasswd), makes a real
// Envoy answer 401 with a Basic challenge to requests without credentials, with a wrong
// password or an unknown user, and serve (200) those with alice's or bob's.
func TestBasicAuthThroughEnvoy(t *testing.T) {
	tenant := "tenant-basic-auth"
	users := htpasswdSHA("alice", "wonderland") + "\n" + htpasswdSHA("bob", "builder") + "\n"
	addr := throughEnvoyWithSecurity(t, tenant, nil,
		&v1alpha1.Security{Namespace: "shop", Name: "route", BasicAuth: &v1alpha1.SecurityBasicAuth{
			Users: v1alpha1.SecurityBasicAuthUsers{Name: "htpasswd"}}},
		hubHtpasswdSecret(tenant, "htpasswd", ".htpasswd", users))
	refused, served := 0, 0
	for _, c := range []struct {
		user, password string
		want           int
	}{
		{"", "", http.StatusUnauthorized},
		{"alice", "wrong", http.StatusUnauthorized},
		{"mallory", "wonderland", http.StatusUnauthorized},
		{"alice", "wonderland", http.StatusOK},
		{"bob", "builder", http.StatusOK},
	} {
		for range 3 {
			got, challenge := basicAuthStatus(t, addr, c.user, c.password)
			switch {
			case got != c.want:
				t.Errorf("user %q password %q: %d, want %d", c.user, c.password, got, c.want)
			case got == http.StatusUnauthorized:
				refused++
				if challenge == "" {
					t.Errorf("user %q: 401 without WWW-Authenticate", c.user)
				}
			default:
				served++
			}
		}
	}
	t.Logf("%d requests refused (401), %d served (200)", refused, served)
	if refused != 9 || served != 6 {
		t.Errorf("%d refused and %d served, want 9 and 6", refused, served)
	}
}
