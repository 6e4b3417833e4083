package translate_test

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// mirrorCopy is a request the mirror Service got.
type mirrorCopy struct{ host, method, uri, body string }

// copyBackend is the mirror Service's endpoint: it records every request it gets.
type copyBackend struct {
	mu     sync.Mutex
	copies []mirrorCopy
}

func (b *copyBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	b.mu.Lock()
	b.copies = append(b.copies, mirrorCopy{host: r.Host, method: r.Method, uri: r.RequestURI, body: string(body)})
	b.mu.Unlock()
	w.WriteHeader(http.StatusTeapot) // never seen by the client
}

func (b *copyBackend) got() []mirrorCopy {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.copies)
}

// TestIngressNginxMirrorThroughEnvoy: mirror-target through a real Envoy. The Service copy of
// the Ingresses' namespace has its NodePort on the node; its endpoint records what it gets.
// Every request to an Ingress with mirror-target http://copy.shop:8080/$request_uri and
// mirror-host copy.example.com is answered by the Ingress's backend (200), and copy gets a
// copy of each (10: 5 GETs with their paths and queries, 5 POSTs with their bodies) with the
// Host copy.example.com; an Ingress whose mirror-target is http://copy:8080$request_uri gets
// its copies with the Host copy (the URL's), of the path its backend gets after rewrite-target;
// an Ingress without mirror-target sends none (copy gets exactly the 12 above).
func TestIngressNginxMirrorThroughEnvoy(t *testing.T) {
	const tenant = "tenant-nginx-mirror"
	const N = translate.NginxAnnotationPrefix
	nt := newNginxTenant(t, tenant)
	copies := &copyBackend{}
	copySvc := nt.otherService("copy", 8080, copies)
	withCopy := func(r v1alpha1.Route) v1alpha1.Route {
		r.Spec.Source.Kubernetes.Services = append(r.Spec.Source.Kubernetes.Services, copySvc)
		return r
	}
	in := nt.in
	in.Routes = []v1alpha1.Route{
		withCopy(nt.ingress("mirrored", "mirrored.example.com", map[string]string{
			N + "mirror-target": "http://copy.shop:8080/$request_uri", N + "mirror-host": "copy.example.com"})),
		withCopy(nt.ingress("rewritten", "rewritten.example.com", map[string]string{
			N + "mirror-target": "http://copy:8080$request_uri", N + "rewrite-target": "/v2"})),
		withCopy(nt.ingress("plain", "plain.example.com", nil)),
	}
	client, _ := nt.serve(in, "ingress-nginx-mirror-proxy")
	// send sends one request and returns the path the Ingress's backend got.
	send := func(method, host, uri, body string) (string, error) {
		req, err := http.NewRequest(method, "http://"+host+uri, strings.NewReader(body))
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get(testsupport.HeaderNode) != "node-1" {
			return "", fmt.Errorf("%s %s%s: status %d from %q, want 200 from the backend", method, host, uri, resp.StatusCode, resp.Header.Get(testsupport.HeaderNode))
		}
		return strings.TrimPrefix(string(answer), "node-1 web "), nil
	}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the Ingresses", func() error {
		_, err := send(http.MethodGet, "plain.example.com", "/", "")
		return err
	})
	for i := range 3 {
		if _, err := send(http.MethodGet, "plain.example.com", fmt.Sprintf("/plain/%d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	want := map[mirrorCopy]int{}
	for i := range 5 {
		uri := fmt.Sprintf("/m/%d?q=%d", i, i)
		if _, err := send(http.MethodGet, "mirrored.example.com", uri, ""); err != nil {
			t.Fatal(err)
		}
		want[mirrorCopy{host: "copy.example.com", method: http.MethodGet, uri: uri}]++
		body := fmt.Sprintf("order-%d", i)
		if _, err := send(http.MethodPost, "mirrored.example.com", "/orders", body); err != nil {
			t.Fatal(err)
		}
		want[mirrorCopy{host: "copy.example.com", method: http.MethodPost, uri: "/orders", body: body}]++
	}
	for i := range 2 {
		path, err := send(http.MethodGet, "rewritten.example.com", fmt.Sprintf("/r/%d", i), "")
		if err != nil {
			t.Fatal(err)
		}
		if path != "/v2" {
			t.Errorf("rewrite-target /v2: the backend got %q", path)
		}
		want[mirrorCopy{host: "copy", method: http.MethodGet, uri: "/v2"}]++
	}
	testsupport.Eventually(t, 10*time.Second, "the mirror to get 12 copies", func() error {
		if n := len(copies.got()); n < 12 {
			return fmt.Errorf("%d copies", n)
		}
		return nil
	})
	got := map[mirrorCopy]int{}
	for _, c := range copies.got() {
		got[c]++
	}
	if !maps.Equal(got, want) {
		t.Errorf("the mirror got %v, want %v", got, want)
	}
}
