package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/certmanagercrds"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
	"kubelb.dev/kubelb/internal/translate"
)

// A certificate authority and a serving certificate it signed, as a tenant's TLS Secret holds.
type testCert struct {
	ca       *x509.Certificate
	pool     *x509.CertPool
	crt, key []byte
}

// newCert makes a CA and a certificate for names signed by it.
func newCert(t *testing.T, names ...string) testCert {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e CA " + names[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testCert{ca: ca, pool: pool,
		crt: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
}

func tlsSecret(namespace, name string, c testCert) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: c.crt, corev1.TLSPrivateKeyKey: c.key}}
}

// waitHTTP waits until a request answers with status want from a backend whose Pod name
// starts with pod ("" for any, or for none when want is not 200).
func waitHTTP(t *testing.T, addr, host, path string, ca *x509.CertPool, header http.Header, want int, pod string) framework.HTTPResult {
	t.Helper()
	var last framework.HTTPResult
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("%s %s%s → %d %s", addr, host, path, want, pod), func() error {
		r, err := framework.HTTPRequest(addr, host, path, ca, header)
		if err != nil {
			return err
		}
		last = r
		if r.Status != want {
			return fmt.Errorf("status %d (%s), want %d", r.Status, r.Body, want)
		}
		if pod != "" && !strings.HasPrefix(r.Pod, pod) {
			return fmt.Errorf("answered by %q, want %s-*", r.Pod, pod)
		}
		return nil
	})
	return last
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func get(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
		t.Fatal(err)
	}
}

// waitCondition waits until a condition of the listed ones (from list()) has the status and
// reason wanted.
func waitCondition(t *testing.T, what string, list func() ([]metav1.Condition, error), typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("%s: %s=%s (%s)", what, typ, status, reason), func() error {
		conds, err := list()
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(conds, typ)
		if c == nil {
			return fmt.Errorf("no %s condition in %v", typ, conds)
		}
		if c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("%s=%s (%s: %s)", typ, c.Status, c.Reason, c.Message)
		}
		return nil
	})
}

// routeParentConditions returns the conditions kubelb wrote for the first parent of a route.
func routeParentConditions(c client.Client, route client.Object, parents func() []gwv1.RouteParentStatus) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(route), route); err != nil {
			return nil, err
		}
		for _, p := range parents() {
			if p.ControllerName == "kubelb.k8c.io/gateway-controller" {
				return p.Conditions, nil
			}
		}
		return nil, fmt.Errorf("no parent status of kubelb yet")
	}
}

