package route

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/certmanagercrds"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/envoycp"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/translator"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// TestLoadBalancerHostnames runs the LoadBalancer and Route controllers on a hub serving
// cert-manager's Certificate CRD (from its Go module), plays cert-manager by filling the
// Secret of the Certificate the manager made, and sends an HTTPS request with the hostname's
// SNI through a real Envoy fed with what envoycp builds from the hub: it reaches the
// LoadBalancer's backend on its NodePort.
func TestLoadBalancerHostnames(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	installCertificateCRD(t, c)

	const ns = "tenant-hn"
	backend := testsupport.StartHTTPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "web"})
	_, p, _ := net.SplitHostPort(backend.Addr)
	nodePort, _ := strconv.Atoi(p)

	objects.Create(t, c, objects.Namespace(managerNS, nil))
	// Config: a wildcard domain, DNS annotations, an issuer, loopback endpoints allowed. The
	// Tenant overrides the issuer and allows explicit hostnames.
	cfg := objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{
		DNS: kubelbv1alpha1.DNSSettings{WildcardDomain: ptr.To("*.apps.example.test"), UseDNSAnnotations: ptr.To(true),
			AllowExplicitHostnames: ptr.To(false)},
		Certificates:   kubelbv1alpha1.CertificatesSettings{DefaultClusterIssuer: ptr.To("config-issuer")},
		EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{Allow: []string{"127.0.0.0/8"}},
	})
	objects.Create(t, c, cfg)
	tn := objects.CreateTenant(t, c, objects.Tenant("hn", kubelbv1alpha1.TenantSpec{
		DNS:          kubelbv1alpha1.DNSSettings{AllowExplicitHostnames: ptr.To(true)},
		Certificates: kubelbv1alpha1.CertificatesSettings{DefaultClusterIssuer: ptr.To("tenant-issuer")},
	}))
	if err := c.Create(ctx, &kubelbv1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kubelbv1alpha1.DefaultAddressesName},
		Spec: kubelbv1alpha1.AddressesSpec{Addresses: []kubelbv1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}); err != nil {
		t.Fatal(err)
	}
	// A Certificate someone else made, in the way of LoadBalancer "planted"'s.
	foreign := &unstructured.Unstructured{}
	foreign.SetGroupVersionKind(hubnames.CertificateGVK)
	foreign.SetNamespace(ns)
	foreign.SetName(hubnames.HostnameSecretName("planted"))
	_ = unstructured.SetNestedField(foreign.Object, "planted-tls", "spec", "secretName")
	_ = unstructured.SetNestedStringSlice(foreign.Object, []string{"planted.hn.apps.example.test"}, "spec", "dnsNames")
	_ = unstructured.SetNestedStringMap(foreign.Object, map[string]string{"name": "x", "kind": "ClusterIssuer"}, "spec", "issuerRef")
	if err := c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}

	lb := func(name, hostname string) *kubelbv1alpha1.LoadBalancer {
		return &kubelbv1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kubelbv1alpha1.LoadBalancerSpec{
				Hostname: hostname,
				Ports:    []kubelbv1alpha1.LoadBalancerPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
				Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{
					AddressesReference: &corev1.ObjectReference{Name: kubelbv1alpha1.DefaultAddressesName},
					Ports:              []kubelbv1alpha1.EndpointPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: int32(nodePort)}},
				}},
			},
		}
	}
	for _, o := range []*kubelbv1alpha1.LoadBalancer{lb("web", ""), lb("explicit", "Shop.Example.org."), lb("planted", "")} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	startManager(t, hub, freeRange(t, 8))

	const webHost = "web.hn.apps.example.test"
	// The Certificate: the generated hostname, the Tenant's issuer, the Secret's labels.
	var cert *unstructured.Unstructured
	testsupport.Eventually(t, waitTimeout, "the Certificate of web", func() error {
		cert = &unstructured.Unstructured{}
		cert.SetGroupVersionKind(hubnames.CertificateGVK)
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lb-web-tls"}, cert)
	})
	spec, _ := cert.Object["spec"].(map[string]any)
	want := map[string]any{
		"secretName": "lb-web-tls",
		"dnsNames":   []any{webHost},
		"issuerRef":  map[string]any{"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "tenant-issuer"},
		"secretTemplate": map[string]any{"labels": map[string]any{
			kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue, kubelbv1alpha1.LabelLoadBalancerName: "web"}},
	}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("Certificate spec (-want +got):\n%s", diff)
	}
	if ref := metav1.GetControllerOf(cert); ref == nil || ref.Kind != "LoadBalancer" || ref.Name != "web" {
		t.Errorf("Certificate controller %+v", ref)
	}

	// The hostname-only tenant gets kubelb-ingress, annotated with both hostnames.
	waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, func(svc *corev1.Service) error {
		if got, want := svc.Annotations[AnnotationDNSHostname], "planted.hn.apps.example.test,shop.example.org,"+webHost; got != want {
			return fmt.Errorf("DNS annotation %q, want %q", got, want)
		}
		return nil
	})
	waitHostname(t, c, ns, "web", &kubelbv1alpha1.HostnameStatus{Hostname: webHost, DNSRecordCreated: true})
	waitHostname(t, c, ns, "explicit", &kubelbv1alpha1.HostnameStatus{Hostname: "shop.example.org", DNSRecordCreated: true})
	// "planted": its Certificate is not kubelb's: the condition says so, the foreign one stays.
	objects.WaitFor(t, c, waitTimeout, client.ObjectKey{Namespace: ns, Name: "planted"}, &kubelbv1alpha1.LoadBalancer{}, func(got *kubelbv1alpha1.LoadBalancer) error {
		cond := meta.FindStatusCondition(got.Status.Conditions, loadbalancer.ConditionHostname)
		if cond == nil || cond.Reason != loadbalancer.ReasonCertificateFailed {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})

	if err := c.Get(ctx, client.ObjectKeyFromObject(cert), cert); err != nil {
		t.Fatal(err)
	}
	certRV := cert.GetResourceVersion()

	// Play cert-manager: fill web's Secret as it would (labels of the secretTemplate, its
	// annotation). Also a Secret for "planted" that its foreign Certificate would make.
	crt, ca := testCert(t, webHost)
	plant, _ := testCert(t, "planted.hn.apps.example.test")
	for name, data := range map[string]map[string][]byte{"web": crt, "planted": plant} {
		secretName := hubnames.HostnameSecretName(name)
		if err := c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName,
				Labels:      map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue, kubelbv1alpha1.LabelLoadBalancerName: name},
				Annotations: map[string]string{hubnames.AnnotationCertificateName: secretName}},
			Type: corev1.SecretTypeTLS, Data: data,
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitHostname(t, c, ns, "web", &kubelbv1alpha1.HostnameStatus{Hostname: webHost, TLSEnabled: true, DNSRecordCreated: true})
	// The reconcile that saw the Secret left the unchanged Certificate alone.
	settled := &unstructured.Unstructured{}
	settled.SetGroupVersionKind(hubnames.CertificateGVK)
	if err := c.Get(ctx, client.ObjectKeyFromObject(cert), settled); err != nil {
		t.Fatal(err)
	}
	if settled.GetResourceVersion() != certRV {
		t.Errorf("the Certificate was written again (resourceVersion %s → %s)", certRV, settled.GetResourceVersion())
	}

	// What envoycp builds: the DNS settings, and only web's Secret (planted's Certificate is
	// not the manager's).
	in, err := envoycp.BuildInput(ctx, c, c, managerNS, ns, translate.Options{ListenerAddress: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if in.DNS.WildcardDomain != "*.apps.example.test" || !in.DNS.AllowExplicitHostnames || !slices.Contains(in.DNS.ReservedDomains, "*.apps.example.test") {
		t.Errorf("Input.DNS %+v", in.DNS)
	}
	var keys []string
	for k := range in.HostnameSecrets {
		keys = append(keys, k)
	}
	if !slices.Equal(keys, []string{"web"}) {
		t.Errorf("Input.HostnameSecrets of %v, want web only", keys)
	}

	// A real Envoy serves web's hostname over HTTPS with the Secret's certificate.
	out, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := translator.Translate(out.Config)
	if err != nil {
		t.Fatal(err)
	}
	certs := xdstest.New(t)
	srv := xds.NewServer(testr.NewWithOptions(t, testr.Options{Verbosity: 1}), certs.ServerTLS())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(sctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	if _, err := srv.SetTenant(ctx, ns, res); err != nil {
		t.Fatal(err)
	}
	boot := certs.Bootstrap(t, bootstrap.Options{Tenant: ns, XDSAddress: lis.Addr().String(), AdminAddress: "127.0.0.1:0"})
	testsupport.StartEnvoy(t, "hostname-proxy", boot, testsupport.EnvoyOptions{Node: "hostname-proxy", Concurrency: 1})
	ingress := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubelbv1alpha1.IngressServiceName}, ingress); err != nil {
		t.Fatal(err)
	}
	var https int32
	for _, sp := range ingress.Spec.Ports {
		if sp.Port == 443 {
			https = sp.TargetPort.IntVal
		}
	}
	addr := testsupport.Loopback(int(https))
	testsupport.Eventually(t, waitTimeout, "https://"+webHost+" through Envoy", func() error {
		pod, err := httpsGet(addr, webHost, ca)
		if err != nil {
			return err
		}
		if pod != "web" {
			return fmt.Errorf("answered by %q", pod)
		}
		return nil
	})

	// Without the wildcard domain (the Tenant sets it empty) web has no hostname: its
	// Certificate goes and the annotation lists only the explicit hostname.
	if err := c.Get(ctx, client.ObjectKey{Name: "hn"}, tn); err != nil {
		t.Fatal(err)
	}
	tn.Spec.DNS.WildcardDomain = ptr.To("")
	if err := c.Update(ctx, tn); err != nil {
		t.Fatal(err)
	}
	waitHostname(t, c, ns, "web", nil)
	waitGone(t, c, cert)
	waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, func(svc *corev1.Service) error {
		if got := svc.Annotations[AnnotationDNSHostname]; got != "shop.example.org" {
			return fmt.Errorf("DNS annotation %q", got)
		}
		return nil
	})
	// Without DNS annotations (the Tenant turns them off) the annotation goes and
	// dnsRecordCreated turns false.
	if err := c.Get(ctx, client.ObjectKey{Name: "hn"}, tn); err != nil {
		t.Fatal(err)
	}
	tn.Spec.DNS.UseDNSAnnotations = ptr.To(false)
	if err := c.Update(ctx, tn); err != nil {
		t.Fatal(err)
	}
	waitHostname(t, c, ns, "explicit", &kubelbv1alpha1.HostnameStatus{Hostname: "shop.example.org"})
	// Without explicit hostnames nothing is left: kubelb-ingress goes with the last hostname.
	if err := c.Get(ctx, client.ObjectKey{Name: "hn"}, tn); err != nil {
		t.Fatal(err)
	}
	tn.Spec.DNS.AllowExplicitHostnames = nil
	if err := c.Update(ctx, tn); err != nil {
		t.Fatal(err)
	}
	waitHostname(t, c, ns, "explicit", nil)
	waitGone(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kubelbv1alpha1.IngressServiceName}})
	got := &kubelbv1alpha1.LoadBalancer{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "explicit"}, got); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, loadbalancer.ConditionHostname); cond == nil || cond.Reason != loadbalancer.ReasonHostnameInvalid {
		t.Errorf("explicit's Hostname condition %+v", cond)
	}
}

