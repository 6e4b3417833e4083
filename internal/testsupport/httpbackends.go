package testsupport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"
)

// Headers naming who answered an HTTP request (and, lower-cased, gRPC header metadata).
const (
	HeaderNode = "X-Backend-Node"
	HeaderPod  = "X-Backend-Pod"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	b *Backend
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.b.connections.Add(1)
	}
	return c, err
}

// listen opens a counting TCP listener for a backend.
func listen(t TB, kind, addr string, id Identity) (*Backend, net.Listener) {
	t.Helper()
	id.check(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s backend %s on %s: %v", kind, id, addr, err)
	}
	b := &Backend{Identity: id, Addr: l.Addr().String()}
	return b, countingListener{Listener: l, b: b}
}

// HeaderSeenPrefix prefixes the response headers in which HTTP backends echo the request's
// Host and X- headers.
const HeaderSeenPrefix = "X-Seen-"

// DelayPath prefixes the path of a request an HTTP backend answers only after the duration
// that follows it (e.g. /delay/60s; at most MaxDelay), or when the client goes away.
const DelayPath = "/delay/"

// MaxDelay bounds the wait a request under DelayPath asks for.
const MaxDelay = 2 * time.Minute

// handler answers every request with the backend's names in headers and
// "<node> <pod> <path>" in the body; a request under DelayPath after its delay.
func (b *Backend) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		if v, ok := strings.CutPrefix(r.URL.Path, DelayPath); ok {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				select {
				case <-time.After(min(d, MaxDelay)):
				case <-r.Context().Done():
					return
				}
			}
		}
		w.Header().Set(HeaderNode, b.Node)
		w.Header().Set(HeaderPod, b.Pod)
		// What a proxy changed on the way is visible to the client: the Host it forwarded
		// and every X- request header, echoed as X-Seen-Host and X-Seen-<rest of the name>.
		w.Header().Set(HeaderSeenPrefix+"Host", r.Host)
		for k, v := range r.Header {
			if rest, ok := strings.CutPrefix(k, "X-"); ok && !strings.HasPrefix(k, HeaderSeenPrefix) {
				w.Header().Set(HeaderSeenPrefix+rest, strings.Join(v, ","))
			}
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, b.prefix()+r.URL.Path)
	})
}

// serveHTTP runs srv on l until Close, which shuts it down.
func (b *Backend) serveHTTP(t TB, srv *http.Server, l net.Listener, tlsOn bool) {
	srv.ReadHeaderTimeout = backendTimeout
	srv.IdleTimeout = backendTimeout
	done := make(chan struct{})
	go func() {
		defer close(done)
		if tlsOn {
			_ = srv.ServeTLS(l, "", "")
		} else {
			_ = srv.Serve(l)
		}
	}()
	b.stop = func() {
		_ = srv.Close()
		<-done
	}
	t.Cleanup(b.Close)
}

// plainProtocols are HTTP/1.1, and with h2c HTTP/2 without TLS too.
func plainProtocols(h2c bool) *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(!h2c)
	p.SetUnencryptedHTTP2(h2c)
	return &p
}

// StartHTTPBackend serves HTTP/1.1 on addr.
func StartHTTPBackend(t TB, addr string, id Identity) *Backend {
	t.Helper()
	b, l := listen(t, "HTTP", addr, id)
	b.serveHTTP(t, &http.Server{Handler: b.handler(), Protocols: plainProtocols(false)}, l, false)
	return b
}

// StartH2CBackend serves HTTP/2 without TLS (h2c, prior knowledge) on addr.
func StartH2CBackend(t TB, addr string, id Identity) *Backend {
	t.Helper()
	b, l := listen(t, "h2c", addr, id)
	b.serveHTTP(t, &http.Server{Handler: b.handler(), Protocols: plainProtocols(true)}, l, false)
	return b
}

// StartTLSBackend serves HTTPS (HTTP/2 and HTTP/1.1 through ALPN) on addr with a self-signed
// certificate made at start-up for serverNames and the listening IP; b.CA trusts it.
func StartTLSBackend(t TB, addr string, id Identity, serverNames ...string) *Backend {
	t.Helper()
	b, l := listen(t, "TLS", addr, id)
	ip := net.ParseIP(l.Addr().(*net.TCPAddr).IP.String())
	cert, pool, err := selfSigned(id.Pod, serverNames, ip)
	if err != nil {
		l.Close()
		t.Fatalf("TLS backend %s: %v", id, err)
	}
	b.CA = pool
	srv := &http.Server{Handler: b.handler(), TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	b.serveHTTP(t, srv, l, true)
	return b
}

// selfSigned makes a certificate for names and ip that is its own CA, and a pool trusting it.
func selfSigned(cn string, names []string, ip net.IP) (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		DNSNames:              names,
		IPAddresses:           []net.IP{ip},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool, nil
}

// httpRoundTrip GETs scheme://addr<path> with the transport and reads who answered from
// headers and body.
func httpRoundTrip(tr *http.Transport, scheme, addr, path string) (Reply, error) {
	defer tr.CloseIdleConnections()
	if !strings.HasPrefix(path, "/") {
		return Reply{}, errors.New("the path must start with /")
	}
	url := scheme + "://" + addr + path
	client := &http.Client{Transport: tr, Timeout: RoundTripTimeout}
	resp, err := client.Get(url)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Reply{}, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	r, err := parseEcho(string(body), path)
	if err != nil {
		return Reply{}, err
	}
	if h := (Identity{Node: resp.Header.Get(HeaderNode), Pod: resp.Header.Get(HeaderPod)}); h != r.Identity {
		return Reply{}, fmt.Errorf("headers name %s, the body %s", h, r.Identity)
	}
	r.Proto = resp.Proto
	return r, nil
}

// HTTPRoundTrip GETs http://addr<path> over HTTP/1.1 and returns who answered.
func HTTPRoundTrip(addr, path string) (Reply, error) {
	return httpRoundTrip(&http.Transport{Protocols: plainProtocols(false)}, "http", addr, path)
}

// H2CRoundTrip GETs http://addr<path> over HTTP/2 without TLS (prior knowledge) and returns
// who answered.
func H2CRoundTrip(addr, path string) (Reply, error) {
	return httpRoundTrip(&http.Transport{Protocols: plainProtocols(true)}, "http", addr, path)
}

// TLSRoundTrip GETs https://addr<path>, sending sni as the server name and trusting only ca,
// and returns who answered (HTTP/2 when the server offers it).
func TLSRoundTrip(addr, sni string, ca *x509.CertPool, path string) (Reply, error) {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{ServerName: sni, RootCAs: ca, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}
	return httpRoundTrip(tr, "https", addr, path)
}
