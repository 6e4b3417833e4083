package translate_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// TestIngressNginxLoadBalanceThroughEnvoy: load-balance through a real Envoy (one worker),
// with the Service's NodePort on two nodes (127.0.0.1 and 127.0.0.2). On each Ingress one
// request is held by the node that gets it (GET /delay/…, answered only when the test ends),
// so that node is busy; then 200 requests, one after the other:
//   - round_robin: Envoy takes the endpoints in turn, busy or not: the busy node gets 100
//     (90 to 110 asserted);
//   - ewma, which kubelb serves as least request: Envoy draws two endpoints and takes the one
//     with fewer requests in flight, so the busy node gets only the requests for which both
//     draws fall on it (a quarter on average, 50); fewer than 80 asserted (a chance of about
//     one in a million to fail when it is right), while round robin would give 100.
func TestIngressNginxLoadBalanceThroughEnvoy(t *testing.T) {
	const tenant = "tenant-nginx-lb"
	const N = translate.NginxAnnotationPrefix
	const requests = 200
	nt := newNginxTenant(t, tenant)
	web2 := nt.secondNode()
	in := nt.in
	in.Routes = []v1alpha1.Route{
		nt.ingress("rr", "rr.example.com", map[string]string{N + "load-balance": "round_robin"}),
		nt.ingress("ewma", "ewma.example.com", map[string]string{N + "load-balance": "ewma"}),
	}
	client, tr := nt.serve(in, "ingress-nginx-lb-proxy")
	get := func(host string) (string, error) {
		resp, err := client.Get("http://" + host + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: status %d", host, resp.StatusCode)
		}
		return resp.Header.Get(testsupport.HeaderNode), nil
	}
	for _, host := range []string{"rr.example.com", "ewma.example.com"} {
		testsupport.Eventually(t, 30*time.Second, "Envoy to serve "+host, func() error { _, err := get(host); return err })
	}

	// busy holds one request for host on a node and returns that node; the request ends
	// with the test.
	ctx, cancel := context.WithCancel(context.Background())
	var held sync.WaitGroup
	defer func() { cancel(); held.Wait() }()
	busy := func(host string) string {
		before := map[string]int64{"node-1": nt.web.Requests(), "node-2": web2.Requests()}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+testsupport.DelayPath+"100s", nil)
		if err != nil {
			t.Fatal(err)
		}
		held.Add(1)
		go func() {
			defer held.Done()
			hold := &http.Client{Transport: tr} // no client timeout: ended by cancel
			if resp, err := hold.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		var node string
		testsupport.Eventually(t, 10*time.Second, "a node to hold the request for "+host, func() error {
			switch {
			case nt.web.Requests() > before["node-1"]:
				node = "node-1"
			case web2.Requests() > before["node-2"]:
				node = "node-2"
			default:
				return fmt.Errorf("no node got it yet")
			}
			return nil
		})
		return node
	}
	count := func(host, busyNode string) int {
		n := 0
		for range requests {
			node, err := get(host)
			if err != nil {
				t.Fatal(err)
			}
			if node == busyNode {
				n++
			}
		}
		return n
	}

	rrBusy := busy("rr.example.com")
	rr := count("rr.example.com", rrBusy)
	ewmaBusy := busy("ewma.example.com")
	ewma := count("ewma.example.com", ewmaBusy)
	t.Logf("of %d requests, the node holding a request got %d under round_robin and %d under ewma (least request)", requests, rr, ewma)
	if rr < 90 || rr > 110 {
		t.Errorf("load-balance round_robin: the busy node got %d of %d requests, want its turn (100)", rr, requests)
	}
	if ewma >= 80 {
		t.Errorf("load-balance ewma: the busy node got %d of %d requests, want fewer than 80 (least request sends most to the idle node)", ewma, requests)
	}
}