func TestL7EndToEnd(t *testing.T) {
	pair := testenv.StartPair(t)
	// cert-manager's CRDs are on the hub (its controller is played below), before the manager
	// starts, as in a hub where cert-manager is installed.
	installCertificateCRD(t, pair.Hub.Client)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 2, "--enable-gateway-api")
	// The manager deploys a tenant's Envoy fleet (here: writes its bootstrap) once the tenant
	// has something to serve; the harness then plays the kubelet and starts it.
	startEnvoy := func() {
		if a.Envoy == nil {
			a.StartEnvoy(framework.EnvoyBootstrap)
		}
	}
	tc := pair.Tenant.Client
	ctx := context.Background()

	const ns = "shop"
	a.CreateNamespace(ns, map[string]string{"team": "shop"})
	a.CreateBackendService(ns, "web", corev1.ServicePort{Name: "http", Port: 80})
	a.CreateBackendService(ns, "api", corev1.ServicePort{Name: "http", Port: 80})
	a.CreateBackendService(ns, "grpc", corev1.ServicePort{Name: "grpc", Port: 9000, AppProtocol: ptr.To("kubernetes.io/h2c")})
	a.CreateBackendService(ns, "secure", corev1.ServicePort{Name: "https", Port: 8443})
	a.CreateBackendService(ns, "echo", corev1.ServicePort{Name: "tcp", Port: 7000})
	appCert := newCert(t, "app.example.com")
	gwCert := newCert(t, "*.gw.example.com")
	create(t, tc, tlsSecret(ns, "app-tls", appCert), tlsSecret(ns, "gw-tls", gwCert))

	t.Run("Ingress: host and path routing, the default backend, and the address copied back", func(t *testing.T) {
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: networkingv1.IngressSpec{
				IngressClassName: ptr.To(kubelbv1alpha1.DefaultClass),
				DefaultBackend:   &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "api", Port: networkingv1.ServiceBackendPort{Number: 80}}},
				TLS:              []networkingv1.IngressTLS{{Hosts: []string{"app.example.com"}, SecretName: "app-tls"}},
				Rules: []networkingv1.IngressRule{{Host: "app.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{
						{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
						{Path: "/api", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "api", Port: networkingv1.ServiceBackendPort{Name: "http"}}}},
					},
				}}}},
			},
		}
		create(t, tc, ing)
		startEnvoy()
		a.ServeBackend(ns, "web", 80, testsupport.StartHTTPBackend)
		a.ServeBackend(ns, "api", 80, testsupport.StartHTTPBackend)
		httpPort, _ := a.IngressPorts()
		addr := testsupport.Loopback(int(httpPort))
		waitHTTP(t, addr, "app.example.com", "/", nil, nil, http.StatusOK, "web-")
		waitHTTP(t, addr, "app.example.com", "/api/items", nil, nil, http.StatusOK, "api-")
		waitHTTP(t, addr, "app.example.com", "/apix", nil, nil, http.StatusOK, "web-") // Prefix matches whole path elements
		waitHTTP(t, addr, "unknown.example.com", "/", nil, nil, http.StatusOK, "api-") // the default backend

		testsupport.Eventually(t, time.Minute, "the Ingress address", func() error {
			get(t, tc, ing)
			if len(ing.Status.LoadBalancer.Ingress) == 0 || !strings.HasPrefix(ing.Status.LoadBalancer.Ingress[0].IP, "127.0.1.") {
				return fmt.Errorf("status.loadBalancer %+v", ing.Status.LoadBalancer)
			}
			return nil
		})
		if len(ing.Finalizers) != 0 {
			t.Errorf("the Ingress has finalizers %v; Layer 7 objects carry none (deleting one is immediate)", ing.Finalizers)
		}
	})

	t.Run("Ingress HTTPS: the client verifies the tenant's certificate for the SNI", func(t *testing.T) {
		_, httpsPort := a.IngressPorts()
		addr := testsupport.Loopback(int(httpsPort))
		r := waitHTTP(t, addr, "app.example.com", "/", appCert.pool, nil, http.StatusOK, "web-")
		t.Logf("HTTPS answered by %s over %s", r.Pod, r.Proto)
		if _, err := framework.HTTPRequest(addr, "app.example.com", "/", gwCert.pool, nil); err == nil {
			t.Fatal("a client trusting another CA accepted the certificate")
		}
	})

	t.Run("a TLS entry without a Secret is served with the tenant's default certificate", func(t *testing.T) {
		// The platform team's certificate, in the manager's namespace, labelled so that the
		// manager sees it; the Tenant names it.
		def := newCert(t, "default.example.com")
		secret := tlsSecret(framework.ManagerNamespace, "default-ingress-cert", def)
		secret.Labels = map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}
		create(t, pair.Hub.Client, secret)
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "nocert", Namespace: ns},
			Spec: networkingv1.IngressSpec{
				IngressClassName: ptr.To(kubelbv1alpha1.DefaultClass),
				TLS:              []networkingv1.IngressTLS{{Hosts: []string{"default.example.com"}}},
				Rules: []networkingv1.IngressRule{{Host: "default.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
				}}}},
			},
		}
		create(t, tc, ing)
		httpPort, httpsPort := a.IngressPorts()
		addr := testsupport.Loopback(int(httpsPort))
		// Without a default certificate the host is served over HTTP only.
		waitHTTP(t, testsupport.Loopback(int(httpPort)), "default.example.com", "/", nil, nil, http.StatusOK, "web-")
		if _, err := framework.HTTPRequest(addr, "default.example.com", "/", def.pool, nil); err == nil {
			t.Fatal("the host was served over HTTPS before the tenant had a default certificate")
		}
		tenant := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
		objects.Update(t, pair.Hub.Client, tenant, func(tn *kubelbv1alpha1.Tenant) {
			tn.Spec.Ingress.DefaultCertificate = &kubelbv1alpha1.SecretRef{Namespace: framework.ManagerNamespace, Name: secret.Name}
		})
		t.Cleanup(func() {
			objects.Update(t, pair.Hub.Client, tenant, func(tn *kubelbv1alpha1.Tenant) { tn.Spec.Ingress.DefaultCertificate = nil })
		})
		waitHTTP(t, addr, "default.example.com", "/", def.pool, nil, http.StatusOK, "web-")
		// The hosts with their own certificate keep it.
		waitHTTP(t, addr, "app.example.com", "/", appCert.pool, nil, http.StatusOK, "web-")
	})

	t.Run("HTTP to HTTPS: an Ingress annotated ssl-redirect, and the Tenant's spec.ingress.sslRedirect, answer its TLS hosts with 301", func(t *testing.T) {
		shopCert := newCert(t, "shop.example.com")
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "secure-shop", Namespace: ns, Annotations: map[string]string{kubelbv1alpha1.AnnotationSSLRedirect: "true"}},
			Spec: networkingv1.IngressSpec{
				IngressClassName: ptr.To(kubelbv1alpha1.DefaultClass),
				TLS:              []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}},
				Rules: []networkingv1.IngressRule{{Host: "shop.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
				}}}},
			},
		}
		create(t, tc, tlsSecret(ns, "shop-tls", shopCert), ing)
		startEnvoy()
		httpPort, httpsPort := a.IngressPorts()
		plain, secure := testsupport.Loopback(int(httpPort)), testsupport.Loopback(int(httpsPort))
		r := waitHTTP(t, plain, "shop.example.com", "/cart?item=1", nil, nil, http.StatusMovedPermanently, "")
		if loc := r.Header.Get("Location"); loc != "https://shop.example.com/cart?item=1" {
			t.Errorf("Location %q, want https://shop.example.com/cart?item=1", loc)
		}
		waitHTTP(t, secure, "shop.example.com", "/cart", shopCert.pool, nil, http.StatusOK, "web-")
		// The tenant's setting is off: app.example.com, a TLS host of an Ingress without the
		// annotation, is served over HTTP.
		waitHTTP(t, plain, "app.example.com", "/", nil, nil, http.StatusOK, "web-")

		// The Tenant turns it on: app.example.com redirects; the annotation "false" keeps
		// shop.example.com on HTTP.
		objects.Update(t, pair.Hub.Client, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, func(tenant *kubelbv1alpha1.Tenant) {
			tenant.Spec.Ingress.SSLRedirect = ptr.To(true)
		})
		objects.Update(t, tc, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "secure-shop", Namespace: ns}}, func(ing *networkingv1.Ingress) {
			ing.Annotations[kubelbv1alpha1.AnnotationSSLRedirect] = "false"
		})
		r = waitHTTP(t, plain, "app.example.com", "/api", nil, nil, http.StatusMovedPermanently, "")
		if loc := r.Header.Get("Location"); loc != "https://app.example.com/api" {
			t.Errorf("Location %q, want https://app.example.com/api", loc)
		}
		waitHTTP(t, plain, "shop.example.com", "/", nil, nil, http.StatusOK, "web-")
		objects.Update(t, pair.Hub.Client, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, func(tenant *kubelbv1alpha1.Tenant) {
			tenant.Spec.Ingress.SSLRedirect = nil
		})
		waitHTTP(t, plain, "app.example.com", "/", nil, nil, http.StatusOK, "web-")
	})

	t.Run("an Ingress whose TLS Secret is missing gets one Warning Event from the hub, not a storm", func(t *testing.T) {
		startEnvoy()
		lateCert := newCert(t, "late.example.com")
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ns},
			Spec: networkingv1.IngressSpec{
				IngressClassName: ptr.To(kubelbv1alpha1.DefaultClass),
				TLS:              []networkingv1.IngressTLS{{Hosts: []string{"late.example.com"}, SecretName: "late-tls"}},
				Rules: []networkingv1.IngressRule{{Host: "late.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
				}}}},
			},
		}
		create(t, tc, ing)
		// The hub's problems on the Ingress: Warning Events naming the missing Secret, each
		// occurrence counted (a repeated Event becomes a series).
		missing := func() (n int32, reasons []string) {
			evs := &eventsv1.EventList{}
			if err := tc.List(ctx, evs, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs.Items {
				if ev.Regarding.UID != ing.UID || ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "late-tls") {
					continue
				}
				reasons = append(reasons, ev.Reason+": "+ev.Note)
				n++
				if ev.Series != nil {
					n += ev.Series.Count - 1
				}
			}
			return n, reasons
		}
		testsupport.Eventually(t, time.Minute, "a Warning Event naming the missing Secret", func() error {
			if n, _ := missing(); n == 0 {
				return fmt.Errorf("none yet")
			}
			return nil
		})
		// A change of the Ingress that leaves the problem as it is: the ccm mirrors it and the
		// manager judges the new Route, and no second Event follows.
		update := func() error {
			get(t, tc, ing)
			paths := &ing.Spec.Rules[0].HTTP.Paths
			*paths = append(*paths, networkingv1.HTTPIngressPath{Path: "/more", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: (*paths)[0].Backend})
			return tc.Update(ctx, ing)
		}
		testsupport.Eventually(t, time.Minute, "updating the Ingress", update)
		testsupport.Eventually(t, time.Minute, "the manager's verdict on the changed Route", func() error {
			rt := &kubelbv1alpha1.Route{}
			if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-a", Name: string(ing.UID)}, rt); err != nil {
				return err
			}
			c := meta.FindStatusCondition(rt.Status.Resources.Route.Conditions, "Programmed")
			if src := rt.Spec.Source.Kubernetes; src == nil || !strings.Contains(fmt.Sprint(src.Route.Object), "/more") || c == nil || c.ObservedGeneration != rt.Generation {
				return fmt.Errorf("Programmed %+v of generation %d", c, rt.Generation)
			}
			return nil
		})
		if n, reasons := missing(); n != 1 {
			t.Errorf("after the change: %d Warning Events about the missing Secret, want 1: %q", n, reasons)
		}
		// The Secret arrives: the hub serves the host over HTTPS (proof that the hub and the
		// ccm went on working), and the problem was told exactly once.
		create(t, tc, tlsSecret(ns, "late-tls", lateCert))
		_, httpsPort := a.IngressPorts()
		waitHTTP(t, testsupport.Loopback(int(httpsPort)), "late.example.com", "/", lateCert.pool, nil, http.StatusOK, "web-")
		if n, reasons := missing(); n != 1 {
			t.Errorf("%d Warning Events about the missing Secret, want 1: %q", n, reasons)
		} else {
			t.Logf("the Ingress was told: %s", reasons[0])
		}
		// The subtests after this one see the tenant as they would without it.
		if err := tc.Delete(ctx, ing); err != nil {
			t.Errorf("deleting Ingress late: %v", err)
		}
		if err := tc.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late-tls"}}); err != nil {
			t.Errorf("deleting Secret late-tls: %v", err)
		}
	})

	t.Run("an Ingress written for ingress-nginx: its rewrite-target is served, and one Warning Event names its snippet and the annotations kubelb does not honour", func(t *testing.T) {
		startEnvoy()
		const N = translate.NginxAnnotationPrefix
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "from-nginx", Namespace: ns, Annotations: map[string]string{
				N + "rewrite-target":        "/$2",
				N + "configuration-snippet": "more_set_headers \"X-From: nginx\";",
				N + "limit-connections":     "5",
			}},
			Spec: networkingv1.IngressSpec{
				IngressClassName: ptr.To(kubelbv1alpha1.DefaultClass),
				Rules: []networkingv1.IngressRule{{Host: "nginx.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/shop(/|$)(.*)", PathType: ptr.To(networkingv1.PathTypeImplementationSpecific),
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
				}}}},
			},
		}
		create(t, tc, ing)
		httpPort, _ := a.IngressPorts()
		plain := testsupport.Loopback(int(httpPort))
		// The backend answers with the path it got: the rewritten one.
		r := waitHTTP(t, plain, "nginx.example.com", "/shop/cart/1", nil, nil, http.StatusOK, "web-")
		if !strings.HasSuffix(r.Body, " /cart/1") {
			t.Errorf("the backend got %q, want the path /cart/1", r.Body)
		}
		unsupported := func() (n int32, notes []string) {
			evs := &eventsv1.EventList{}
			if err := tc.List(ctx, evs, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs.Items {
				if ev.Regarding.UID != ing.UID || ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "configuration-snippet") {
					continue
				}
				notes = append(notes, ev.Reason+": "+ev.Note)
				n++
				if ev.Series != nil {
					n += ev.Series.Count - 1
				}
			}
			return n, notes
		}
		testsupport.Eventually(t, time.Minute, "a Warning Event naming the snippet", func() error {
			if n, _ := unsupported(); n == 0 {
				return fmt.Errorf("none yet")
			}
			return nil
		})
		// A change that leaves the annotations as they are: no second Event.
		testsupport.Eventually(t, time.Minute, "updating the Ingress", func() error {
			get(t, tc, ing)
			paths := &ing.Spec.Rules[0].HTTP.Paths
			*paths = append(*paths, networkingv1.HTTPIngressPath{Path: "/more", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: (*paths)[0].Backend})
			return tc.Update(ctx, ing)
		})
		waitHTTP(t, plain, "nginx.example.com", "/more", nil, nil, http.StatusOK, "web-")
		testsupport.Eventually(t, time.Minute, "the manager's verdict on the changed Route", func() error {
			rt := &kubelbv1alpha1.Route{}
			if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-a", Name: string(ing.UID)}, rt); err != nil {
				return err
			}
			c := meta.FindStatusCondition(rt.Status.Resources.Route.Conditions, "Programmed")
			if c == nil || c.ObservedGeneration != rt.Generation {
				return fmt.Errorf("Programmed %+v of generation %d", c, rt.Generation)
			}
			return nil
		})
		n, notes := unsupported()
		if n != 1 {
			t.Fatalf("%d Warning Events naming the snippet, want 1: %q", n, notes)
		}
		if !strings.Contains(notes[0], translate.ReasonUnsupportedAnnotation) || !strings.Contains(notes[0], "limit-connections") {
			t.Errorf("the Event %q does not name the reason %s and limit-connections", notes[0], translate.ReasonUnsupportedAnnotation)
		}
		t.Logf("the Ingress was told: %s", notes[0])
		if err := tc.Delete(ctx, ing); err != nil {
			t.Errorf("deleting Ingress from-nginx: %v", err)
		}
	})

	t.Run("a certificate rotated in the tenant reaches Envoy with zero failed requests", func(t *testing.T) {
		_, httpsPort := a.IngressPorts()
		addr := testsupport.Loopback(int(httpsPort))
		rotated := newCert(t, "app.example.com")
		// The clients of the rotation trust both CAs, as during a real CA rollover.
		both := x509.NewCertPool()
		both.AddCert(appCert.ca)
		both.AddCert(rotated.ca)
		var failures, successes atomic.Int64
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 3000; i++ { // bounded
				select {
				case <-stop:
					return
				default:
				}
				if r, err := framework.HTTPRequest(addr, "app.example.com", "/", both, nil); err != nil || r.Status != http.StatusOK {
					failures.Add(1)
				} else {
					successes.Add(1)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-tls", Namespace: ns}}
		get(t, tc, sec)
		sec.Data = map[string][]byte{corev1.TLSCertKey: rotated.crt, corev1.TLSPrivateKeyKey: rotated.key}
		if err := tc.Update(ctx, sec); err != nil {
			t.Fatal(err)
		}
		waitHTTP(t, addr, "app.example.com", "/", rotated.pool, nil, http.StatusOK, "web-")
		// Keep the clients going well past the switch, so requests on old and new
		// connections around it are all counted.
		seen := successes.Load() + failures.Load()
		testsupport.Eventually(t, 30*time.Second, "100 more requests after the rotation", func() error {
			if n := successes.Load() + failures.Load(); n < seen+100 {
				return fmt.Errorf("%d so far", n-seen)
			}
			return nil
		})
		close(stop)
		<-done
		t.Logf("during the rotation: %d requests, %d failed", successes.Load()+failures.Load(), failures.Load())
		if failures.Load() != 0 {
			t.Fatalf("%d of %d requests failed during the certificate rotation", failures.Load(), successes.Load()+failures.Load())
		}
		appCert = rotated
	})

	var gw *gwv1.Gateway
	var gwPorts map[int32]int32
	t.Run("Gateway with HTTP, HTTPS, TLS passthrough and TCP listeners gets its address", func(t *testing.T) {
		testsupport.Eventually(t, time.Minute, "GatewayClass kubelb Accepted", func() error {
			gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultClass}}
			if err := tc.Get(ctx, client.ObjectKeyFromObject(gc), gc); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(gc.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted)) {
				return fmt.Errorf("conditions %v", gc.Status.Conditions)
			}
			return nil
		})
		all := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}}
		gw = &gwv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: ns},
			Spec: gwv1.GatewaySpec{GatewayClassName: kubelbv1alpha1.DefaultClass, Listeners: []gwv1.Listener{
				{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80, AllowedRoutes: all},
				{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: ptr.To(gwv1.Hostname("*.gw.example.com")), AllowedRoutes: all,
					TLS: &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeTerminate), CertificateRefs: []gwv1.SecretObjectReference{{Name: "gw-tls"}}}},
				{Name: "passthrough", Protocol: gwv1.TLSProtocolType, Port: 8443, Hostname: ptr.To(gwv1.Hostname("secure.example.com")),
					TLS: &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModePassthrough)}},
				{Name: "tcp", Protocol: gwv1.TCPProtocolType, Port: 7000},
			}},
		}
		create(t, tc, gw)
		startEnvoy()
		testsupport.Eventually(t, 2*time.Minute, "the Gateway's address", func() error {
			get(t, tc, gw)
			if len(gw.Status.Addresses) == 0 || !strings.HasPrefix(gw.Status.Addresses[0].Value, "127.0.1.") {
				return fmt.Errorf("status.addresses %v", gw.Status.Addresses)
			}
			return nil
		})
		gwPorts = a.GatewayPorts(string(gw.UID), 80, 443, 8443, 7000)
	})

	t.Run("HTTPRoute: path, header and query matches; header modifiers, redirect and rewrite", func(t *testing.T) {
		pathPrefix := func(p string) *gwv1.HTTPPathMatch {
			return &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(p)}
		}
		ref := func(name string, weight int32) gwv1.HTTPBackendRef {
			return gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr.To(gwv1.PortNumber(80))}, Weight: ptr.To(weight)}}
		}
		route := &gwv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "store", Namespace: ns},
			Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
				Hostnames:       []gwv1.Hostname{"store.gw.example.com"},
				Rules: []gwv1.HTTPRouteRule{
					{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchExact), Value: ptr.To("/exact")}}}, BackendRefs: []gwv1.HTTPBackendRef{ref("api", 1)}},
					{Matches: []gwv1.HTTPRouteMatch{{Path: pathPrefix("/"), Headers: []gwv1.HTTPHeaderMatch{{Name: "x-env", Value: "canary"}}}}, BackendRefs: []gwv1.HTTPBackendRef{ref("api", 1)}},
					{Matches: []gwv1.HTTPRouteMatch{{Path: pathPrefix("/"), QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "v", Value: "2"}}}}, BackendRefs: []gwv1.HTTPBackendRef{ref("api", 1)}},
					{Matches: []gwv1.HTTPRouteMatch{{Path: pathPrefix("/old")}}, Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
						RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https"), StatusCode: ptr.To(301)}}}},
					{Matches: []gwv1.HTTPRouteMatch{{Path: pathPrefix("/v1")}}, Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterURLRewrite,
						URLRewrite: &gwv1.HTTPURLRewriteFilter{Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("/v2")}}}}, BackendRefs: []gwv1.HTTPBackendRef{ref("web", 1)}},
					{Matches: []gwv1.HTTPRouteMatch{{Path: pathPrefix("/")}}, BackendRefs: []gwv1.HTTPBackendRef{ref("web", 1)}, Filters: []gwv1.HTTPRouteFilter{
						{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{{Name: "X-Via", Value: "kubelb"}}}},
						{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "X-Served-By", Value: "kubelb"}}}},
					}},
				},
			},
		}
		create(t, tc, route)
		addr := testsupport.Loopback(int(gwPorts[80]))
		host := "store.gw.example.com"
		r := waitHTTP(t, addr, host, "/", nil, nil, http.StatusOK, "web-")
		if r.Header.Get(testsupport.HeaderSeenPrefix+"Via") != "kubelb" || r.Header.Get("X-Served-By") != "kubelb" {
			t.Errorf("header modifiers not applied: request X-Via %q, response X-Served-By %q", r.Header.Get(testsupport.HeaderSeenPrefix+"Via"), r.Header.Get("X-Served-By"))
		}
		waitHTTP(t, addr, host, "/exact", nil, nil, http.StatusOK, "api-")
		waitHTTP(t, addr, host, "/x", nil, http.Header{"X-Env": {"canary"}}, http.StatusOK, "api-")
		waitHTTP(t, addr, host, "/x?v=2", nil, nil, http.StatusOK, "api-")
		red := waitHTTP(t, addr, host, "/old/page", nil, nil, http.StatusMovedPermanently, "")
		if loc := red.Header.Get("Location"); loc != "https://store.gw.example.com/old/page" {
			t.Errorf("redirect Location %q", loc)
		}
		rw := waitHTTP(t, addr, host, "/v1/items", nil, nil, http.StatusOK, "web-")
		if !strings.HasSuffix(rw.Body, " /v2/items") {
			t.Errorf("the backend saw %q, want the path rewritten to /v2/items", rw.Body)
		}
		// The same route over the HTTPS listener, with the Gateway's certificate.
		waitHTTP(t, testsupport.Loopback(int(gwPorts[443])), host, "/exact", gwCert.pool, nil, http.StatusOK, "api-")
		waitCondition(t, "HTTPRoute store", routeParentConditions(tc, route, func() []gwv1.RouteParentStatus { return route.Status.Parents }),
			string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
		waitCondition(t, "HTTPRoute store", routeParentConditions(tc, route, func() []gwv1.RouteParentStatus { return route.Status.Parents }),
			string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))
		testsupport.Eventually(t, time.Minute, "attachedRoutes of listener http", func() error {
			get(t, tc, gw)
			for _, l := range gw.Status.Listeners {
				if l.Name == "http" && l.AttachedRoutes >= 1 {
					return nil
				}
			}
			return fmt.Errorf("listeners %+v", gw.Status.Listeners)
		})
	})

	t.Run("HTTPRoute weighted split over a bounded number of requests", func(t *testing.T) {
		route := &gwv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "split", Namespace: ns},
			Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw", SectionName: ptr.To(gwv1.SectionName("http"))}}},
				Hostnames:       []gwv1.Hostname{"split.example.com"},
				Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{
					{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr.To(gwv1.PortNumber(80))}, Weight: ptr.To(int32(80))}},
					{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "api", Port: ptr.To(gwv1.PortNumber(80))}, Weight: ptr.To(int32(20))}},
				}}},
			},
		}
		create(t, tc, route)
		addr := testsupport.Loopback(int(gwPorts[80]))
		waitHTTP(t, addr, "split.example.com", "/", nil, nil, http.StatusOK, "")
		const n = 400
		counts := map[string]int{}
		for i := 0; i < n; i++ {
			r, err := framework.HTTPRequest(addr, "split.example.com", "/", nil, nil)
			if err != nil || r.Status != http.StatusOK {
				t.Fatalf("request %d: %v %+v", i, err, r)
			}
			counts[strings.SplitN(r.Pod, "-", 2)[0]]++
		}
		// 80/20 over 400 requests: the api share has mean 80 and standard deviation 8; the
		// bounds are more than 5 standard deviations wide, so a correct split fails them
		// with a probability below one in a million.
		t.Logf("weighted split over %d requests: %v", n, counts)
		if counts["web"]+counts["api"] != n || counts["api"] < 40 || counts["api"] > 120 {
			t.Fatalf("split %v, want about 320 web / 80 api", counts)
		}
	})

	t.Run("GRPCRoute routes a real gRPC call by service and method", func(t *testing.T) {
		route := &gwv1.GRPCRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "health", Namespace: ns},
			Spec: gwv1.GRPCRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw", SectionName: ptr.To(gwv1.SectionName("http"))}}},
				Rules: []gwv1.GRPCRouteRule{{
					Matches:     []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{Service: ptr.To("grpc.health.v1.Health"), Method: ptr.To("Check")}}},
					BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "grpc", Port: ptr.To(gwv1.PortNumber(9000))}}}},
				}},
			},
		}
		create(t, tc, route)
		a.ServeBackend(ns, "grpc", 9000, testsupport.StartGRPCBackend)
		addr := testsupport.Loopback(int(gwPorts[80]))
		testsupport.Eventually(t, time.Minute, "a gRPC health check through Envoy", func() error {
			r, err := testsupport.GRPCRoundTrip(addr)
			if err != nil {
				return err
			}
			if !strings.HasPrefix(r.Pod, "grpc-") {
				return fmt.Errorf("answered by %s", r.Pod)
			}
			return nil
		})
	})

	t.Run("a 60-second response and a 60-second gRPC stream are not cut; a request timeout the user sets is", func(t *testing.T) {
		// Envoy's own route timeout (15 s) would cut both; kubelb sets none unless asked.
		backend := func(name string) networkingv1.IngressBackend {
			return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}
		}
		ingress := func(name, host string, annotations map[string]string) *networkingv1.Ingress {
			return &networkingv1.Ingress{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
				Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(kubelbv1alpha1.DefaultClass),
					Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: backend("web")}},
					}}}}},
			}
		}
		watch := &gwv1.GRPCRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "watch", Namespace: ns},
			Spec: gwv1.GRPCRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw", SectionName: ptr.To(gwv1.SectionName("http"))}}},
				Rules: []gwv1.GRPCRouteRule{{
					Matches:     []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{Service: ptr.To("grpc.health.v1.Health"), Method: ptr.To("Watch")}}},
					BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "grpc", Port: ptr.To(gwv1.PortNumber(9000))}}}},
				}},
			},
		}
		create(t, tc, ingress("slow", "slow.example.com", nil),
			ingress("hurry", "hurry.example.com", map[string]string{kubelbv1alpha1.AnnotationRequestTimeout: "2s"}), watch)
		httpPort, _ := a.IngressPorts()
		ingressAddr, gwAddr := testsupport.Loopback(int(httpPort)), testsupport.Loopback(int(gwPorts[80]))
		// The annotation reached Envoy: a 5-second response is cut at 2 s (504).
		waitHTTP(t, ingressAddr, "hurry.example.com", testsupport.DelayPath+"5s", nil, nil, http.StatusGatewayTimeout, "")
		waitHTTP(t, ingressAddr, "slow.example.com", "/", nil, nil, http.StatusOK, "web-")
		testsupport.Eventually(t, time.Minute, "a Watch stream through the GRPCRoute", func() error {
			return testsupport.GRPCWatchHolds(gwAddr, time.Second)
		})

		const long = 60 * time.Second
		slow, stream := make(chan error, 1), make(chan error, 1)
		start := time.Now()
		go func() {
			r, err := framework.HTTPRequestWithin(ingressAddr, "slow.example.com", testsupport.DelayPath+long.String(), nil, nil, long+30*time.Second)
			switch {
			case err != nil:
				slow <- err
			case r.Status != http.StatusOK || !strings.HasPrefix(r.Pod, "web-"):
				slow <- fmt.Errorf("status %d from %q after %s (%s)", r.Status, r.Pod, time.Since(start).Round(time.Second), r.Body)
			default:
				slow <- nil
			}
		}()
		go func() { stream <- testsupport.GRPCWatchHolds(gwAddr, long) }()
		if err := <-slow; err != nil {
			t.Errorf("a %s response through the Ingress: %v", long, err)
		}
		if err := <-stream; err != nil {
			t.Errorf("a %s gRPC stream through the GRPCRoute: %v", long, err)
		}
		t.Logf("a %s response and a %s gRPC stream through Envoy took %s", long, long, time.Since(start).Round(time.Second))
	})

	t.Run("TLSRoute passes TLS through by SNI and TCPRoute carries TCP", func(t *testing.T) {
		tlsRoute := &gwv1.TLSRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "secure", Namespace: ns},
			Spec: gwv1.TLSRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw", SectionName: ptr.To(gwv1.SectionName("passthrough"))}}},
				Hostnames:       []gwv1.Hostname{"secure.example.com"},
				Rules:           []gwv1.TLSRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{Name: "secure", Port: ptr.To(gwv1.PortNumber(8443))}}}}},
			},
		}
		tcpRoute := &gwv1.TCPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
			Spec: gwv1.TCPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw", SectionName: ptr.To(gwv1.SectionName("tcp"))}}},
				Rules:           []gwv1.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{Name: "echo", Port: ptr.To(gwv1.PortNumber(7000))}}}}},
			},
		}
		create(t, tc, tlsRoute, tcpRoute)
		secure := a.ServeBackend(ns, "secure", 8443, func(t testsupport.TB, addr string, id testsupport.Identity) *testsupport.Backend {
			return testsupport.StartTLSBackend(t, addr, id, "secure.example.com")
		})
		a.ServeBackend(ns, "echo", 7000, testsupport.StartTCPBackend)
		passthrough := testsupport.Loopback(int(gwPorts[8443]))
		testsupport.Eventually(t, time.Minute, "TLS passthrough to the backend's own certificate", func() error {
			// The backend's certificate (not Envoy's) must verify: Envoy did not terminate.
			for _, b := range secure {
				if r, err := testsupport.TLSRoundTrip(passthrough, "secure.example.com", b.CA, "/"); err == nil && strings.HasPrefix(r.Pod, "secure-") {
					return nil
				}
			}
			return fmt.Errorf("no backend certificate verified through %s", passthrough)
		})
		testsupport.Eventually(t, time.Minute, "TCP echo through the TCPRoute", func() error {
			r, err := testsupport.TCPRoundTrip(testsupport.Loopback(int(gwPorts[7000])), "hello")
			if err != nil {
				return err
			}
			if !strings.HasPrefix(r.Pod, "echo-") {
				return fmt.Errorf("answered by %s", r.Pod)
			}
			return nil
		})
	})

	t.Run("every route kind shows kubelb's Accepted and ResolvedRefs in its status", func(t *testing.T) {
		grpc := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Name: "health", Namespace: ns}}
		tlsR := &gwv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Name: "secure", Namespace: ns}}
		tcpR := &gwv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns}}
		for name, c := range map[string]func() ([]metav1.Condition, error){
			"GRPCRoute health": routeParentConditions(tc, grpc, func() []gwv1.RouteParentStatus { return grpc.Status.Parents }),
			"TLSRoute secure":  routeParentConditions(tc, tlsR, func() []gwv1.RouteParentStatus { return tlsR.Status.Parents }),
			"TCPRoute echo":    routeParentConditions(tc, tcpR, func() []gwv1.RouteParentStatus { return tcpR.Status.Parents }),
		} {
			waitCondition(t, name, c, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
			waitCondition(t, name, c, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))
		}
		// The Gateway's status follows its routes' (one translation, two status writes, two
		// copies back): wait for it rather than read it once.
		testsupport.Eventually(t, time.Minute, "every listener Programmed with a route attached", func() error {
			get(t, tc, gw)
			for _, l := range gw.Status.Listeners {
				if !meta.IsStatusConditionTrue(l.Conditions, string(gwv1.ListenerConditionProgrammed)) || l.AttachedRoutes < 1 {
					return fmt.Errorf("listener %s: attachedRoutes %d, conditions %v", l.Name, l.AttachedRoutes, l.Conditions)
				}
			}
			if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)) {
				return fmt.Errorf("Gateway conditions %v", gw.Status.Conditions)
			}
			return nil
		})
	})

	t.Run("an invalid route gets its condition while the others keep serving", func(t *testing.T) {
		bad := &gwv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
			Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
				Hostnames:       []gwv1.Hostname{"broken.gw.example.com"},
				Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Name: "does-not-exist", Port: ptr.To(gwv1.PortNumber(80))}}}}}},
			},
		}
		create(t, tc, bad)
		waitCondition(t, "HTTPRoute broken", routeParentConditions(tc, bad, func() []gwv1.RouteParentStatus { return bad.Status.Parents }),
			string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonBackendNotFound))
		// Gateway API: a rule whose backends are all invalid answers 500.
		waitHTTP(t, testsupport.Loopback(int(gwPorts[80])), "broken.gw.example.com", "/", nil, nil, http.StatusInternalServerError, "")
		waitHTTP(t, testsupport.Loopback(int(gwPorts[80])), "store.gw.example.com", "/exact", nil, nil, http.StatusOK, "api-")
	})

	t.Run("deleting a route removes its configuration and its NodePort twins", func(t *testing.T) {
		tcpRoute := &gwv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns}}
		if err := tc.Delete(ctx, tcpRoute); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, time.Minute, "the twin echo-nodeport gone", func() error {
			err := tc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "echo-nodeport"}, &corev1.Service{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
		testsupport.Eventually(t, time.Minute, "the TCP listener no longer forwarding", func() error {
			if _, err := testsupport.TCPRoundTrip(testsupport.Loopback(int(gwPorts[7000])), "hello"); err == nil {
				return fmt.Errorf("still forwarded")
			}
			return nil
		})
		waitHTTP(t, testsupport.Loopback(int(gwPorts[80])), "store.gw.example.com", "/exact", nil, nil, http.StatusOK, "api-")
	})

	t.Run("a LoadBalancer hostname is served over HTTPS with the certificate cert-manager issues", func(t *testing.T) {
		// The platform team gives tenant a a wildcard domain and an issuer.
		objects.Update(t, pair.Hub.Client, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, func(tenant *kubelbv1alpha1.Tenant) {
			tenant.Spec.DNS.WildcardDomain = ptr.To("*.lb.example.com")
			tenant.Spec.DNS.UseDNSAnnotations = ptr.To(true)
			tenant.Spec.Certificates.DefaultClusterIssuer = ptr.To("e2e-issuer")
		})
		svc := a.CreateService(framework.LBService{Name: "site", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
		a.ServeBackend("default", "site", 80, testsupport.StartHTTPBackend)
		lbName := string(svc.UID)
		host := lbName + ".a.lb.example.com"
		cert := &unstructured.Unstructured{}
		cert.SetGroupVersionKind(hubnames.CertificateGVK)
		testsupport.Eventually(t, 2*time.Minute, "the Certificate for "+host, func() error {
			if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: hubnames.HostnameSecretName(lbName)}, cert); err != nil {
				return err
			}
			names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
			if len(names) != 1 || names[0] != host || issuer != "e2e-issuer" {
				return fmt.Errorf("dnsNames %v, issuer %q", names, issuer)
			}
			return nil
		})
		// Play cert-manager: it fills the Secret the Certificate names, with the labels of its
		// secretTemplate and its own annotation.
		issued := newCert(t, host)
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		labels, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "secretTemplate", "labels")
		create(t, pair.Hub.Client, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: secretName, Labels: labels,
				Annotations: map[string]string{hubnames.AnnotationCertificateName: cert.GetName()}},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: issued.crt, corev1.TLSPrivateKeyKey: issued.key},
		})
		testsupport.Eventually(t, time.Minute, "status.hostname with TLS and the DNS record", func() error {
			lb := &kubelbv1alpha1.LoadBalancer{}
			if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: lbName}, lb); err != nil {
				return err
			}
			if h := lb.Status.Hostname; h == nil || h.Hostname != host || !h.TLSEnabled || !h.DNSRecordCreated {
				return fmt.Errorf("status.hostname %+v", lb.Status.Hostname)
			}
			return nil
		})
		_, httpsPort := a.IngressPorts()
		waitHTTP(t, testsupport.Loopback(int(httpsPort)), host, "/hello", issued.pool, nil, http.StatusOK, "site-")
	})

	t.Run("the Tenant's request header limits apply to its HTTP listeners", func(t *testing.T) {
		objects.Update(t, pair.Hub.Client, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, func(tenant *kubelbv1alpha1.Tenant) {
			tenant.Spec.EnvoyProxy.HeaderLimits = &kubelbv1alpha1.HeaderLimits{MaxRequestHeadersCount: ptr.To[uint32](30)}
		})
		httpPort, _ := a.IngressPorts()
		addr := testsupport.Loopback(int(httpPort))
		many := http.Header{}
		for i := 0; i < 40; i++ {
			many.Set(fmt.Sprintf("X-Extra-%d", i), "1")
		}
		waitHTTP(t, addr, "app.example.com", "/", nil, many, http.StatusRequestHeaderFieldsTooLarge, "")
		waitHTTP(t, addr, "app.example.com", "/", nil, nil, http.StatusOK, "web-")
	})

	t.Run("Routes written the way a KubeLB CE ccm writes them are served", func(t *testing.T) {
		ce := sys.AddTenantWithoutCCM("ce", 1)
		raw, err := os.ReadFile("testdata/kubelb-ce/hub-routes.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var gatewayUID string
		kinds := map[string]string{} // Route name → kind of the tenant object
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			route := &kubelbv1alpha1.Route{}
			if err := yaml.Unmarshal([]byte(doc), route); err != nil {
				t.Fatal(err)
			}
			kind := route.Spec.Source.Kubernetes.Route.GetKind()
			if kind == "Gateway" {
				gatewayUID = route.Name
			}
			kinds[route.Name] = kind
			route.Namespace = ce.Namespace
			route.ResourceVersion, route.UID, route.Finalizers, route.Status = "", "", nil, kubelbv1alpha1.RouteStatus{}
			create(t, pair.Hub.Client, route)
		}
		if len(kinds) != 4 {
			t.Fatalf("the fixture has %d Routes, want the Ingress, Gateway, HTTPRoute and GRPCRoute: %v", len(kinds), kinds)
		}
		ce.StartEnvoy(framework.EnvoyBootstrap)
		// Play kube-proxy on the NodePorts the fixture records: web-nodeport 16378 (HTTP/1),
		// grpc-nodeport 26276 (h2c).
		for i, ip := range ce.NodeIPs {
			node := fmt.Sprintf("ce-node-%d", i)
			testsupport.StartHTTPBackend(t, fmt.Sprintf("%s:16378", ip), testsupport.Identity{Node: node, Pod: "web-" + node})
			testsupport.StartH2CBackend(t, fmt.Sprintf("%s:26276", ip), testsupport.Identity{Node: node, Pod: "grpc-" + node})
		}
		ports := ce.GatewayPorts(gatewayUID, 80)
		addr := testsupport.Loopback(int(ports[80]))
		canary := http.Header{"X-Env": {"canary"}}
		waitHTTP(t, addr, "app.example.com", "/api", nil, canary, http.StatusOK, "")
		seen := map[string]int{}
		for i := 0; i < 50; i++ {
			r, err := framework.HTTPRequest(addr, "app.example.com", "/api/x", nil, canary)
			if err != nil || r.Status != http.StatusOK {
				t.Fatalf("request %d: %v %+v", i, err, r)
			}
			if r.Header.Get(testsupport.HeaderSeenPrefix+"Via") != "kubelb" {
				t.Fatalf("the fixture's RequestHeaderModifier was not applied: %v", r.Header)
			}
			seen[strings.SplitN(r.Pod, "-", 2)[0]]++
		}
		if seen["web"] == 0 {
			t.Fatalf("the 90%% backend never answered: %v", seen)
		}
		// Without the header the fixture's only rule does not match.
		waitHTTP(t, addr, "app.example.com", "/api", nil, nil, http.StatusNotFound, "")

		// The Ingress answers on the tenant's Ingress ports (its fixture's backend is
		// web-nodeport 16378 too).
		httpPort, _ := ce.IngressPorts()
		waitHTTP(t, testsupport.Loopback(int(httpPort)), "app.example.com", "/", nil, nil, http.StatusOK, "web-")

		// Status back: a KubeLB CE ccm copies a Route's status onto its tenant object only
		// once status.resources.route.generatedName is set and the status is not "{}", and
		// decodes it strictly into the kind's status type (its source_reconciler.go and
		// gateway_controller.go). Every Route must pass that, with the status a user expects.
		for name, kind := range kinds {
			testsupport.Eventually(t, time.Minute, kind+" status a KubeLB CE ccm copies back", func() error {
				route := &kubelbv1alpha1.Route{}
				if err := pair.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: ce.Namespace, Name: name}, route); err != nil {
					return err
				}
				return ceCopiesStatus(kind, route)
			})
		}
	})
}

