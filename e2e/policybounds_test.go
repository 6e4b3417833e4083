package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestPolicyBoundsThroughEnvoy: the platform team's bounds on a tenant's policies, with the
// real manager, the real ccm and a real Envoy. The Tenant allows the features Retry and
// Timeout only; an app team's BackendTrafficPolicy limits its HTTPRoute to 3 requests a
// minute. The policy is Accepted False, OverPlatformBound, with a Warning Event naming the
// Tenant's features, and the hub leaves it out: 10 requests, 10 served. The platform team
// allows every feature (the bound removed): the policy is Accepted, and Envoy limits the
// route: once a request is refused (429), the next 10 are all refused.
func TestPolicyBoundsThroughEnvoy(t *testing.T) {
	pair := testenv.StartPair(t)
	ctx := context.Background()
	tc := pair.Tenant.Client
	// Envoy Gateway's policy CRDs in the tenant cluster, before the ccm starts (it reads the
	// kinds the tenant serves).
	if _, err := source.InstallPolicyCRDs(ctx, tc, tc); err != nil {
		t.Fatal(err)
	}
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 1, "--enable-gateway-api")
	tenant := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	objects.Update(t, pair.Hub.Client, tenant, func(tn *kubelbv1alpha1.Tenant) {
		tn.Spec.TrafficPolicies = &kubelbv1alpha1.TrafficPolicyBounds{
			Features: &[]kubelbv1alpha1.TrafficPolicyFeature{kubelbv1alpha1.TrafficPolicyFeatureRetry, kubelbv1alpha1.TrafficPolicyFeatureTimeout}}
	})

	const ns = "shop"
	a.CreateNamespace(ns, nil)
	a.CreateBackendService(ns, "web", corev1.ServicePort{Name: "http", Port: 80})
	gw, route := webGateway(ns)
	policy := egPolicy(t, source.BackendTrafficPolicyKind, ns, "limit", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
rateLimit: {type: Local, local: {rules: [{limit: {requests: 3, unit: Minute}}]}}
`)
	create(t, tc, gw, route, policy)
	addr := serveWebGateway(t, a, tc, ns, gw)

	// Over the Tenant's bound: refused on the policy, with a Warning Event.
	msg := policyAccepted(t, tc, ns, "limit", metav1.ConditionFalse, "OverPlatformBound")
	if want := "the policy uses rateLimit (RateLimit); spec.trafficPolicies.features of Tenant a allows Retry, Timeout"; !strings.Contains(msg, want) {
		t.Errorf("message %q does not say %q", msg, want)
	}
	objects.WaitEvent(t, tc, time.Minute, objects.EventFilter{Namespace: ns, Kind: "BackendTrafficPolicy", Name: "limit", Reason: "OverPlatformBound", Type: "Warning"})
	// The hub translated the Route carrying the policy, and left it out.
	testsupport.Eventually(t, time.Minute, "the hub's OverPlatformBound on the Route", func() error {
		routes := &kubelbv1alpha1.RouteList{}
		if err := pair.Hub.Client.List(ctx, routes, client.InNamespace(a.Namespace)); err != nil {
			return err
		}
		for _, r := range routes.Items {
			if r.Name != string(route.UID) {
				continue
			}
			c := meta.FindStatusCondition(r.Status.Resources.Route.Conditions, "Programmed")
			if c == nil || c.ObservedGeneration != r.Generation || !strings.Contains(c.Message, "OverPlatformBound: BackendTrafficPolicy shop/limit") {
				return fmt.Errorf("Programmed %+v", c)
			}
			return nil
		}
		return fmt.Errorf("no Route %s", route.UID)
	})
	// 10 requests in a row served (under the policy, 3 a minute, they could not be); a batch
	// sent while Envoy still had an older configuration is sent again.
	testsupport.Eventually(t, time.Minute, "10 requests in a row served", func() error {
		for i := 0; i < 10; i++ {
			if r, err := framework.HTTPRequest(addr, "web.example.com", "/", nil, nil); err != nil || r.Status != http.StatusOK {
				return fmt.Errorf("request %d: %v %+v, want 200", i, err, r)
			}
		}
		return nil
	})

	// The platform team allows every feature: the policy applies.
	objects.Update(t, pair.Hub.Client, tenant, func(tn *kubelbv1alpha1.Tenant) { tn.Spec.TrafficPolicies = nil })
	policyAccepted(t, tc, ns, "limit", metav1.ConditionTrue, "Accepted")
	served := 0
	testsupport.Eventually(t, time.Minute, "a request refused by the rate limit", func() error {
		r, err := framework.HTTPRequest(addr, "web.example.com", "/", nil, nil)
		switch {
		case err != nil:
			return err
		case r.Status == http.StatusOK:
			served++
			return fmt.Errorf("served (%d so far)", served)
		case r.Status != http.StatusTooManyRequests:
			return fmt.Errorf("status %d", r.Status)
		}
		return nil
	})
	// Requests served before the first 429 include those of the moment the new
	// configuration was on its way to Envoy: only logged.
	t.Logf("%d requests served before the first 429", served)
	limited := 0
	for i := 0; i < 10; i++ {
		if r, err := framework.HTTPRequest(addr, "web.example.com", "/", nil, nil); err == nil && r.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited != 10 {
		t.Errorf("%d of 10 requests refused after the limit was reached; want 10 (3 a minute)", limited)
	}
}

// policyAccepted waits until kubelb's Accepted condition of BackendTrafficPolicy ns/name has
// the status and reason, and returns its message.
func policyAccepted(t *testing.T, c client.Client, ns, name string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	var msg string
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("BackendTrafficPolicy %s/%s Accepted=%s (%s)", ns, name, status, reason), func() error {
		p := source.BackendTrafficPolicyKind.New()
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		return acceptedOf(p, status, reason, &msg)
	})
	return msg
}

// acceptedOf checks kubelb's Accepted condition of a policy (every ancestor).
func acceptedOf(p *unstructured.Unstructured, status metav1.ConditionStatus, reason string, msg *string) error {
	st := source.ReadPolicyStatus(p)
	found := false
	for _, a := range st.Ancestors {
		if a.ControllerName != source.ControllerName {
			continue
		}
		c := meta.FindStatusCondition(a.Conditions, string(gwv1.PolicyConditionAccepted))
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != p.GetGeneration() {
			return fmt.Errorf("ancestor %s: %+v", a.AncestorRef.Name, c)
		}
		*msg, found = c.Message, true
	}
	if !found {
		return fmt.Errorf("no ancestor of kubelb's in %+v", st.Ancestors)
	}
	return nil
}
