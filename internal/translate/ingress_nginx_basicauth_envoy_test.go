package translate_test

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestIngressNginxBasicAuthThroughEnvoy: Ingresses with ingress-nginx's auth-type basic, their
// users in the hub Secrets made from their auth-secret — shop/staff-users (auth-file: key auth,
// alice and bob) and shop/mapped-users (auth-secret-type auth-map: key erin) — are served by a
// real Envoy: without credentials, with a wrong password or another Ingress's user, 401; with
// their own users, 200; an Ingress without the annotations is served to everyone.
func TestIngressNginxBasicAuthThroughEnvoy(t *testing.T) {
	const tenant = "tenant-nginx-basic-auth"
	const N = translate.NginxAnnotationPrefix
	nt := newNginxTenant(t, tenant)
	httpPort := nt.httpPort
	erin := htpasswdSHA("erin", "pw")
	in := nt.in
	in.Routes = []v1alpha1.Route{
		nt.ingress("staff", "staff.example.com", map[string]string{N + "auth-type": "basic", N + "auth-secret": "staff-users"}),
		nt.ingress("mapped", "mapped.example.com", map[string]string{N + "auth-type": "basic", N + "auth-secret": "shop/mapped-users", N + "auth-secret-type": "auth-map"}),
		nt.ingress("open", "open.example.com", nil),
	}
	in.Secrets = []corev1.Secret{
		hubHtpasswdSecret(tenant, "staff-users", "auth", htpasswdSHA("alice", "wonderland")+"\n"+htpasswdSHA("bob", "builder")+"\n"),
		hubHtpasswdSecret(tenant, "mapped-users", "erin", erin[len("erin:"):]),
	}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	xdsenvoy.Start(t, "ingress-nginx-basic-auth-proxy", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(httpPort)
	get := func(host, user, password string) (int, error) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			return 0, err
		}
		req.Host = host
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the Ingresses", func() error {
		_, err := get("open.example.com", "", "")
		return err
	})
	refused, served := 0, 0
	for _, c := range []struct {
		host, user, password string
		want                 int
	}{
		{"staff.example.com", "", "", http.StatusUnauthorized},
		{"staff.example.com", "alice", "wrong", http.StatusUnauthorized},
		{"staff.example.com", "erin", "pw", http.StatusUnauthorized},
		{"staff.example.com", "alice", "wonderland", http.StatusOK},
		{"staff.example.com", "bob", "builder", http.StatusOK},
		{"mapped.example.com", "", "", http.StatusUnauthorized},
		{"mapped.example.com", "alice", "wonderland", http.StatusUnauthorized},
		{"mapped.example.com", "erin", "pw", http.StatusOK},
		{"open.example.com", "", "", http.StatusOK},
	} {
		for range 2 {
			got, err := get(c.host, c.user, c.password)
			switch {
			case err != nil || got != c.want:
				t.Errorf("%s as %q: %d (%v), want %d", c.host, c.user, got, err, c.want)
			case got == http.StatusUnauthorized:
				refused++
			default:
				served++
			}
		}
	}
	t.Logf("%d requests refused (401), %d served (200)", refused, served)
	if refused != 10 || served != 8 {
		t.Errorf("%d refused and %d served, want 10 and 8", refused, served)
	}
}