// ceCopiesStatus checks a Route's status.resources.route as a KubeLB CE ccm reads it before it
// copies the status onto the tenant object: generatedName set, a status other than "{}",
// which decodes strictly (no field unknown to the Gateway API or networking types) into the
// status of kind, and says what a user of that kind expects (an address, Accepted parents).
func ceCopiesStatus(kind string, route *kubelbv1alpha1.Route) error {
	st := route.Status.Resources.Route
	if st.GeneratedName == "" {
		return fmt.Errorf("status.resources.route.generatedName is empty: a KubeLB CE ccm copies nothing back")
	}
	raw := st.Status.Raw
	if len(raw) == 0 || string(raw) == "{}" {
		return fmt.Errorf("status.resources.route.status is %q", raw)
	}
	accepted := func(conds []metav1.Condition) error {
		if c := meta.FindStatusCondition(conds, "Accepted"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("not Accepted: %+v", conds)
		}
		return nil
	}
	switch kind {
	case "Ingress":
		var s networkingv1.IngressStatus
		if err := yaml.UnmarshalStrict(raw, &s); err != nil {
			return fmt.Errorf("decoding the Ingress status strictly: %w", err)
		}
		if len(s.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("the Ingress status has no address: %s", raw)
		}
	case "Gateway":
		var s gwv1.GatewayStatus
		if err := yaml.UnmarshalStrict(raw, &s); err != nil {
			return fmt.Errorf("decoding the Gateway status strictly: %w", err)
		}
		if len(s.Addresses) == 0 {
			return fmt.Errorf("the Gateway status has no address: %s", raw)
		}
		return accepted(s.Conditions)
	case "HTTPRoute", "GRPCRoute":
		var s gwv1.HTTPRouteStatus // GRPCRouteStatus is the same RouteStatus
		if err := yaml.UnmarshalStrict(raw, &s); err != nil {
			return fmt.Errorf("decoding the %s status strictly: %w", kind, err)
		}
		if len(s.Parents) == 0 {
			return fmt.Errorf("the %s status has no parents: %s", kind, raw)
		}
		return accepted(s.Parents[0].Conditions)
	default:
		return fmt.Errorf("unexpected kind %s", kind)
	}
	return nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// installCertificateCRD installs cert-manager's Certificate CRD (from its Go module, see
// internal/certmanagercrds) and waits until it is served.
func installCertificateCRD(t *testing.T, c client.Client) {
	t.Helper()
	crd, err := certmanagercrds.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	create(t, c, crd)
	testsupport.Eventually(t, time.Minute, "the Certificate CRD established", func() error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(hubnames.CertificateGVK.GroupVersion().WithKind("CertificateList"))
		return c.List(context.Background(), list)
	})
}
