package translate_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// http3Gateway is a Gateway with one HTTPS listener (port 443, certificate for
// www.example.com) carrying ClientTrafficPolicy ct, an HTTPRoute to a backend on a node, and
// a hub Service with TCP and UDP port 443 (the planner adds the UDP port for http3): the
// input, the Envoy ports of TCP and UDP 443, and a pool trusting the certificate.
func http3Gateway(t *testing.T, tenant string, ct *v1alpha1.ClientTraffic) (in translate.Input, tcpPort, udpPort int, roots *tls.Config) {
	t.Helper()
	nodePort := testsupport.FreePort(t)
	testsupport.StartHTTPBackend(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(nodePort)), testsupport.Identity{Node: "node-1", Pod: "web"})
	serverData, serverPool := testCert(t, "www.example.com")
	tcpPort, udpPort = testsupport.FreePort(t), testsupport.FreePort(t)
	port := gwv1.PortNumber(80)
	in = oneGateway(t, tenant, gwv1.Listener{
		Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "server"}}},
	}, tcpPort, []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
		BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}}, nodePort)
	in.RouteServices[0].Spec.Ports = append(in.RouteServices[0].Spec.Ports, corev1.ServicePort{Name: "udp-443", Port: 443, Protocol: corev1.ProtocolUDP,
		TargetPort: intstr.FromInt(udpPort)})
	in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{ClientTraffic: ct}
	in.Secrets = []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "synced-server", Namespace: tenant,
		Labels: map[string]string{v1alpha1.LabelOriginName: "server", v1alpha1.LabelOriginNamespace: "shop"}}, Type: corev1.SecretTypeTLS, Data: serverData}}
	return in, tcpPort, udpPort, &tls.Config{ServerName: "www.example.com", RootCAs: serverPool, MinVersion: tls.VersionTLS12}
}

// getHTTPS sends GET / for www.example.com over HTTPS (TCP) to addr and returns its alt-svc
// header.
func getHTTPS(addr string, cfg *tls.Config) (string, error) {
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/", nil)
	if err != nil {
		return "", err
	}
	req.Host = "www.example.com"
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("Alt-Svc"), nil
}

// getHTTP3 sends GET / for www.example.com over HTTP/3 (QUIC) to addr and returns the
// response (its body closed). The QUIC handshake is given 3 seconds.
func getHTTP3(addr string, cfg *tls.Config) (*http.Response, error) {
	tr := &http3.Transport{TLSClientConfig: cfg, QUICConfig: &quic.Config{HandshakeIdleTimeout: 3 * time.Second}}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
	if err != nil {
		return nil, err
	}
	req.Host = "www.example.com"
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return resp, nil
}

// TestClientTrafficHTTP3ThroughEnvoy: a Gateway's ClientTrafficPolicy http3 through a real
// Envoy. Its HTTPS listener answers over TCP with alt-svc: h3=":443"; ma=86400 (the
// Gateway's port, which the hub Service forwards over UDP too), and a GET over HTTP/3 (QUIC,
// quic-go's client) to the Envoy port of the hub Service's UDP port 443 is answered by the
// backend, over HTTP/3.
func TestClientTrafficHTTP3ThroughEnvoy(t *testing.T) {
	const tenant = "tenant-client-http3"
	in, tcpPort, udpPort, cfg := http3Gateway(t, tenant, &v1alpha1.ClientTraffic{Namespace: "shop", Name: "h3", HTTP3: &v1alpha1.ClientTrafficHTTP3{}})
	addr := pushToEnvoy(t, tenant, in, tcpPort)
	var altSvc string
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the HTTPS listener", func() (err error) {
		altSvc, err = getHTTPS(addr, cfg)
		return err
	})
	if want := `h3=":443"; ma=86400`; altSvc != want {
		t.Errorf("alt-svc over HTTPS %q, want %q", altSvc, want)
	}
	var resp *http.Response
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve HTTP/3", func() (err error) {
		resp, err = getHTTP3(testsupport.Loopback(udpPort), cfg)
		if err == nil && resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return err
	})
	if resp.ProtoMajor != 3 || resp.Header.Get(testsupport.HeaderPod) != "web" {
		t.Errorf("over HTTP/3: protocol %s, answered by %q; want HTTP/3 answered by web", resp.Proto, resp.Header.Get(testsupport.HeaderPod))
	}
}

// TestClientTrafficWithoutHTTP3ThroughEnvoy: without http3 nothing listens on UDP, even when
// the hub Service has a UDP port of the HTTPS port's number, and HTTPS responses advertise no
// HTTP/3: a QUIC handshake to that port fails within its 3-second handshake timeout.
func TestClientTrafficWithoutHTTP3ThroughEnvoy(t *testing.T) {
	const tenant = "tenant-client-no-http3"
	in, tcpPort, udpPort, cfg := http3Gateway(t, tenant, &v1alpha1.ClientTraffic{Namespace: "shop", Name: "h2",
		HTTP2: &v1alpha1.ClientTrafficHTTP2{OnInvalidMessage: "TerminateStream"}})
	addr := pushToEnvoy(t, tenant, in, tcpPort)
	var altSvc string
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the HTTPS listener", func() (err error) {
		altSvc, err = getHTTPS(addr, cfg)
		return err
	})
	if altSvc != "" {
		t.Errorf("alt-svc over HTTPS %q, want none", altSvc)
	}
	if resp, err := getHTTP3(testsupport.Loopback(udpPort), cfg); err == nil {
		t.Errorf("HTTP/3 answered %s, want no listener", resp.Status)
	} else {
		t.Logf("HTTP/3 without http3: %v", err)
	}
}
