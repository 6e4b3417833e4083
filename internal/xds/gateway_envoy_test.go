package xds

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// gatewayInput loads a Gateway API golden input for a real Envoy: listeners on loopback at
// free ports (returned by the Gateway listener port), endpoints on 127.0.0.1 and every backend
// Service port's NodePort chosen by nodePort (the origin Service name and port).
func gatewayInput(t *testing.T, file, tenant string, nodePort func(svc string, port int32) int32) (translate.Input, map[int32]int32) {
	t.Helper()
	in, err := translatetest.LoadInput("../translate/testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	in.Tenant = tenant
	in.Options.ListenerAddress = "127.0.0.1"
	in.Policy = loopbackAllowed
	in.Addresses = addresses("127.0.0.1")
	ports := map[int32]int32{}
	for i := range in.RouteServices {
		for j := range in.RouteServices[i].Spec.Ports {
			p := &in.RouteServices[i].Spec.Ports[j]
			free := int32(testsupport.FreePort(t))
			ports[p.Port] = free
			p.TargetPort = intstr.FromInt32(free)
		}
	}
	for i := range in.Routes {
		for j := range in.Routes[i].Spec.Source.Kubernetes.Services {
			s := &in.Routes[i].Spec.Source.Kubernetes.Services[j].Service
			for k := range s.Spec.Ports {
				s.Spec.Ports[k].NodePort = nodePort(s.Labels[v1alpha1.LabelOriginName], s.Spec.Ports[k].Port)
			}
		}
	}
	return in, ports
}

// pushAndWait serves the pipeline's resources for the input and waits until Envoy applied them.
func pushAndWait(t *testing.T, srv *Server, e *testsupport.Envoy, in translate.Input) {
	t.Helper()
	_, _, out, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SetTenant(context.Background(), in.Tenant, out); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, waitTimeout, "Envoy to accept the snapshot", func() error {
		got, err := acceptedVersions(e)
		if err != nil {
			return err
		}
		for _, typ := range []string{resource.ListenerType, resource.ClusterType} {
			if want := srv.TypeVersion(in.Tenant, typ); got[typ] != want {
				return fmt.Errorf("%s at %q, want %q", typ, got[typ], want)
			}
		}
		return nil
	})
}

func backendPort(t *testing.T, b *testsupport.Backend) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(v)
}

