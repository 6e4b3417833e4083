package translate_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestPolicySectionsThroughEnvoy: policies that target one section (sectionName), through a
// real Envoy. HTTPRoute web has rules open (/open) and locked (/locked); a SecurityPolicy
// denying every client targets rule locked only: /locked is answered 403, /open is served.
// Gateway gw has listeners public and admin (two ports); a ClientTrafficPolicy rejecting
// header names with underscores targets listener admin only: a request with header x_user is
// answered 400 on admin's port and served on public's.
func TestPolicySectionsThroughEnvoy(t *testing.T) {
	const tenant = "tenant-policy-sections"
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Saw-Underscore", r.Header.Get("X_user"))
			w.WriteHeader(http.StatusOK)
		})
	})
	in, publicPort := trafficInput(t, tenant, nodePort, nil)
	adminPort := testsupport.FreePort(t)

	// The Gateway: listener public (80) as trafficInput makes it, and listener admin (8080).
	gwObj := in.Routes[0].Spec.Source.Kubernetes.Route.Object
	listeners := gwObj["spec"].(map[string]any)["listeners"].([]any)
	listeners[0].(map[string]any)["name"] = "public"
	gwObj["spec"].(map[string]any)["listeners"] = append(listeners, map[string]any{"name": "admin", "port": int64(8080), "protocol": "HTTP"})
	// The hub Service keeps the clients' addresses (the SecurityPolicy decides by them).
	in.RouteServices[0].Spec.Type = corev1.ServiceTypeLoadBalancer
	in.RouteServices[0].Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	in.RouteServices[0].Spec.Ports = append(in.RouteServices[0].Spec.Ports, corev1.ServicePort{Name: "tcp-8080", Port: 8080,
		Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(adminPort)})
	in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{PolicySections: []v1alpha1.PolicySection{{
		Name: "admin", ClientTraffic: &v1alpha1.ClientTraffic{Namespace: "shop", Name: "admin-clients",
			Headers: &v1alpha1.ClientTrafficHeaders{WithUnderscoresAction: "RejectRequest"}},
	}}}

	// The route: rules open and locked, the SecurityPolicy on rule locked.
	namedRules(&in.Routes[1], "open", "/", "locked", "/locked")
	in.Routes[1].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{PolicySections: []v1alpha1.PolicySection{{
		Name: "locked", Security: &v1alpha1.Security{Namespace: "shop", Name: "locked",
			Authorization: &v1alpha1.SecurityAuthorization{DefaultAction: "Deny"}},
	}}}

	public := serveThroughEnvoy(t, tenant, in, publicPort)
	admin := testsupport.Loopback(adminPort)
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve listener admin", func() error {
		resp, err := trafficGet(admin)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})

	get := func(addr, path string) int {
		t.Helper()
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s%s: %v", addr, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	refused, served := 0, 0
	for _, addr := range []string{public, admin} {
		for range 5 {
			if code := get(addr, "/locked/x"); code == http.StatusForbidden {
				refused++
			} else {
				t.Errorf("GET /locked/x on %s: status %d, want 403 (rule locked's SecurityPolicy)", addr, code)
			}
			if code := get(addr, "/open"); code == http.StatusOK {
				served++
			} else {
				t.Errorf("GET /open on %s: status %d, want 200 (rule open has no policy)", addr, code)
			}
		}
	}
	t.Logf("rule locked: %d refused; rule open: %d served", refused, served)

	if code, h := rawRequest(t, admin, "x_user", "alice"); code != http.StatusBadRequest || h.Get("X-Saw-Underscore") != "" {
		t.Errorf("listener admin, header x_user: status %d (backend saw %q), want 400 (its ClientTrafficPolicy)", code, h.Get("X-Saw-Underscore"))
	}
	if code, h := rawRequest(t, public, "x_user", "alice"); code != http.StatusOK || h.Get("X-Saw-Underscore") != "alice" {
		t.Errorf("listener public, header x_user: status %d (backend saw %q), want 200 and the header passed (Envoy's default)", code, h.Get("X-Saw-Underscore"))
	}
}
