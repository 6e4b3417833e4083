package translate_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// compressible is the body the compression test's backend answers: 4 KiB of text.
var compressible = strings.Repeat("kubelb compresses what the backend sends. ", 100)

// TestCompressionThroughEnvoy: an HTTPRoute whose BackendTrafficPolicy lists Brotli and Gzip
// has its responses compressed by a real Envoy with the encoding the client prefers — gzip
// (which unpacks to the backend's body), br, the client's higher quality value winning, Brotli
// on a tie — and sent as they are to a client that accepts neither. The backend never sees
// the client's Accept-Encoding (it answers uncompressed). Another HTTPRoute of the same
// listener without a policy is never compressed, even for a client that accepts gzip.
func TestCompressionThroughEnvoy(t *testing.T) {
	const tenant = "tenant-compression"
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-Backend-Saw-Accept-Encoding", r.Header.Get("Accept-Encoding"))
			_, _ = io.WriteString(w, compressible)
		})
	})
	in, httpPort := trafficInput(t, tenant, nodePort, &v1alpha1.BackendTraffic{Namespace: "shop", Name: "compress",
		Compression: []v1alpha1.TrafficCompression{{Type: "Brotli"}, {Type: "Gzip"}}})
	// HTTPRoute plain (host plain.example.com): the same backend, no policy.
	plain := *in.Routes[1].DeepCopy()
	plain.Name = "00000000-0000-0000-0000-0000000000a3"
	plain.CreationTimestamp.Time = plain.CreationTimestamp.Add(time.Minute)
	plain.Spec.Source.Kubernetes.Context = nil
	obj := plain.Spec.Source.Kubernetes.Route.Object
	obj["metadata"].(map[string]any)["name"] = "plain"
	obj["spec"].(map[string]any)["hostnames"] = []any{"plain.example.com"}
	in.Routes = append(in.Routes, plain)
	addr := serveThroughEnvoy(t, tenant, in, httpPort)

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true, DisableKeepAlives: true}}
	get := func(host, acceptEncoding string) (encoding string, body []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.Host = host
		if acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", acceptEncoding)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s with Accept-Encoding %q: %v", host, acceptEncoding, err)
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s with Accept-Encoding %q: status %d, %v", host, acceptEncoding, resp.StatusCode, err)
		}
		if saw := resp.Header.Get("X-Backend-Saw-Accept-Encoding"); saw != "" && host == "web.example.com" {
			t.Errorf("Accept-Encoding %q: the backend saw Accept-Encoding %q, want none (Envoy compresses)", acceptEncoding, saw)
		}
		return resp.Header.Get("Content-Encoding"), body
	}
	for _, c := range []struct {
		host, accept, want string
	}{
		{"web.example.com", "gzip", "gzip"},
		{"web.example.com", "br", "br"},
		{"web.example.com", "gzip;q=1.0, br;q=0.5", "gzip"},
		{"web.example.com", "br, gzip", "br"},
		{"web.example.com", "", ""},
		{"web.example.com", "identity", ""},
		{"plain.example.com", "gzip", ""},
		{"plain.example.com", "br, gzip", ""},
	} {
		encoding, body := get(c.host, c.accept)
		t.Logf("%s, Accept-Encoding %q: Content-Encoding %q, %d bytes (the backend sent %d)", c.host, c.accept, encoding, len(body), len(compressible))
		if encoding != c.want {
			t.Errorf("%s, Accept-Encoding %q: Content-Encoding %q, want %q", c.host, c.accept, encoding, c.want)
			continue
		}
		switch encoding {
		case "":
			if string(body) != compressible {
				t.Errorf("%s, Accept-Encoding %q: the body is not the backend's (%d bytes)", c.host, c.accept, len(body))
			}
		case "gzip":
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("gzip: %v", err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil || string(plain) != compressible {
				t.Errorf("%s: the gzip body unpacks to %d bytes (%v), not the backend's", c.host, len(plain), err)
			}
			fallthrough
		default:
			if len(body) >= len(compressible)/4 {
				t.Errorf("%s, %s: %d bytes for %d of repeated text: not compressed", c.host, encoding, len(body), len(compressible))
			}
		}
	}
}