// TestGatewayAPITraffic sends real requests through a real Envoy configured from the Gateway
// API golden cases: redirects carry the Gateway's tenant-facing ports (well-known ports left
// out), prefix rewrites keep single slashes, unsupported filters answer 500, and TLS passes
// through by SNI, still encrypted, to the TLSRoutes' backends beside a terminating listener;
// HTTPS listeners sharing a port answer 421 Misdirected Request to a request whose host
// belongs to another listener than the connection's server name.
func TestGatewayAPITraffic(t *testing.T) {
	const tenant = "tenant-gateway"
	srv, xdsAddr := startXDS(t)
	e := startEnvoy(t, srv, tenant, xdsAddr, "gateway-proxy")

	web := testsupport.StartHTTPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "web"})
	in, ports := gatewayInput(t, "gw-filters.in.yaml", tenant, func(string, int32) int32 { return backendPort(t, web) })
	pushAndWait(t, srv, e, in)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: testsupport.RoundTripTimeout}
	for _, tc := range []struct {
		port       int32
		path       string
		status     int
		location   string
		body       string
		backendPod string
	}{
		{80, "/to-https/x", 302, "https://app.example.com/to-https/x", "", ""},
		{8080, "/to-https/x", 302, "https://app.example.com:443/to-https/x", "", ""},
		{80, "/same-port/a", 302, "http://app.example.com/v2/a", "", ""},
		{8080, "/same-port/a", 302, "http://app.example.com:8080/v2/a", "", ""},
		{80, "/moved", 301, "http://new.example.com/new", "", ""},
		{8080, "/moved", 301, "http://new.example.com:8080/new", "", ""},
		{80, "/explicit-port", 308, "http://app.example.com:8443/explicit-port", "", ""},
		{80, "/rewrite/abc", 200, "", "node-1 web /abc", "web"},
		{80, "/full/anything", 200, "", "node-1 web /index.html", "web"},
		{80, "/ext", 500, "", "", ""},
		{80, "/headers", 200, "", "node-1 web /headers", "web"},
	} {
		host := "app.example.com"
		if tc.port != 80 {
			host += fmt.Sprintf(":%d", tc.port) // what a client of a non-default port sends
		}
		testsupport.Eventually(t, waitTimeout, fmt.Sprintf("%s%s", host, tc.path), func() error {
			req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", ports[tc.port], tc.path), nil)
			if err != nil {
				return err
			}
			req.Host = host
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location ||
				tc.body != "" && string(body) != tc.body || resp.Header.Get("X-Backend-Pod") != tc.backendPod {
				return fmt.Errorf("got %d, Location %q, body %q, pod %q; want %d, %q, %q, %q", resp.StatusCode, resp.Header.Get("Location"),
					body, resp.Header.Get("X-Backend-Pod"), tc.status, tc.location, tc.body, tc.backendPod)
			}
			if tc.path == "/headers" && resp.Header.Get("Cache-Control") != "no-store" {
				return fmt.Errorf("Cache-Control %q, want the ResponseHeaderModifier's no-store", resp.Header.Get("Cache-Control"))
			}
			return nil
		})
	}

	// A weighted rule with one unresolvable backend (web 3, nothere 1): that share is
	// answered with 500, the rest reaches web.
	in, ports = gatewayInput(t, "gw-context.in.yaml", tenant, func(string, int32) int32 { return backendPort(t, web) })
	pushAndWait(t, srv, e, in)
	testsupport.Eventually(t, waitTimeout, "both 200 from web and 500 for the failed share", func() error {
		seen := map[int]int{}
		for range 40 {
			req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", ports[80]), nil)
			if err != nil {
				return err
			}
			req.Host = "store.example.com"
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode == 200 && resp.Header.Get("X-Backend-Pod") != "web" {
				return fmt.Errorf("200 from %q, want web", resp.Header.Get("X-Backend-Pod"))
			}
			seen[resp.StatusCode]++
		}
		if seen[200] == 0 || seen[500] == 0 || len(seen) != 2 {
			return fmt.Errorf("status codes %v, want 200 and 500", seen)
		}
		return nil
	})

	pg := testsupport.StartTLSBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "pg"}, "pg.db.example.com")
	legacy := testsupport.StartTLSBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "legacy"}, "anything.example.net")
	in, ports = gatewayInput(t, "gw-tls-passthrough.in.yaml", tenant, func(svc string, _ int32) int32 {
		if svc == "pg" {
			return backendPort(t, pg)
		}
		return backendPort(t, legacy)
	})
	pushAndWait(t, srv, e, in)
	addr := fmt.Sprintf("127.0.0.1:%d", ports[443])
	for _, tc := range []struct {
		sni string
		to  *testsupport.Backend
	}{
		{"pg.db.example.com", pg},        // listener db, TLSRoute pg
		{"anything.example.net", legacy}, // the fallback chain: listener rest, TLSRoute rest
	} {
		testsupport.Eventually(t, waitTimeout, "TLS passthrough for "+tc.sni, func() error {
			// The client trusts only the backend's own certificate: it reached the backend
			// with TLS untouched.
			r, err := testsupport.TLSRoundTrip(addr, tc.sni, tc.to.CA, "/p")
			if err != nil {
				return err
			}
			if r.Pod != tc.to.Pod {
				return fmt.Errorf("answered by %s, want %s", r.Pod, tc.to.Pod)
			}
			return nil
		})
	}

	// The Gateway of the conformance test HTTPRouteHTTPSListenerDetectMisdirectedRequests:
	// four HTTPS listeners on 443, one HTTPRoute each (backends v1, v2, v3, v1).
	v := map[string]*testsupport.Backend{}
	for _, pod := range []string{"v1", "v2", "v3"} {
		v[pod] = testsupport.StartHTTPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: pod})
	}
	in, ports = gatewayInput(t, "gw-misdirected.in.yaml", tenant, func(svc string, _ int32) int32 {
		return backendPort(t, v[strings.TrimPrefix(svc, "infra-backend-")])
	})
	pushAndWait(t, srv, e, in)
	block, _ := pem.Decode(in.Secrets[0].Data["tls.crt"])
	if block == nil {
		t.Fatal("the golden Secret holds no PEM certificate")
	}
	addr = fmt.Sprintf("127.0.0.1:%d", ports[443])
	for _, tc := range []struct {
		sni, host string
		status    int
		pod       string
	}{
		{"example.org", "example.org", 200, "v1"},
		{"example.org", "second-example.org", 421, ""},
		{"example.org", "unknown-example.org", 404, ""},
		{"second-example.org", "second-example.org", 200, "v2"},
		{"second-example.org", "example.org", 421, ""},
		{"second-example.org", "unknown-example.org", 421, ""},
		{"third-example.wildcard.org", "third-example.wildcard.org", 200, "v3"},
		{"third-example.wildcard.org", "fith-example.wildcard.org", 200, "v3"},
		{"third-example.wildcard.org", "fourth-example.wildcard.org", 421, ""},
		{"third-example.wildcard.org", "second-example.org", 421, ""},
		{"third-example.wildcard.org", "unknown-example.org", 421, ""},
		{"fourth-example.wildcard.org", "fourth-example.wildcard.org", 200, "v1"},
		{"fourth-example.wildcard.org", "fith-example.wildcard.org", 421, ""},
		{"unknown-example.org", "example.org", 200, "v1"},
		{"unknown-example.org", "unknown-example.org", 404, ""},
	} {
		testsupport.Eventually(t, waitTimeout, fmt.Sprintf("server name %s, host %s", tc.sni, tc.host), func() error {
			// HTTP/2 with the server name of one listener and the host of another, as a
			// client coalescing connections sends it. The golden certificate names none of
			// these hosts: the client checks it is the one Envoy serves instead.
			tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{
				ServerName: tc.sni, MinVersion: tls.VersionTLS12, InsecureSkipVerify: true, //nolint:gosec // checked by VerifyConnection
				VerifyConnection: func(cs tls.ConnectionState) error {
					if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, block.Bytes) {
						return errors.New("Envoy did not present the listener's certificate")
					}
					return nil
				},
			}}
			defer tr.CloseIdleConnections()
			req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/detect-misdirected-requests", nil)
			if err != nil {
				return err
			}
			req.Host = tc.host
			resp, err := (&http.Client{Transport: tr, Timeout: testsupport.RoundTripTimeout}).Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != tc.status || resp.Header.Get(testsupport.HeaderPod) != tc.pod {
				return fmt.Errorf("got %s %d from %q, want HTTP/2 %d from %q", resp.Proto, resp.StatusCode, resp.Header.Get(testsupport.HeaderPod), tc.status, tc.pod)
			}
			return nil
		})
	}
}

