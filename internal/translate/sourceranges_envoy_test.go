package translate_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestSourceRangesThroughEnvoy: a LoadBalancer whose spec.sourceRanges allows 127.0.0.2/32 and
// 127.0.0.4/31 only, with a TCP port, a UDP port and a hostname, served by a real Envoy fed over
// xDS. Clients bind their sockets to different loopback addresses: from 127.0.0.2 and 127.0.0.5
// every TCP connection, UDP datagram and HTTPS request on the hostname is answered by the
// backend; from 127.0.0.3 and 127.0.0.6 none is: Envoy closes the TCP connections (no filter
// chain matches), drops the datagrams (no route) and answers the requests 403 (RBAC), as its
// counters show, and the HTTP backend sees only the allowed requests. A second LoadBalancer without ranges serves every client.
func TestSourceRangesThroughEnvoy(t *testing.T) {
	const tenant = "tenant-ranges"
	tcpBackend := testsupport.StartTCPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "tcp"})
	udpBackend := testsupport.StartUDPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "udp"})
	webBackend := testsupport.StartHTTPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "web"})
	port := func(addr string) int32 {
		_, p, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(p)
		return int32(n)
	}
	tcpPort, udpPort, httpPort, openPort, httpsPort := testsupport.FreePort(t), testsupport.FreePort(t), testsupport.FreePort(t), testsupport.FreePort(t), testsupport.FreePort(t)
	certPEM, keyPEM := testsupport.SelfSignedPEM(t, "office.example.com")

	lb := func(name string, ranges []string, ports ...v1alpha1.LoadBalancerPort) v1alpha1.LoadBalancer {
		eps := make([]v1alpha1.EndpointPort, 0, len(ports))
		for _, p := range ports {
			backend := map[string]string{"echo": tcpBackend.Addr, "dns": udpBackend.Addr, "http": webBackend.Addr}[p.Name]
			eps = append(eps, v1alpha1.EndpointPort{Name: p.Name, Protocol: p.Protocol, Port: port(backend)})
		}
		return v1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelOriginName: name, v1alpha1.LabelOriginNamespace: "shop"}},
			Spec: v1alpha1.LoadBalancerSpec{
				Type: corev1.ServiceTypeLoadBalancer, SourceRanges: ranges, Ports: ports,
				Endpoints: []v1alpha1.LoadBalancerEndpoints{{AddressesReference: &corev1.ObjectReference{Name: "default"}, Ports: eps}},
			},
		}
	}
	hubService := func(name string, ports map[string]int) *corev1.Service {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "envoy-" + name, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelLoadBalancerName: name}},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal},
		}
		for _, p := range []struct {
			name  string
			proto corev1.Protocol
			port  int32
		}{{"http", corev1.ProtocolTCP, 80}, {"echo", corev1.ProtocolTCP, 7}, {"dns", corev1.ProtocolUDP, 53}} {
			if lp, ok := ports[p.name]; ok {
				svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.name, Protocol: p.proto, Port: p.port, TargetPort: intstr.FromInt(lp)})
			}
		}
		return svc
	}
	office := lb("office", []string{"127.0.0.2/32", "127.0.0.5/31"},
		v1alpha1.LoadBalancerPort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
		v1alpha1.LoadBalancerPort{Name: "echo", Protocol: corev1.ProtocolTCP, Port: 7},
		v1alpha1.LoadBalancerPort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
	office.Spec.Hostname = "office.example.com"
	open := lb("open", nil, v1alpha1.LoadBalancerPort{Name: "echo", Protocol: corev1.ProtocolTCP, Port: 7})

	in := translate.Input{
		Tenant:    tenant,
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}},
		Options:   translate.Options{ListenerAddress: "127.0.0.1", HealthCheck: translate.HealthCheck{Disabled: true}},
		Policy:    translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
		DNS:       translate.DNS{AllowExplicitHostnames: true},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelIngressService: "true"}},
			// A hub Ingress Service that keeps the clients' addresses (else the translation warns
			// that the hostname's ranges may refuse allowed clients: ClientAddressUnknown).
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
				Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt(httpsPort)}}},
		}},
		HostnameSecrets: map[string]corev1.Secret{"office": {Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}},
		LoadBalancers:   []v1alpha1.LoadBalancer{office, open},
		HubServices: map[string]*corev1.Service{
			"office": hubService("office", map[string]int{"http": httpPort, "echo": tcpPort, "dns": udpPort}),
			"open":   hubService("open", map[string]int{"echo": openPort}),
		},
	}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil || len(problems) > 0 {
		t.Fatalf("translation: %v %v", problems, err)
	}
	envoy := xdsenvoy.Start(t, "ranges-proxy", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	testsupport.Eventually(t, 30*time.Second, "Envoy to listen on every port", func() error {
		ls, err := envoy.Listeners()
		if err == nil && len(ls) < 5 {
			err = errNotYet
		}
		return err
	})
	// A listener Envoy reports may not be on its worker yet (connection refused): wait until
	// each has its worker's statistics, made when the worker takes it.
	testsupport.Eventually(t, 30*time.Second, "Envoy's worker to take every listener", func() error {
		st, err := envoy.Stats(`^listener\..*\.worker_0\.downstream_cx_total$`)
		if err == nil && len(st) < 5 {
			err = fmt.Errorf("%d of 5 listeners on the worker", len(st))
		}
		return err
	})

	ca := x509.NewCertPool()
	ca.AppendCertsFromPEM(certPEM)
	clients := map[string]bool{"127.0.0.2": true, "127.0.0.5": true, "127.0.0.3": false, "127.0.0.6": false}
	const tries = 3
	type count struct{ served, refused int }
	counts := map[string]*count{}
	for _, proto := range []string{"tcp", "udp", "https", "open-tcp"} {
		counts[proto] = &count{}
	}
	before := webBackend.Requests()
	for src, allowed := range clients {
		for i := range tries {
			msg := fmt.Sprintf("%s-%d", src, i)
			check := func(proto string, err error) {
				c := counts[proto]
				if err == nil {
					c.served++
				} else {
					c.refused++
				}
				want := allowed || proto == "open-tcp"
				if (err == nil) != want {
					t.Errorf("%s from %s: error %v, want served %v", proto, src, err, want)
				}
			}
			_, err := testsupport.TCPRoundTripFrom(src, testsupport.Loopback(tcpPort), msg)
			check("tcp", err)
			_, err = testsupport.TCPRoundTripFrom(src, testsupport.Loopback(openPort), msg)
			check("open-tcp", err)
			_, err = testsupport.UDPRoundTripFrom(src, testsupport.Loopback(udpPort), msg, time.Second)
			check("udp", err)
			check("https", httpsFrom(src, testsupport.Loopback(httpsPort), "office.example.com", ca, "/"+msg))
		}
	}
	for proto, c := range counts {
		t.Logf("%s: %d served, %d refused", proto, c.served, c.refused)
	}
	want := map[string]count{"tcp": {2 * tries, 2 * tries}, "udp": {2 * tries, 2 * tries}, "https": {2 * tries, 2 * tries}, "open-tcp": {4 * tries, 0}}
	for proto, w := range want {
		if *counts[proto] != w {
			t.Errorf("%s: %+v, want %+v", proto, *counts[proto], w)
		}
	}
	// The HTTP backend saw the allowed clients' requests only.
	if got := webBackend.Requests() - before; got != 2*tries {
		t.Errorf("the HTTP backend got %d requests, want %d (allowed clients only)", got, 2*tries)
	}
	// Envoy refused the others itself: TCP connections matched no filter chain, UDP datagrams
	// no route, HTTP requests were denied by the RBAC filter.
	stats, err := envoy.Stats("no_filter_chain_match|sess_no_route|rbac")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{
		"listener.shop/office/tcp-7.no_filter_chain_match": 2 * tries,
		"listener.shop/open/tcp-7.no_filter_chain_match":   0,
		"udp.shop/office/udp-53.downstream_sess_no_route":  2 * tries,
		"http.ingress-https.rbac.denied":                   2 * tries,
		"http.ingress-https.rbac.allowed":                  2 * tries,
	} {
		if stats[name] != want {
			t.Errorf("Envoy stat %s = %d, want %d", name, stats[name], want)
		}
	}
}

// httpsFrom GETs path over TLS (SNI host) from a socket bound to src; an answer other than
// 200 from the backend is an error.
func httpsFrom(src, addr, host string, ca *x509.CertPool, path string) error {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 3 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{ServerName: host, RootCAs: ca, MinVersion: tls.VersionTLS12},
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + host + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if !strings.Contains(string(body), path) {
		return fmt.Errorf("answer %q does not echo %s", body, path)
	}
	return nil
}
