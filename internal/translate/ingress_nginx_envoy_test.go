package translate_test

import (
	"context"
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
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestIngressNginxAnnotationsThroughEnvoy serves Ingresses written for ingress-nginx through a
// real Envoy fed over xDS and counts what clients get: rewrite-target with capture groups
// rewrites the path the backend sees; use-regex matches regular expressions case-insensitively;
// permanent-redirect, app-root and force-ssl-redirect answer with their redirects;
// backend-protocol H2C reaches a backend that speaks only HTTP/2; proxy-read-timeout ends a
// silent request; enable-cors answers preflights for allowed origins only; affinity cookie
// keeps a client on one of two endpoints; a canary Ingress gets its weight of the requests
// and those with its header (or a header value its pattern matches); and snippets change nothing.
func TestIngressNginxAnnotationsThroughEnvoy(t *testing.T) {
	const tenant = "tenant-nginx"
	const N = translate.NginxAnnotationPrefix
	// Each NodePort is served on two nodes (127.0.0.1 and 127.0.0.2): its port must be free on
	// both (a port the kernel picked on one may be taken on the other).
	twoNodes := func() string { return testsupport.Loopback(testsupport.FreePort(t, "127.0.0.1", "127.0.0.2")) }
	web := testsupport.StartHTTPBackend(t, twoNodes(), testsupport.Identity{Node: "node-1", Pod: "web"})
	_, port, _ := net.SplitHostPort(web.Addr)
	webPort, _ := strconv.Atoi(port)
	// A second endpoint of the same NodePort on the second node: affinity has two to choose from.
	web2 := testsupport.StartHTTPBackend(t, net.JoinHostPort("127.0.0.2", port), testsupport.Identity{Node: "node-2", Pod: "web2"})
	h2 := testsupport.StartH2CBackend(t, twoNodes(), testsupport.Identity{Node: "node-1", Pod: "h2"})
	_, port, _ = net.SplitHostPort(h2.Addr)
	h2Port, _ := strconv.Atoi(port)
	testsupport.StartH2CBackend(t, net.JoinHostPort("127.0.0.2", port), testsupport.Identity{Node: "node-2", Pod: "h2"})
	// The stable and canary versions of an app, on both nodes.
	pair := func(pod string) int {
		b := testsupport.StartHTTPBackend(t, twoNodes(), testsupport.Identity{Node: "node-1", Pod: pod})
		_, port, _ := net.SplitHostPort(b.Addr)
		testsupport.StartHTTPBackend(t, net.JoinHostPort("127.0.0.2", port), testsupport.Identity{Node: "node-2", Pod: pod})
		n, _ := strconv.Atoi(port)
		return n
	}
	v1Port, v2Port := pair("v1"), pair("v2")
	httpPort, httpsPort := testsupport.FreePort(t), testsupport.FreePort(t)
	appCert, appCA := testCert(t, "app.example.com")

	svc := func(name string, nodePort int) v1alpha1.UpstreamService {
		return v1alpha1.UpstreamService{Service: corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: name, v1alpha1.LabelOriginNamespace: "shop"}},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: int32(nodePort)}}},
		}}
	}
	prefix, specific := networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific
	rule := func(host string, svc string, paths ...string) networkingv1.IngressRule {
		r := networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{}}}
		for _, p := range paths {
			typ := &prefix
			if strings.ContainsAny(p, "()[]") {
				typ = &specific
			}
			r.HTTP.Paths = append(r.HTTP.Paths, networkingv1.HTTPIngressPath{Path: p, PathType: typ, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}})
		}
		return r
	}
	n := 0
	route := func(name string, annotations map[string]string, spec networkingv1.IngressSpec, svcs ...v1alpha1.UpstreamService) v1alpha1.Route {
		n++
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&networkingv1.Ingress{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Annotations: annotations},
			Spec:       spec,
		})
		if err != nil {
			t.Fatal(err)
		}
		r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "00000000-0000-0000-0000-0000000000" + strconv.Itoa(10+n), Namespace: tenant,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 1, n, 0, 0, 0, time.UTC))}}
		r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Services: svcs}
		r.Spec.Source.Kubernetes.Route.Object = obj
		return r
	}
	spec := func(rules ...networkingv1.IngressRule) networkingv1.IngressSpec {
		return networkingv1.IngressSpec{Rules: rules}
	}
	appSpec := spec(rule("app.example.com", "web", "/"))
	appSpec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"app.example.com"}, SecretName: "app-tls"}}
	secureSpec := spec(rule("secure.example.com", "web", "/"))
	secureSpec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"secure.example.com"}, SecretName: "app-tls"}}
	in := translate.Input{
		Tenant: tenant,
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}, {IP: "127.0.0.2"}}}}},
		// The tenant redirects TLS hosts to HTTPS: ssl-redirect "false" turns it off.
		Options: translate.Options{ListenerAddress: "127.0.0.1", StreamIdleTimeout: 5 * time.Minute, IngressSSLRedirect: true},
		Policy:  translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelIngressService: "true"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt(httpPort)},
				{Name: "https", Port: 443, TargetPort: intstr.FromInt(httpsPort)},
			}},
		}},
		Secrets: []corev1.Secret{{
			ObjectMeta: metav1.ObjectMeta{Name: "synced-app-tls", Namespace: tenant, Labels: map[string]string{v1alpha1.LabelOriginName: "app-tls", v1alpha1.LabelOriginNamespace: "shop"}},
			Data:       appCert,
		}},
		Routes: []v1alpha1.Route{
			route("rewrite", map[string]string{N + "rewrite-target": "/$2", N + "configuration-snippet": "return 500;"},
				spec(rule("rewrite.example.com", "web", "/something(/|$)(.*)")), svc("web", webPort)),
			route("regex", map[string]string{N + "use-regex": "true"}, spec(rule("regex.example.com", "web", "/api/v[0-9]+")), svc("web", webPort)),
			route("moved", map[string]string{N + "permanent-redirect": "https://new.example.org/landing"}, spec(rule("old.example.com", "web", "/")), svc("web", webPort)),
			route("app", map[string]string{N + "app-root": "/app", N + "ssl-redirect": "false"}, appSpec, svc("web", webPort)),
			route("forced", map[string]string{N + "force-ssl-redirect": "true"}, spec(rule("app.example.com", "web", "/secure")), svc("web", webPort)),
			route("secure", map[string]string{N + "ssl-redirect": "true"}, secureSpec, svc("web", webPort)),
			route("h2", map[string]string{N + "backend-protocol": "H2C"}, spec(rule("h2.example.com", "h2", "/")), svc("h2", h2Port)),
			route("slow", map[string]string{N + "proxy-read-timeout": "1", N + "proxy-send-timeout": "1"}, spec(rule("slow.example.com", "web", "/")), svc("web", webPort)),
			route("cors", map[string]string{N + "enable-cors": "true", N + "cors-allow-origin": "https://ok.example.com", N + "cors-allow-methods": "GET, PUT"},
				spec(rule("cors.example.com", "web", "/")), svc("web", webPort)),
			route("sticky", map[string]string{N + "affinity": "cookie", N + "session-cookie-name": "route"}, spec(rule("sticky.example.com", "web", "/")), svc("web", webPort)),
			route("stable", nil, spec(rule("canary.example.com", "v1", "/")), svc("v1", v1Port)),
			route("canary", map[string]string{N + "canary": "true", N + "canary-weight": "20", N + "canary-by-header": "X-Canary", N + "canary-by-cookie": "canary"},
				spec(rule("canary.example.com", "v2", "/")), svc("v2", v2Port)),
			route("stable-pattern", nil, spec(rule("pattern.example.com", "v1", "/")), svc("v1", v1Port)),
			route("canary-pattern", map[string]string{N + "canary": "true", N + "canary-by-header": "X-Track", N + "canary-by-header-pattern": "^(beta|gamma)$"},
				spec(rule("pattern.example.com", "v2", "/")), svc("v2", v2Port)),
			route("upload", map[string]string{N + "proxy-body-size": "1k"}, spec(rule("upload.example.com", "web", "/")), svc("web", webPort)),
		},
	}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	// The only problem: the snippet, named in a Warning.
	if len(problems) != 1 || problems[0].Reason != translate.ReasonUnsupportedAnnotation || !strings.Contains(problems[0].Message, "configuration-snippet") {
		t.Fatalf("problems: %v", problems)
	}
	xdsenvoy.Start(t, "ingress-nginx-proxy", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	plain, secure := testsupport.Loopback(httpPort), testsupport.Loopback(httpsPort)
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the Ingresses", func() error {
		_, err := get(plain, "", nil, "regex.example.com", "/api/v1")
		return err
	})

	// rewrite-target and use-regex: the path the backend saw is in the body.
	for _, c := range []struct{ host, path, want string }{
		{"rewrite.example.com", "/something/new/x?q=1", "/new/x"},
		{"rewrite.example.com", "/something", "/"},
		{"rewrite.example.com", "/SOMETHING/a", "/a"}, // nginx's ~* matches case-insensitively
		{"regex.example.com", "/api/v2/users", "/api/v2/users"},
		{"regex.example.com", "/API/V10", "/API/V10"},
	} {
		a, err := send(plain, "", nil, c.host, c.path)
		if err != nil || a.status != http.StatusOK || !strings.HasSuffix(string(a.body), " "+c.want) {
			t.Errorf("http://%s%s: %d %q (%v), want the backend to see %s", c.host, c.path, a.status, a.body, err, c.want)
		}
	}
	for _, c := range []struct{ host, path string }{{"rewrite.example.com", "/other"}, {"regex.example.com", "/api/vx"}} {
		if a, err := send(plain, "", nil, c.host, c.path); err != nil || a.status != http.StatusNotFound {
			t.Errorf("http://%s%s: %d (%v), want 404 (the path's expression does not match)", c.host, c.path, a.status, err)
		}
	}
	// Redirects: permanent-redirect (301 to the URL), app-root (302 on / only),
	// force-ssl-redirect on a host another Ingress serves over HTTPS (its own path only: the
	// Ingress with ssl-redirect false is not redirected), and ssl-redirect on a TLS host.
	for _, c := range []struct {
		host, path, location string
		status               int
	}{
		{"old.example.com", "/any/path", "https://new.example.org/landing", http.StatusMovedPermanently},
		{"app.example.com", "/", "http://app.example.com/app", http.StatusFound},
		{"app.example.com", "/secure/x", "https://app.example.com/secure/x", http.StatusMovedPermanently},
		{"app.example.com", "/other", "", http.StatusOK},                                                  // ssl-redirect "false"
		{"secure.example.com", "/x?y=1", "https://secure.example.com/x?y=1", http.StatusMovedPermanently}, // ssl-redirect "true"
	} {
		if a, err := send(plain, "", nil, c.host, c.path); err != nil || a.status != c.status || a.location != c.location {
			t.Errorf("http://%s%s: %d to %q (%v), want %d to %q", c.host, c.path, a.status, a.location, err, c.status, c.location)
		}
	}
	if a, err := send(secure, "app.example.com", appCA, "app.example.com", "/"); err != nil || a.status != http.StatusFound || a.location != "https://app.example.com/app" {
		t.Errorf("https://app.example.com/: %d to %q (%v), want 302 to https://app.example.com/app", a.status, a.location, err)
	}
	if got, err := get(secure, "app.example.com", appCA, "app.example.com", "/secure/x"); err != nil || !strings.HasPrefix(got, "web") {
		t.Errorf("https://app.example.com/secure/x answered by %q (%v), want web or web2", got, err)
	}
	// backend-protocol H2C: the backends (one per node) speak only HTTP/2, and answer every
	// request.
	for i := range 5 {
		if got, err := get(plain, "", nil, "h2.example.com", "/"); err != nil || got != "h2" {
			t.Fatalf("request %d to the h2c backend answered by %q (%v)", i, got, err)
		}
	}
	// proxy-read-timeout 1: a backend silent for 5 s is cut after about a second (504).
	start := time.Now()
	if a, err := send(plain, "", nil, "slow.example.com", testsupport.DelayPath+"5s"); err != nil || a.status != http.StatusGatewayTimeout || time.Since(start) > 4*time.Second {
		t.Errorf("a silent backend behind proxy-read-timeout 1: %d after %s (%v), want 504 after about 1s", a.status, time.Since(start), err)
	}
	// enable-cors: a preflight from the allowed origin is answered with its methods; one from
	// another origin is not allowed.
	for _, c := range []struct {
		origin, allow string
	}{{"https://ok.example.com", "https://ok.example.com"}, {"https://evil.example.com", ""}} {
		h, err := preflight(plain, "cors.example.com", c.origin)
		if err != nil || h.Get("Access-Control-Allow-Origin") != c.allow || (c.allow != "" && h.Get("Access-Control-Allow-Methods") != "GET, PUT") {
			t.Errorf("preflight from %s: Allow-Origin %q, Allow-Methods %q (%v), want %q", c.origin, h.Get("Access-Control-Allow-Origin"), h.Get("Access-Control-Allow-Methods"), err, c.allow)
		}
	}
	// affinity cookie: the first answer sets cookie "route"; 20 requests sending it back are
	// all answered by the same endpoint, while 20 without it reach both.
	first, cookie, err := withCookie(plain, "sticky.example.com", "")
	if err != nil || !strings.HasPrefix(cookie, "route=") {
		t.Fatalf("the first answer of sticky.example.com set cookie %q (%v), want route=…", cookie, err)
	}
	seen := map[string]int{}
	for range 20 {
		pod, _, err := withCookie(plain, "sticky.example.com", strings.SplitN(cookie, ";", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		seen[pod]++
	}
	if seen[first] != 20 {
		t.Errorf("20 requests with the session cookie of %s were answered %v, want all by %s", first, seen, first)
	}
	clear(seen)
	for range 20 {
		pod, _, err := withCookie(plain, "sticky.example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		seen[pod]++
	}
	if seen["web"] == 0 || seen["web2"] == 0 {
		t.Errorf("20 requests without a cookie were answered %v, want both endpoints", seen)
	}
	if web2.Requests() == 0 {
		t.Error("the second endpoint got no request")
	}
	// canary: 20 of 100 by weight (200 requests: 40 expected, 20 to 65 accepted, over six
	// standard deviations wide), all with X-Canary: always, none with X-Canary: never.
	countOn := func(host string, n int, name, value string) map[string]int {
		seen := map[string]int{}
		for range n {
			pod, err := withHeader(plain, host, name, value)
			if err != nil {
				t.Fatal(err)
			}
			seen[pod]++
		}
		return seen
	}
	count := func(n int, name, value string) map[string]int { return countOn("canary.example.com", n, name, value) }
	if seen := count(200, "", ""); seen["v1"]+seen["v2"] != 200 || seen["v2"] < 20 || seen["v2"] > 65 {
		t.Errorf("200 requests to the canaried host were answered %v, want about 40 by v2 and the rest by v1", seen)
	}
	if seen := count(20, "X-Canary", "always"); seen["v2"] != 20 {
		t.Errorf("20 requests with X-Canary: always were answered %v, want all by v2", seen)
	}
	if seen := count(20, "X-Canary", "never"); seen["v1"] != 20 {
		t.Errorf("20 requests with X-Canary: never were answered %v, want all by v1", seen)
	}
	// canary-by-cookie canary: "always" on the canary, "never" off it, among other cookies.
	if seen := count(20, "Cookie", "session=x; canary=always"); seen["v2"] != 20 {
		t.Errorf("20 requests with the cookie canary=always were answered %v, want all by v2", seen)
	}
	if seen := count(20, "Cookie", "canary=never; theme=dark"); seen["v1"] != 20 {
		t.Errorf("20 requests with the cookie canary=never were answered %v, want all by v1", seen)
	}
	// canary-by-header-pattern ^(beta|gamma)$ on X-Track: the values it matches on the
	// canary, the others (and none) off it.
	for value, want := range map[string]string{"beta": "v2", "gamma": "v2", "betamax": "v1", "": "v1"} {
		if seen := countOn("pattern.example.com", 10, "X-Track", value); seen[want] != 10 {
			t.Errorf("10 requests with X-Track: %q were answered %v, want all by %s", value, seen, want)
		}
	}

	// proxy-body-size 1k: a body of up to 1024 bytes reaches the backend; a larger one is
	// answered 413 by Envoy, 10 of each.
	post := func(size int) (int, error) {
		req, err := http.NewRequest(http.MethodPost, "http://"+plain+"/", strings.NewReader(strings.Repeat("x", size)))
		if err != nil {
			return 0, err
		}
		req.Host = "upload.example.com"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	statuses := map[int]int{}
	for range 10 {
		for _, size := range []int{1024, 1025} {
			code, err := post(size)
			if err != nil {
				t.Fatal(err)
			}
			statuses[size*1000+code]++
		}
	}
	if statuses[1024*1000+http.StatusOK] != 10 || statuses[1025*1000+http.StatusRequestEntityTooLarge] != 10 {
		t.Errorf("bodies of 1024 and 1025 bytes under proxy-body-size 1k got %v (size*1000+status), want 10 × 200 and 10 × 413", statuses)
	}
}

// withHeader sends GET / to host with header name: value (none when value is empty) and
// returns the pod that answered.
func withHeader(addr, host, name, value string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	if value != "" {
		req.Header.Set(name, value)
	}
	resp, err := plainClient(addr).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %d", host, resp.StatusCode)
	}
	return resp.Header.Get(testsupport.HeaderPod), nil
}

// preflight sends a CORS preflight (OPTIONS, for PUT) from origin to host and returns the
// answer's headers.
func preflight(addr, host, origin string) (http.Header, error) {
	req, err := http.NewRequest(http.MethodOptions, "http://"+addr+"/", nil)
	if err != nil {
		return nil, err
	}
	req.Host = host
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", http.MethodPut)
	resp, err := plainClient(addr).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Header, nil
}

// withCookie sends GET / to host with cookie (none when empty) and returns the pod that
// answered and the Set-Cookie of the answer.
func withCookie(addr, host, cookie string) (string, string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return "", "", err
	}
	req.Host = host
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := plainClient(addr).Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Header.Get(testsupport.HeaderPod), resp.Header.Get("Set-Cookie"), nil
}

// plainClient is an HTTP client that connects to addr whatever the URL, without keeping
// connections (each request may reach another endpoint).
func plainClient(addr string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
}