// TestGatewayWeightedStreamTraffic opens real connections through a real Envoy configured
// from the gw-tcp-weighted golden case: a TCPRoute's connections reach both of its backends
// of weight 70 and 30 and never the one of weight 0; a TCPRoute with a missing backend
// (weight 1 of 4) has some connections closed at once and the others answered; a TLSRoute's
// passthrough connections reach both of its backends, TLS untouched.
func TestGatewayWeightedStreamTraffic(t *testing.T) {
	const tenant = "tenant-weighted"
	srv, xdsAddr := startXDS(t)
	e := startEnvoy(t, srv, tenant, xdsAddr, "weighted-proxy")

	backends := map[string]*testsupport.Backend{}
	for _, name := range []string{"tcp-backend-v1", "tcp-backend-v2", "tcp-backend-v3"} {
		backends[name] = testsupport.StartTCPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: name})
	}
	for _, name := range []string{"pg-a", "pg-b"} {
		backends[name] = testsupport.StartTLSBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: name}, "pg.db.example.com")
	}
	dns := int32(testsupport.FreePort(t)) // UDP: no traffic in this test
	in, ports := gatewayInput(t, "gw-tcp-weighted.in.yaml", tenant, func(svc string, _ int32) int32 {
		if b, ok := backends[svc]; ok {
			return backendPort(t, b)
		}
		return dns
	})
	pushAndWait(t, srv, e, in)

	const tries = 60
	weighted := fmt.Sprintf("127.0.0.1:%d", ports[9300])
	testsupport.Eventually(t, waitTimeout, "connections to both weighted backends", func() error {
		seen := map[string]int{}
		for i := range tries {
			r, err := testsupport.TCPRoundTrip(weighted, fmt.Sprintf("hello %d", i))
			if err != nil {
				return err
			}
			seen[r.Pod]++
		}
		if seen["tcp-backend-v1"] == 0 || seen["tcp-backend-v2"] == 0 || len(seen) != 2 {
			return fmt.Errorf("answered by %v, want tcp-backend-v1 and tcp-backend-v2 only", seen)
		}
		return nil
	})
	if n := backends["tcp-backend-v3"].Connections(); n != 0 {
		t.Errorf("the backend of weight 0 accepted %d connections, want none", n)
	}

	partly := fmt.Sprintf("127.0.0.1:%d", ports[9301])
	testsupport.Eventually(t, waitTimeout, "answers from tcp-backend-v1 and refused connections", func() error {
		answered, refused := 0, 0
		for i := range tries {
			r, err := testsupport.TCPRoundTrip(partly, fmt.Sprintf("hello %d", i))
			switch {
			case err != nil:
				refused++
			case r.Pod != "tcp-backend-v1":
				return fmt.Errorf("answered by %s, want tcp-backend-v1", r.Pod)
			default:
				answered++
			}
		}
		if answered == 0 || refused == 0 {
			return fmt.Errorf("%d answered, %d refused; want both", answered, refused)
		}
		return nil
	})

	tlsAddr := fmt.Sprintf("127.0.0.1:%d", ports[443])
	const sni = "pg.db.example.com"
	// who completes a TLS handshake and names the backend whose own certificate was
	// presented: the connection reached it still encrypted.
	who := func() (string, error) {
		got := ""
		cfg := &tls.Config{ServerName: sni, MinVersion: tls.VersionTLS12, InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				for _, name := range []string{"pg-a", "pg-b"} {
					opts := x509.VerifyOptions{Roots: backends[name].CA, DNSName: sni}
					if _, err := cs.PeerCertificates[0].Verify(opts); err == nil {
						got = name
						return nil
					}
				}
				return errors.New("the certificate of neither pg-a nor pg-b")
			}}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: testsupport.RoundTripTimeout}, "tcp", tlsAddr, cfg)
		if err != nil {
			return "", err
		}
		return got, c.Close()
	}
	testsupport.Eventually(t, waitTimeout, "TLS passthrough to both weighted backends", func() error {
		seen := map[string]int{}
		for range tries {
			name, err := who()
			if err != nil {
				return err
			}
			seen[name]++
		}
		if seen["pg-a"] == 0 || seen["pg-b"] == 0 {
			return fmt.Errorf("handshakes with %v, want pg-a and pg-b", seen)
		}
		return nil
	})
}

