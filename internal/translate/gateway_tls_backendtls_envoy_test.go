package translate_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestTLSRouteBackendTLSThroughEnvoy serves a TLSRoute behind a TLS listener in mode
// Terminate whose backend a BackendTLSPolicy targets, through a real Envoy, to a backend that
// serves TLS itself. A TLS client connects to the listener and sends a line:
//   - with the policy's CA: the backend receives the line over TLS, with the policy's hostname
//     as SNI, no ALPN, and the Gateway's client certificate (spec.tls.backend); the client
//     reads the backend's answer;
//   - with a CA that did not sign the backend's certificate: Envoy refuses the backend, the
//     client's connection is closed and the backend never receives the line;
//   - with an entry the hub cannot use (no CA certificate): an InvalidBackendTLS warning, the
//     connection is closed (its chain refuses every connection) and the backend never
//     receives anything (never plain text).
func TestTLSRouteBackendTLSThroughEnvoy(t *testing.T) {
	backendCA := newTestCA(t, "kubelb test backend CA")
	otherCA := newTestCA(t, "kubelb test other CA")
	gatewayCert := backendCA.issue(t, "gateway-client", false)
	backendServer := backendCA.issue(t, "secure.example.com", true)
	serverData, serverPool := testCert(t, "tls.example.com")

	// The backend serves TLS, asks for a client certificate of backendCA, and answers each
	// line with what it saw of the connection; received gets every line it read.
	received := make(chan string, 16)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	ln := tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{backendServer.pair}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: backendCA.pool})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil { // a health check, or a handshake Envoy gave up
					return
				}
				st := c.(*tls.Conn).ConnectionState()
				client := "none"
				if len(st.PeerCertificates) > 0 {
					client = st.PeerCertificates[0].Subject.CommonName
				}
				seen := fmt.Sprintf("sni=%s alpn=%q client=%s line=%s", st.ServerName, st.NegotiatedProtocol, client, strings.TrimSpace(line))
				received <- seen
				_, _ = fmt.Fprintln(c, seen)
			}(c)
		}
	}()
	_, p, _ := net.SplitHostPort(raw.Addr().String())
	nodePort, _ := strconv.Atoi(p)

	zero := int32(0)
	for _, c := range []struct {
		name   string
		ca     []byte
		entry  v1alpha1.BackendTLS
		served bool
	}{
		{"the policy's CA", backendCA.pem, v1alpha1.BackendTLS{CACertificates: &zero}, true},
		{"another CA", otherCA.pem, v1alpha1.BackendTLS{CACertificates: &zero}, false},
		{"no usable CA", nil, v1alpha1.BackendTLS{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tenant := "tenant-tlsroute-" + strings.ReplaceAll(c.name, " ", "-")
			tenant = strings.ReplaceAll(tenant, "'", "")
			envoyPort := testsupport.FreePort(t)
			in := oneTLSRoute(t, tenant, envoyPort, nodePort)
			gw, route := &in.Routes[0], &in.Routes[1]
			setGatewayTLS(t, gw, &gwv1.GatewayTLSConfig{Backend: &gwv1.GatewayBackendTLS{ClientCertificateRef: &gwv1.SecretObjectReference{Name: "gateway-client"}}})
			entry := c.entry
			entry.Namespace, entry.Name, entry.Port, entry.Policy, entry.Hostname = "shop", "secure", 8443, "secure-tls", "secure.example.com"
			route.Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{BackendTLS: []v1alpha1.BackendTLS{entry}}
			if c.ca != nil {
				route.Spec.Source.Kubernetes.Context.BackendCACertificates = []string{string(c.ca)}
			}
			secret := func(name string, data map[string][]byte) corev1.Secret {
				return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "synced-" + name, Namespace: tenant,
					Labels: map[string]string{v1alpha1.LabelOriginName: name, v1alpha1.LabelOriginNamespace: "shop"}}, Type: corev1.SecretTypeTLS, Data: data}
			}
			in.Secrets = []corev1.Secret{secret("server", serverData), secret("gateway-client", gatewayCert.data)}
			_, problems, res, err := translatetest.Pipeline(in)
			if err != nil {
				t.Fatal(err)
			}
			invalid := 0
			for _, pr := range problems {
				if pr.Reason == translate.ReasonInvalidBackendTLS {
					invalid++
				} else {
					t.Errorf("unexpected problem %+v", pr)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[c.ca == nil]; invalid != want {
				t.Errorf("%d InvalidBackendTLS problems, want %d: %v", invalid, want, problems)
			}
			xdsenvoy.Start(t, "tlsroute-backend-tls", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
			addr := testsupport.Loopback(envoyPort)
			send := func() (string, error) {
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
					&tls.Config{ServerName: "tls.example.com", RootCAs: serverPool, MinVersion: tls.VersionTLS12})
				if err != nil {
					return "", fmt.Errorf("handshake with the listener: %w", err)
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := fmt.Fprintln(conn, "hello "+c.name); err != nil {
					return "", err
				}
				answer, err := bufio.NewReader(conn).ReadString('\n')
				return strings.TrimSpace(answer), err
			}
			want := fmt.Sprintf(`sni=secure.example.com alpn="" client=gateway-client line=hello %s`, c.name)
			if c.served {
				var answer string
				testsupport.Eventually(t, 30*time.Second, "Envoy to carry the stream to the backend", func() error {
					var err error
					answer, err = send()
					return err
				})
				if answer != want {
					t.Errorf("the backend saw %q, want %q", answer, want)
				}
				for len(received) > 0 {
					<-received
				}
				return
			}
			// Once Envoy listens, the connection is closed (during the client's handshake, or
			// after it when the backend's certificate does not verify), never carried on.
			testsupport.Eventually(t, 30*time.Second, "Envoy to listen", func() error {
				conn, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					_ = conn.Close()
				}
				return err
			})
			if answer, err := send(); err == nil || answer != "" {
				t.Errorf("the client was answered %q (%v), want the connection closed", answer, err)
			}
			select {
			case seen := <-received:
				if strings.HasSuffix(seen, c.name) {
					t.Errorf("the backend received %q, want nothing (never plain text, never an unverified backend)", seen)
				}
			case <-time.After(time.Second):
			}
		})
	}
}

