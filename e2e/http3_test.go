package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestHTTP3ThroughEnvoy: a Gateway's ClientTrafficPolicy http3 with the real manager, the real
// ccm and a real Envoy. The Gateway's hub Service gets UDP port 443 next to TCP port 443, each
// to its own Envoy listener port (what the hub's load balancer must forward); the HTTPS
// listener's responses advertise HTTP/3 (alt-svc: h3=":443"; ma=86400), and a GET over
// HTTP/3 (quic-go's client) to the Envoy port of UDP 443 is answered by the backend.
func TestHTTP3ThroughEnvoy(t *testing.T) {
	pair := testenv.StartPair(t)
	tc := pair.Tenant.Client
	if _, err := source.InstallPolicyCRDs(context.Background(), tc, tc); err != nil {
		t.Fatal(err)
	}
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 1, "--enable-gateway-api")

	const ns = "shop"
	a.CreateNamespace(ns, nil)
	a.CreateBackendService(ns, "web", corev1.ServicePort{Name: "http", Port: 80})
	cert := newCert(t, "web.example.com")
	gw, route := webGateway(ns)
	gw.Spec.Listeners = []gwv1.Listener{{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443,
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "web-tls"}}}}}
	create(t, tc, tlsSecret(ns, "web-tls", cert), gw, route,
		egPolicy(t, source.ClientTrafficPolicyKind, ns, "h3", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]
http3: {}
`))
	a.StartEnvoy(framework.EnvoyBootstrap)
	a.ServeBackend(ns, "web", 80, testsupport.StartHTTPBackend)

	// The hub Service: TCP and UDP 443, to two Envoy listener ports.
	var tcpPort, udpPort int
	testsupport.Eventually(t, 2*time.Minute, "the hub Service's TCP and UDP port 443", func() error {
		get(t, tc, gw)
		svc := &corev1.Service{}
		if err := sys.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: a.Namespace, Name: kubelbv1alpha1.GatewayServicePrefix + string(gw.UID)}, svc); err != nil {
			return err
		}
		tcpPort, udpPort = 0, 0
		for _, p := range svc.Spec.Ports {
			switch {
			case p.Port == 443 && p.Protocol == corev1.ProtocolTCP && p.Name == "tcp-443":
				tcpPort = p.TargetPort.IntValue()
			case p.Port == 443 && p.Protocol == corev1.ProtocolUDP && p.Name == "udp-443":
				udpPort = p.TargetPort.IntValue()
			}
		}
		if tcpPort == 0 || udpPort == 0 || tcpPort == udpPort {
			return fmt.Errorf("ports %v", svc.Spec.Ports)
		}
		return nil
	})

	r := waitHTTP(t, testsupport.Loopback(tcpPort), "web.example.com", "/", cert.pool, nil, http.StatusOK, "")
	if got, want := r.Header.Get("Alt-Svc"), `h3=":443"; ma=86400`; got != want {
		t.Errorf("alt-svc over HTTPS %q, want %q", got, want)
	}
	cfg := &tls.Config{ServerName: "web.example.com", RootCAs: cert.pool, MinVersion: tls.VersionTLS13}
	testsupport.Eventually(t, time.Minute, "a GET over HTTP/3 answered by the backend", func() error {
		tr := &http3.Transport{TLSClientConfig: cfg, QUICConfig: &quic.Config{HandshakeIdleTimeout: 3 * time.Second}}
		defer tr.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+testsupport.Loopback(udpPort)+"/", nil)
		if err != nil {
			return err
		}
		req.Host = "web.example.com"
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 3 || resp.Header.Get(testsupport.HeaderPod) == "" {
			return fmt.Errorf("status %d over %s from %q", resp.StatusCode, resp.Proto, resp.Header.Get(testsupport.HeaderPod))
		}
		return nil
	})
}
