package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/testsupport"
)

// StartFunc starts one backend on addr for a node and Pod.
type StartFunc func(t testsupport.TB, addr string, id testsupport.Identity) *testsupport.Backend

// CreateNamespace creates a namespace in the tenant cluster (idempotent).
func (tn *Tenant) CreateNamespace(name string, labels map[string]string) {
	t := tn.sys.T
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := tn.Cluster.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// CreateBackendService creates a ClusterIP Service selecting app=<name>, as app teams write
// them behind an Ingress or a route.
func (tn *Tenant) CreateBackendService(namespace, name string, ports ...corev1.ServicePort) *corev1.Service {
	t := tn.sys.T
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: ports},
	}
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].TargetPort.IntValue() == 0 {
			svc.Spec.Ports[i].TargetPort = intstr.FromInt32(svc.Spec.Ports[i].Port)
		}
	}
	if err := tn.Cluster.Client.Create(context.Background(), svc); err != nil {
		t.Fatalf("creating Service %s/%s: %v", namespace, name, err)
	}
	return svc
}

// ServeBackend plays kube-proxy and the Pods of a route's backend Service: it waits for the
// Service the hub reaches it through (the ccm's NodePort twin "<name>-nodeport" of a ClusterIP
// Service, or the Service itself when it has NodePorts) and starts one backend per node on
// node-address:NodePort of the given port, named <name>-<node>.
func (tn *Tenant) ServeBackend(namespace, name string, port int32, start StartFunc) []*testsupport.Backend {
	t := tn.sys.T
	t.Helper()
	var nodePort int32
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("a NodePort for %s/%s:%d", namespace, name, port), func() error {
		for _, candidate := range []string{name + "-nodeport", name} {
			svc := &corev1.Service{}
			if err := tn.Cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: candidate}, svc); err != nil {
				continue
			}
			for _, p := range svc.Spec.Ports {
				if p.Port == port && p.NodePort != 0 {
					nodePort = p.NodePort
					return nil
				}
			}
		}
		return fmt.Errorf("no NodePort yet")
	})
	var out []*testsupport.Backend
	for i, ip := range tn.NodeIPs {
		node := fmt.Sprintf("%s-node-%d", tn.Name, i)
		out = append(out, start(t, fmt.Sprintf("%s:%d", ip, nodePort), testsupport.Identity{Node: node, Pod: name + "-" + node}))
	}
	return out
}

// IngressPorts are the Envoy listener ports of the tenant's Ingresses (HTTP and HTTPS), from
// the hub Service kubelb-ingress the manager made.
func (tn *Tenant) IngressPorts() (httpPort, httpsPort int32) {
	t := tn.sys.T
	t.Helper()
	ports := tn.hubServicePorts(kubelbv1alpha1.IngressServiceName, 80, 443)
	return ports[80], ports[443]
}

// GatewayPorts are the Envoy listener ports of a tenant Gateway, by listener port, from the
// hub Service the manager made for it.
func (tn *Tenant) GatewayPorts(gatewayUID string, ports ...int32) map[int32]int32 {
	tn.sys.T.Helper()
	return tn.hubServicePorts(kubelbv1alpha1.GatewayServicePrefix+gatewayUID, ports...)
}

func (tn *Tenant) hubServicePorts(name string, want ...int32) map[int32]int32 {
	t := tn.sys.T
	t.Helper()
	out := map[int32]int32{}
	testsupport.Eventually(t, time.Minute, "the listener ports of hub Service "+name, func() error {
		svc := &corev1.Service{}
		if err := tn.sys.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: tn.Namespace, Name: name}, svc); err != nil {
			return err
		}
		for _, p := range svc.Spec.Ports {
			out[p.Port] = int32(p.TargetPort.IntValue())
		}
		for _, p := range want {
			if out[p] == 0 {
				return fmt.Errorf("port %d has no listener port yet", p)
			}
		}
		return nil
	})
	return out
}

// HTTPResult is one HTTP exchange through Envoy.
type HTTPResult struct {
	Status int
	Header http.Header
	Body   string
	// Node and Pod name the backend that answered (empty when none did).
	Node, Pod string
	// Proto is the protocol the client spoke.
	Proto string
}

// HTTPRequest sends one request to addr (an Envoy listener on loopback) with the Host header
// host; with ca set it speaks TLS with SNI host and verifies the chain against ca. It never
// follows redirects. Extra headers are added as given.
func HTTPRequest(addr, host, path string, ca *x509.CertPool, header http.Header) (HTTPResult, error) {
	return HTTPRequestWithin(addr, host, path, ca, header, testsupport.RoundTripTimeout)
}

// HTTPRequestWithin is HTTPRequest with the client giving up after timeout (for slow
// responses; HTTPRequest's is testsupport.RoundTripTimeout).
func HTTPRequestWithin(addr, host, path string, ca *x509.CertPool, header http.Header, timeout time.Duration) (HTTPResult, error) {
	scheme := "http"
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr) // only ever the loopback listener
		},
		DisableKeepAlives: true,
	}
	if ca != nil {
		scheme = "https"
		tr.TLSClientConfig = &tls.Config{ServerName: host, RootCAs: ca, MinVersion: tls.VersionTLS12}
		tr.ForceAttemptHTTP2 = true
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, scheme+"://"+host+path, nil)
	if err != nil {
		return HTTPResult{}, err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	c := &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return HTTPResult{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return HTTPResult{}, err
	}
	return HTTPResult{Status: resp.StatusCode, Header: resp.Header, Body: strings.TrimSpace(string(body)),
		Node: resp.Header.Get(testsupport.HeaderNode), Pod: resp.Header.Get(testsupport.HeaderPod), Proto: resp.Proto}, nil
}

// AddTenantWithoutCCM onboards a tenant whose hub objects the test writes itself, playing
// another ccm (e.g. KubeLB CE's): the Tenant (allowing LoopbackCIDR and LoopbackIPv6CIDR endpoints) and its
// Addresses/default with nodes fresh loopback addresses.
func (s *System) AddTenantWithoutCCM(name string, nodes int) *Tenant {
	t := s.T
	t.Helper()
	ctx := context.Background()
	tn := &Tenant{Name: name, Namespace: hubnames.TenantNamespace(name), sys: s}
	if err := s.Hub.Client.Create(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kubelbv1alpha1.TenantSpec{EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{Allow: []string{LoopbackCIDR, LoopbackIPv6CIDR}}}}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, time.Minute, "the namespace of tenant "+name, func() error {
		return s.Hub.Client.Get(ctx, client.ObjectKey{Name: tn.Namespace}, &corev1.Namespace{})
	})
	addrs := &kubelbv1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultAddressesName, Namespace: tn.Namespace}}
	for i := 0; i < nodes; i++ {
		s.tenantIPs++
		ip := fmt.Sprintf("127.0.0.%d", 10+s.tenantIPs)
		tn.NodeIPs = append(tn.NodeIPs, ip)
		addrs.Spec.Addresses = append(addrs.Spec.Addresses, kubelbv1alpha1.EndpointAddress{IP: ip})
	}
	if err := s.Hub.Client.Create(ctx, addrs); err != nil {
		t.Fatal(err)
	}
	return tn
}
