package translate_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// TestAPIKeyAuthThroughEnvoy: an HTTPRoute's SecurityPolicy with apiKeyAuth, whose keys are in
// the hub Secrets made from the tenant's Secrets shop/team-a (clients alice and bob) and
// shop/team-b (carol), read from header x-api-key or query parameter api_key, makes a real
// Envoy answer 401 to requests without a key, with an unknown key or with a key in another
// header, and serve (200) each client's key from either place; the backend sees the client's
// ID in X-Client-ID and never the key (sanitize), nor a client's own X-Client-ID.
func TestAPIKeyAuthThroughEnvoy(t *testing.T) {
	const tenant = "tenant-api-keys"
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Saw-Client", r.Header.Get("X-Client-ID"))
			w.Header().Set("X-Saw-Key", r.Header.Get("X-Api-Key")+r.URL.Query().Get("api_key"))
		})
	})
	in, httpPort := trafficInput(t, tenant, nodePort, nil)
	in.Routes[1].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{Security: &v1alpha1.Security{Namespace: "shop", Name: "keys",
		APIKeyAuth: &v1alpha1.SecurityAPIKeyAuth{
			CredentialRefs:        []v1alpha1.SecurityBasicAuthUsers{{Name: "team-a"}, {Name: "team-b"}},
			ExtractFrom:           []v1alpha1.SecurityAPIKeyExtractFrom{{Headers: []string{"X-API-Key"}}, {Params: []string{"api_key"}}},
			ForwardClientIDHeader: "X-Client-ID",
			Sanitize:              ptr.To(true),
		}}}
	hub := func(name string, keys map[string]string) corev1.Secret {
		s := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hub-" + name, Namespace: tenant, Labels: map[string]string{
			v1alpha1.LabelOriginNamespace: "shop", v1alpha1.LabelOriginName: name}}, Data: map[string][]byte{}}
		for client, key := range keys {
			s.Data[client] = []byte(key)
		}
		return s
	}
	in.Secrets = append(in.Secrets,
		hub("team-a", map[string]string{"alice": "key-of-alice-0123", "bob": "key-of-bob-4567"}),
		hub("team-b", map[string]string{"carol": "key-of-carol-89ab"}))
	addr := serveThroughEnvoy(t, tenant, in, httpPort)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	refused, served := 0, 0
	for _, c := range []struct {
		name, header, param, otherHeader, wantClient string
		want                                         int
	}{
		{name: "no key", want: http.StatusUnauthorized},
		{name: "unknown key", header: "key-of-mallory", want: http.StatusUnauthorized},
		{name: "a key in another header", otherHeader: "key-of-alice-0123", want: http.StatusUnauthorized},
		{name: "a key's prefix", header: "key-of-alice", want: http.StatusUnauthorized},
		{name: "alice by header", header: "key-of-alice-0123", want: http.StatusOK, wantClient: "alice"},
		{name: "bob by parameter", param: "key-of-bob-4567", want: http.StatusOK, wantClient: "bob"},
		{name: "carol of the second Secret", header: "key-of-carol-89ab", want: http.StatusOK, wantClient: "carol"},
	} {
		for range 2 {
			u := "http://" + addr + "/"
			if c.param != "" {
				u += "?api_key=" + url.QueryEscape(c.param)
			}
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			if c.header != "" {
				req.Header.Set("X-API-Key", c.header)
			}
			if c.otherHeader != "" {
				req.Header.Set("Authorization", "Bearer "+c.otherHeader)
			}
			req.Header.Set("X-Client-ID", "forged")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			resp.Body.Close()
			switch {
			case resp.StatusCode != c.want:
				t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
			case resp.StatusCode == http.StatusUnauthorized:
				refused++
			default:
				served++
				if got := resp.Header.Get("X-Saw-Client"); got != c.wantClient {
					t.Errorf("%s: the backend saw X-Client-ID %q, want %q", c.name, got, c.wantClient)
				}
				if got := resp.Header.Get("X-Saw-Key"); got != "" {
					t.Errorf("%s: the backend saw the key %q, want it removed (sanitize)", c.name, got)
				}
			}
		}
	}
	t.Logf("%d requests refused (401), %d served (200)", refused, served)
	if refused != 8 || served != 6 {
		t.Errorf("%d refused and %d served, want 8 and 6", refused, served)
	}
}