// oneTLSRoute is a tenant with one Gateway (shop/gw) of one TLS listener in mode Terminate
// (tls.example.com, certificate Secret server) served by Envoy on envoyPort of 127.0.0.1,
// and one TLSRoute (shop/secure) attached to it whose backend Service secure (port 8443) has
// its NodePort at nodePort of 127.0.0.1.
func oneTLSRoute(t *testing.T, tenant string, envoyPort, nodePort int) translate.Input {
	t.Helper()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	mode := gwv1.TLSModeTerminate
	host := gwv1.Hostname("tls.example.com")
	listener := gwv1.Listener{Name: "tls", Port: 443, Protocol: gwv1.TLSProtocolType, Hostname: &host,
		TLS: &gwv1.ListenerTLSConfig{Mode: &mode, CertificateRefs: []gwv1.SecretObjectReference{{Name: "server"}}}}
	gateway := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "00000000-0000-0000-0000-0000000000b1", Namespace: tenant, CreationTimestamp: metav1.NewTime(t0)}}
	gateway.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{}
	gateway.Spec.Source.Kubernetes.Route.Object = toObject(t, &gwv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "shop"},
		Spec:       gwv1.GatewaySpec{GatewayClassName: "kubelb", Listeners: []gwv1.Listener{listener}},
	})
	route := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "00000000-0000-0000-0000-0000000000b2", Namespace: tenant, CreationTimestamp: metav1.NewTime(t0.Add(time.Hour))}}
	route.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Services: []v1alpha1.UpstreamService{{Service: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "secure-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: "secure", v1alpha1.LabelOriginNamespace: "shop"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "https", Port: 8443, NodePort: int32(nodePort)}}},
	}}}}
	port := gwv1.PortNumber(8443)
	route.Spec.Source.Kubernetes.Route.Object = toObject(t, &gwv1.TLSRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "TLSRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: "secure", Namespace: "shop"},
		Spec: gwv1.TLSRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Hostnames: []gwv1.Hostname{host},
			Rules:     []gwv1.TLSRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{Name: "secure", Port: &port}}}}}},
	})
	return translate.Input{
		Tenant:    tenant,
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}},
		Options:   translate.Options{ListenerAddress: "127.0.0.1"},
		Policy:    translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
		Routes:    []v1alpha1.Route{gateway, route},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: "gateway-" + gateway.Name, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelRouteName: gateway.Name}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp-443", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(envoyPort)}}},
			Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "127.0.0.1"}}}},
		}},
	}
}