// TestGatewayWeightedUDPTraffic sends datagrams, each from a fresh socket (a new UDP session),
// through a real Envoy configured from the gw-udp-weighted golden case: a UDPRoute's sessions
// are shared 70/30 between its backends and the one of weight 0 gets none; a UDPRoute with a
// missing backend shares its sessions 3:1 among the two it can reach (the missing one's share
// goes to them).
func TestGatewayWeightedUDPTraffic(t *testing.T) {
	const tenant = "tenant-weighted-udp"
	srv, xdsAddr := startXDS(t)
	e := startEnvoy(t, srv, tenant, xdsAddr, "weighted-udp-proxy")

	backends := map[string]*testsupport.Backend{}
	for _, name := range []string{"udp-backend-v1", "udp-backend-v2", "udp-backend-v3"} {
		backends[name] = testsupport.StartUDPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: name})
	}
	in, ports := gatewayInput(t, "gw-udp-weighted.in.yaml", tenant, func(svc string, _ int32) int32 {
		return backendPort(t, backends[svc])
	})
	pushAndWait(t, srv, e, in)

	// share sends n sessions to the listener of port and counts who answered each.
	share := func(port int32, n int) (map[string]int, error) {
		seen := map[string]int{}
		for i := range n {
			r, err := testsupport.UDPRoundTrip(fmt.Sprintf("127.0.0.1:%d", ports[port]), fmt.Sprintf("hello %d", i))
			if err != nil {
				return nil, err
			}
			seen[r.Pod]++
		}
		t.Logf("%d sessions to port %d answered by %v", n, port, seen)
		return seen, nil
	}
	// near tells whether got sessions of n are within 10 points of want percent.
	near := func(got, n, want int) bool { return got*100 >= (want-10)*n && got*100 <= (want+10)*n }
	const n = 200
	testsupport.Eventually(t, waitTimeout, "sessions shared 70/30", func() error {
		seen, err := share(5300, n)
		if err != nil {
			return err
		}
		if len(seen) != 2 || !near(seen["udp-backend-v1"], n, 70) || !near(seen["udp-backend-v2"], n, 30) {
			return fmt.Errorf("answered by %v of %d, want about 70%% udp-backend-v1 and 30%% udp-backend-v2 only", seen, n)
		}
		return nil
	})
	testsupport.Eventually(t, waitTimeout, "sessions shared 3:1 without the missing backend", func() error {
		seen, err := share(5301, n)
		if err != nil {
			return err
		}
		if len(seen) != 2 || !near(seen["udp-backend-v1"], n, 75) || !near(seen["udp-backend-v2"], n, 25) {
			return fmt.Errorf("answered by %v of %d, want about 75%% udp-backend-v1 and 25%% udp-backend-v2 only", seen, n)
		}
		return nil
	})
	if got := backends["udp-backend-v3"].Requests(); got != 0 {
		t.Errorf("the backend of weight 0 got %d datagrams, want none", got)
	}
}