// installCertificateCRD serves cert-manager's Certificate API (the CRD of its Go module).
func installCertificateCRD(t *testing.T, c client.Client) {
	t.Helper()
	crd, err := certmanagercrds.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, waitTimeout, "the Certificate CRD to be established", func() error {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(crd), got); err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
}

// waitHostname waits until the LoadBalancer's status.hostname is want.
func waitHostname(t *testing.T, c client.Client, ns, name string, want *kubelbv1alpha1.HostnameStatus) {
	t.Helper()
	objects.WaitFor(t, c, waitTimeout, client.ObjectKey{Namespace: ns, Name: name}, &kubelbv1alpha1.LoadBalancer{}, func(lb *kubelbv1alpha1.LoadBalancer) error {
		if diff := cmp.Diff(want, lb.Status.Hostname); diff != "" {
			return fmt.Errorf("(-want +got):\n%s\nconditions %+v", diff, lb.Status.Conditions)
		}
		return nil
	})
}

// freeRange finds n consecutive ports free on 127.0.0.1.
func freeRange(t *testing.T, n int32) portalloc.Range {
	t.Helper()
	for range 50 {
		base := int32(testsupport.FreePort(t))
		if base+n > 65535 {
			continue
		}
		free := true
		for p := base + 1; p < base+n && free; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p))))
			if err != nil {
				free = false
				continue
			}
			_ = l.Close()
		}
		if free {
			return portalloc.Range{Min: base, Max: base + n - 1}
		}
	}
	t.Fatal("no free port range")
	return portalloc.Range{}
}

// httpsGet sends GET / over TLS with sni, trusting ca, to addr and returns the pod that answered.
func httpsGet(addr, sni string, ca *x509.CertPool) (string, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{ServerName: sni, RootCAs: ca, MinVersion: tls.VersionTLS12},
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + sni + "/hello")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	return resp.Header.Get(testsupport.HeaderPod), nil
}

// testCert plays the issuer: a self-signed certificate for host (Secret data) and a pool
// trusting it.
func testCert(t *testing.T, host string) (map[string][]byte, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, pool
}
