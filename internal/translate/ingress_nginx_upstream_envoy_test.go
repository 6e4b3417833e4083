package translate_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// TestIngressNginxUpstreamThroughEnvoy: Ingresses written for ingress-nginx, served by a real
// Envoy fed over xDS, with the Service's NodePort on two nodes (127.0.0.1 and 127.0.0.2).
// upstream-vhost: the backend sees the Host the annotation names, not the client's.
// upstream-hash-by $http_x_user: each of 20 users' 5 requests (each on a new connection)
// all reach one node, and the users are spread over both; without the annotation, 20
// requests reach both nodes.
func TestIngressNginxUpstreamThroughEnvoy(t *testing.T) {
	const tenant = "tenant-nginx-upstream"
	const N = translate.NginxAnnotationPrefix
	nt := newNginxTenant(t, tenant)
	nt.secondNode()
	in := nt.in
	in.Routes = []v1alpha1.Route{
		nt.ingress("vhost", "vhost.example.com", map[string]string{N + "upstream-vhost": "internal.shop.svc:8080"}),
		nt.ingress("by-user", "user.example.com", map[string]string{N + "upstream-hash-by": "$http_x_user"}),
		nt.ingress("plain", "plain.example.com", nil),
	}
	client, _ := nt.serve(in, "ingress-nginx-upstream-proxy")
	// get sends one GET for host (with X-User user, when set) and returns the node that
	// answered and the Host the backend saw.
	get := func(host, user string) (node, seenHost string, err error) {
		req, err := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
		if err != nil {
			return "", "", err
		}
		if user != "" {
			req.Header.Set("X-User", user)
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", "", err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", "", fmt.Errorf("%s: status %d", host, resp.StatusCode)
		}
		return resp.Header.Get(testsupport.HeaderNode), resp.Header.Get(testsupport.HeaderSeenPrefix + "Host"), nil
	}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the Ingresses", func() error {
		_, _, err := get("plain.example.com", "")
		return err
	})

	for host, want := range map[string]string{"vhost.example.com": "internal.shop.svc:8080", "plain.example.com": "plain.example.com"} {
		if _, seen, err := get(host, ""); err != nil || seen != want {
			t.Errorf("%s: the backend saw Host %q (%v), want %q", host, seen, err, want)
		}
	}

	nodes := map[string]int{}
	for u := range 20 {
		user := fmt.Sprintf("user-%d", u)
		seen := map[string]int{}
		for range 5 {
			node, _, err := get("user.example.com", user)
			if err != nil {
				t.Fatal(err)
			}
			seen[node]++
		}
		if len(seen) != 1 {
			t.Errorf("upstream-hash-by $http_x_user: %s reached %v, want one node", user, seen)
		}
		for node := range seen {
			nodes[node]++
		}
	}
	t.Logf("users per node: %v", nodes)
	if len(nodes) != 2 {
		t.Errorf("upstream-hash-by $http_x_user: 20 users all on %v, want both nodes used", nodes)
	}
	plain := map[string]int{}
	for range 20 {
		node, _, err := get("plain.example.com", "user-0")
		if err != nil {
			t.Fatal(err)
		}
		plain[node]++
	}
	if len(plain) != 2 {
		t.Errorf("without upstream-hash-by, 20 requests reached %v, want both nodes", plain)
	}
}
