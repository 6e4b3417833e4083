package translate_test

import (
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// throughEnvoyWithSecurity serves a Gateway (carrying SecurityPolicy gwSec) and its HTTPRoute
// (carrying routeSec; one rule to Service web) through a real Envoy, and returns the
// listener's address once Envoy answers. The hub holds secrets.
func throughEnvoyWithSecurity(t *testing.T, tenant string, gwSec, routeSec *v1alpha1.Security, secrets ...corev1.Secret) string {
	t.Helper()
	nodePort := testsupport.FreePort(t)
	testsupport.StartHTTPBackend(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(nodePort)), testsupport.Identity{Node: "node-1", Pod: "web"})
	httpPort := testsupport.FreePort(t)
	port := gwv1.PortNumber(80)
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
		BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}
	in := oneGateway(t, tenant, gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}, httpPort, []gwv1.HTTPRouteRule{rule}, nodePort)
	// The Gateway's hub Service keeps the clients' addresses (externalTrafficPolicy Local).
	in.RouteServices[0].Spec.Type = corev1.ServiceTypeLoadBalancer
	in.RouteServices[0].Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	for i, sec := range []*v1alpha1.Security{gwSec, routeSec} {
		if in.Routes[i].Spec.Source.Kubernetes.Context == nil {
			in.Routes[i].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{}
		}
		in.Routes[i].Spec.Source.Kubernetes.Context.Security = sec
	}
	in.Secrets = append(in.Secrets, secrets...)
	return serveThroughEnvoy(t, tenant, in, httpPort)
}

// countFrom sends three requests for host from each source address and checks each status;
// it returns the requests answered 200 and 403.
func countFrom(t *testing.T, addr, host string, want map[string]int) (allowed, refused int) {
	t.Helper()
	for src, status := range want {
		for range 3 {
			got, err := statusFrom(src, addr, host)
			if err != nil || got != status {
				t.Errorf("http://%s/ from %s: %d (%v), want %d", host, src, got, err, status)
				continue
			}
			if got == http.StatusOK {
				allowed++
			} else {
				refused++
			}
		}
	}
	return allowed, refused
}

// TestSecurityPolicyThroughEnvoy: an HTTPRoute's SecurityPolicy (deny 127.0.0.3, then allow
// 127.0.0.0/29, default Deny) overrides its Gateway's (allow 127.0.0.2 only): clients are
// decided by the connection's peer address, in the rules' order: 127.0.0.2 and 127.0.0.4 are
// served, 127.0.0.3 (denied before the range that holds it) and 127.0.0.9 (no rule: the
// default) are answered 403, whatever X-Forwarded-For they send. Clients bind their sockets
// to different loopback addresses; a real Envoy fed over xDS serves the route.
func TestSecurityPolicyThroughEnvoy(t *testing.T) {
	addr := throughEnvoyWithSecurity(t, "tenant-security",
		&v1alpha1.Security{Namespace: "shop", Name: "gateway", Authorization: &v1alpha1.SecurityAuthorization{DefaultAction: "Deny",
			Rules: []v1alpha1.SecurityRule{{Action: "Allow", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{"127.0.0.2/32"}}}}}},
		&v1alpha1.Security{Namespace: "shop", Name: "route", Authorization: &v1alpha1.SecurityAuthorization{
			Rules: []v1alpha1.SecurityRule{
				{Name: "kiosk", Action: "Deny", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{"127.0.0.3/32"}}},
				{Action: "Allow", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{"127.0.0.0/29"}}},
			}}})
	allowed, refused := countFrom(t, addr, "example.com", map[string]int{
		"127.0.0.2": http.StatusOK, "127.0.0.4": http.StatusOK, "127.0.0.3": http.StatusForbidden, "127.0.0.9": http.StatusForbidden,
	})
	t.Logf("%d requests allowed, %d refused (403)", allowed, refused)
	if allowed != 6 || refused != 6 {
		t.Errorf("%d allowed and %d refused, want 6 and 6", allowed, refused)
	}
	// The peer address decides, never a header a client writes.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Host = "example.com"
	req.Header.Set("X-Forwarded-For", "127.0.0.2")
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.9")}}
	resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("from 127.0.0.9 with X-Forwarded-For 127.0.0.2: %d, want 403", resp.StatusCode)
	}
}

// TestSecurityPolicyDenyListThroughEnvoy: a Gateway's SecurityPolicy with default Allow and a
// Deny rule (127.0.0.3/32) applies to its HTTPRoute, which has none: 127.0.0.3 is answered
// 403, others are served.
func TestSecurityPolicyDenyListThroughEnvoy(t *testing.T) {
	addr := throughEnvoyWithSecurity(t, "tenant-security-deny",
		&v1alpha1.Security{Namespace: "shop", Name: "gateway", Authorization: &v1alpha1.SecurityAuthorization{DefaultAction: "Allow",
			Rules: []v1alpha1.SecurityRule{{Action: "Deny", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{"127.0.0.3/32"}}}}}},
		nil)
	allowed, refused := countFrom(t, addr, "example.com", map[string]int{"127.0.0.2": http.StatusOK, "127.0.0.9": http.StatusOK, "127.0.0.3": http.StatusForbidden})
	t.Logf("%d requests allowed, %d refused (403)", allowed, refused)
	if allowed != 6 || refused != 3 {
		t.Errorf("%d allowed and %d refused, want 6 and 3", allowed, refused)
	}
}
