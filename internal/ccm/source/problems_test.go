package source

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

var since = metav1.NewTime(time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC))

// hubCondition is a condition of a hub Route's status.resources.route.
func hubCondition(typ string, status metav1.ConditionStatus, reason, message string, generation int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation, LastTransitionTime: since}
}

func TestRouteProblems(t *testing.T) {
	rt := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	if p := RouteProblems(rt); p != nil {
		t.Fatalf("no conditions: %v", p)
	}
	rt.Status.Resources.Route.Conditions = []metav1.Condition{
		hubCondition("Programmed", metav1.ConditionFalse, "CertificateNotFound", "Secret a/tls has not reached the hub", 3),
		hubCondition("ResourceAppliedSuccessfully", metav1.ConditionFalse, "Disabled", "Ingress is disabled for this tenant", 3),
	}
	p := RouteProblems(rt)
	if len(p) != 2 || p[0].Reason != "Disabled" || p[1].Reason != "CertificateNotFound" || !p[0].NotServed || !p[1].Since.Equal(&since) {
		t.Fatalf("problems %+v", p)
	}
	reason, note := ProblemNote(p)
	if reason != "Disabled" || note != "The management cluster reports: Ingress is disabled for this tenant; Secret a/tls has not reached the hub" {
		t.Errorf("note %q %q", reason, note)
	}
	// A condition of an older generation is stale: not told, and the Route not judged.
	if !HubJudged(rt) {
		t.Error("a Route with current conditions is not judged")
	}
	rt.Status.Resources.Route.Conditions[1].ObservedGeneration = 2
	if p := RouteProblems(rt); len(p) != 1 || p[0].Reason != "CertificateNotFound" {
		t.Errorf("stale condition counted: %+v", p)
	}
	if HubJudged(rt) {
		t.Error("a Route with a stale condition is judged")
	}
	// Warnings are problems too, but the object is served; True Programmed is none.
	rt.Status.Resources.Route.Conditions = []metav1.Condition{hubCondition("Programmed", metav1.ConditionTrue, "ProgrammedWithWarnings", "one endpoint left out", 3)}
	if p := RouteProblems(rt); len(p) != 1 || p[0].NotServed {
		t.Errorf("warnings %+v", p)
	}
	// Some of a Gateway's listeners left out: the others are served, so the Gateway stays
	// Programmed (Gateway API conformance, GatewayObservedGenerationBump).
	rt.Status.Resources.Route.Conditions = []metav1.Condition{hubCondition("ResourceAppliedSuccessfully", metav1.ConditionFalse, "InvalidListeners", "Listeners left out: listener \"invalid\"", 3)}
	if p := RouteProblems(rt); len(p) != 1 || p[0].NotServed {
		t.Errorf("listeners left out: %+v", p)
	}
	// A translation problem of one listener: told, but the Gateway is served; Envoy's
	// rejection is not served.
	rt.Status.Resources.Route.Conditions = []metav1.Condition{hubCondition("Programmed", metav1.ConditionFalse, "UnsupportedProtocol", "listener invalid is not served", 3)}
	if p := RouteProblems(rt); len(p) != 1 || p[0].NotServed {
		t.Errorf("a listener's translation problem: %+v", p)
	}
	rt.Status.Resources.Route.Conditions = []metav1.Condition{hubCondition("Programmed", metav1.ConditionFalse, "Rejected", "Envoy rejected it", 3)}
	if p := RouteProblems(rt); len(p) != 1 || !p[0].NotServed {
		t.Errorf("Envoy's rejection: %+v", p)
	}
	// Backends the hub's Envoy proxies cannot reach: told (after the other problems), the
	// object is served; reachable or not yet checked backends are no problem.
	rt.Status.Resources.Route.Conditions = []metav1.Condition{
		hubCondition("BackendsReachable", metav1.ConditionFalse, "SomeBackendsUnreachable", "1 of 2 endpoints do not answer the hub's Envoy proxies: 10.0.0.2:31000", 3),
		hubCondition("Programmed", metav1.ConditionTrue, "ProgrammedWithWarnings", "one endpoint left out", 3),
	}
	if p := RouteProblems(rt); len(p) != 2 || p[1].Reason != "SomeBackendsUnreachable" || p[1].NotServed {
		t.Errorf("unreachable backends: %+v", p)
	}
	for _, st := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionUnknown} {
		rt.Status.Resources.Route.Conditions = []metav1.Condition{hubCondition("BackendsReachable", st, "NotYetChecked", "", 3)}
		if p := RouteProblems(rt); p != nil {
			t.Errorf("BackendsReachable=%s: %+v", st, p)
		}
	}
	rt.Status.Resources.Route.Conditions = []metav1.Condition{hubCondition("Programmed", metav1.ConditionTrue, "Programmed", "ok", 3)}
	if p := RouteProblems(rt); p != nil {
		t.Errorf("programmed: %+v", p)
	}
	// A reason that is not an Event reason is replaced; a long note is cut.
	if r, n := ProblemNote([]HubProblem{{Reason: "not a reason", Message: strings.Repeat("x", 2000)}}); r != ReasonHubProblem || len(n) != maxProblemNote {
		t.Errorf("reason %q, note of %d bytes", r, len(n))
	}
}

func TestWithHubProblems(t *testing.T) {
	status := map[string]any{"conditions": []any{
		map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted"},
		map[string]any{"type": "Programmed", "status": "True", "reason": "Programmed"},
	}}
	warn := []HubProblem{{Reason: "ProgrammedWithWarnings", Message: "w"}}
	if got := WithHubProblems(status, warn, 4); fmt.Sprint(got) != fmt.Sprint(status) {
		t.Errorf("a served Gateway changed: %v", got)
	}
	got := WithHubProblems(status, append(warn, HubProblem{Reason: "Rejected", Message: "Envoy rejected port 80", NotServed: true, Since: since}), 4)
	conds := got["conditions"].([]any)
	c := conds[1].(map[string]any)
	if len(conds) != 2 || c["status"] != "False" || c["reason"] != "Rejected" || c["observedGeneration"] != int64(4) ||
		c["message"] != "The management cluster reports: Envoy rejected port 80" || c["lastTransitionTime"] != "2026-11-29T03:00:00Z" {
		t.Errorf("conditions %v", conds)
	}
	if status["conditions"].([]any)[1].(map[string]any)["status"] != "True" {
		t.Error("the input was changed")
	}
}

func TestClassAccepted(t *testing.T) {
	if c := ClassAccepted(nil, nil, 1); c.Status != metav1.ConditionTrue {
		t.Errorf("no TenantState: %+v", c)
	}
	if c := ClassAccepted(nil, errors.New("connection refused"), 1); c.Status != metav1.ConditionFalse || c.Reason != "Pending" || !strings.Contains(c.Message, "connection refused") {
		t.Errorf("hub down: %+v", c)
	}
	ts := v1alpha1.TenantState{Status: v1alpha1.TenantStateStatus{Conditions: []metav1.Condition{
		{Type: v1alpha1.TenantStateConditionGatewayAPI, Status: metav1.ConditionFalse, Reason: v1alpha1.TenantStateReasonDisabled, Message: "disabled by the platform team"}}}}
	if c := ClassAccepted([]v1alpha1.TenantState{ts}, nil, 1); c.Status != metav1.ConditionFalse || c.Reason != ReasonClassDisabled || c.Message != "disabled by the platform team" {
		t.Errorf("disabled: %+v", c)
	}
}

// setRouteConditions plays the manager: it sets conditions of a hub Route's
// status.resources.route (observedGeneration: the Route's generation).
func (e *env) setRouteConditions(t *testing.T, name string, conds ...metav1.Condition) {
	t.Helper()
	testsupport.Eventually(t, timeout, "writing Route conditions", func() error {
		rt := &v1alpha1.Route{}
		if err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Namespace: tenantNS, Name: name}, rt); err != nil {
			return err
		}
		for _, c := range conds {
			c.ObservedGeneration = rt.Generation
			meta.SetStatusCondition(&rt.Status.Resources.Route.Conditions, c)
		}
		return e.Hub.Client.Status().Update(e.ctx, rt)
	})
}

// warnings are the Warning Events about a tenant object: their notes, each as many times as
// it was recorded (a series counts each occurrence).
func (e *env) warnings(t *testing.T, ns string, uid types.UID) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := e.Tenant.Client.List(e.ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.UID != uid || ev.Type != corev1.EventTypeWarning {
			continue
		}
		n := int32(1)
		if ev.Series != nil {
			n = ev.Series.Count
		}
		for range n {
			out = append(out, ev.Reason+": "+ev.Note)
		}
	}
	return out
}

// TestIngressHubProblemEvents: an Ingress whose TLS Secret has not reached the hub (the
// manager's Programmed is False, CertificateNotFound) gets exactly one Warning Event telling
// it, however often the ccm looks at it again, and one more when the problem changes; backends
// the hub's Envoy proxies cannot reach (BackendsReachable=False) are one more.
func TestIngressHubProblemEvents(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "prob", nil)
	e.create(t, clusterIP("prob", "web", 80))
	ing := ingress("prob", "web", ptr.To("kubelb"), "web")
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"web.example.com"}, SecretName: "missing"}}
	e.create(t, ing)
	rt := e.routeOf(t, tenantNS, ing.UID, nil)

	missing := "Not served: web.example.com: Secret prob/missing has not reached the hub (the ccm mirrors Secrets referenced by served Ingresses and Gateways)"
	e.setRouteConditions(t, rt.Name, metav1.Condition{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "CertificateNotFound", Message: missing, LastTransitionTime: since})
	want := "CertificateNotFound: The management cluster reports: " + missing
	testsupport.Eventually(t, timeout, "the Warning Event", func() error {
		if got := e.warnings(t, "prob", ing.UID); len(got) != 1 || got[0] != want {
			return fmt.Errorf("warnings %q", got)
		}
		return nil
	})
	// The ccm looks again (the manager writes the status it translated): no new Event.
	before := reconciles(Ingress, "prob")
	e.setRouteStatus(t, tenantNS, rt.Name, map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "203.0.113.7"}}}})
	waitReconciles(t, Ingress, "prob", before)
	testsupport.Eventually(t, timeout, "the hub's address on the Ingress", func() error {
		e.getTenant(t, ing)
		if len(ing.Status.LoadBalancer.Ingress) != 1 {
			return errors.New("no address yet")
		}
		return nil
	})
	// Another problem: one more Event, and the first is still told once.
	invalid := "Not served: web.example.com: Secret prob/missing does not hold a usable certificate and key (tls.crt, tls.key)"
	e.setRouteConditions(t, rt.Name, metav1.Condition{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "InvalidCertificate", Message: invalid, LastTransitionTime: since})
	testsupport.Eventually(t, timeout, "the second Warning Event", func() error {
		got := e.warnings(t, "prob", ing.UID)
		if len(got) != 2 || !slices.Contains(got, want) ||
			!slices.Contains(got, "InvalidCertificate: The management cluster reports: "+invalid) {
			return fmt.Errorf("warnings %q", got)
		}
		return nil
	})
	// Served, but a backend does not answer the hub's Envoy proxies: a third Event.
	unreachable := "1 of 2 endpoints do not answer the hub's Envoy proxies: 10.0.0.2:31000"
	e.setRouteConditions(t, rt.Name,
		metav1.Condition{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", Message: "served", LastTransitionTime: since},
		metav1.Condition{Type: "BackendsReachable", Status: metav1.ConditionFalse, Reason: "SomeBackendsUnreachable", Message: unreachable, LastTransitionTime: since})
	testsupport.Eventually(t, timeout, "the unreachable backends' Warning Event", func() error {
		if got := e.warnings(t, "prob", ing.UID); len(got) != 3 || !slices.Contains(got, "SomeBackendsUnreachable: The management cluster reports: "+unreachable) {
			return fmt.Errorf("warnings %q", got)
		}
		return nil
	})
}

// TestGatewayHubProblemCondition: a Gateway whose hub Route is not served (Envoy rejected
// its listener; Gateway API disabled for the tenant) shows it in its Programmed condition,
// though the translated status says Programmed; the problem is also a Warning Event.
func TestGatewayHubProblemCondition(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "gwprob", nil)
	gw := gateway("gwprob", "edge", "kubelb")
	e.create(t, gw)
	rt := e.routeOf(t, tenantNS, gw.UID, nil)
	e.setRouteStatus(t, tenantNS, rt.Name, map[string]any{
		"conditions": []any{map[string]any{"type": "Programmed", "status": "True", "reason": "Programmed", "message": "served",
			"observedGeneration": gw.Generation, "lastTransitionTime": "2026-11-22T10:00:00Z"}},
	})
	programmed := func(reason string) func() error {
		return func() error {
			e.getTenant(t, gw)
			c := meta.FindStatusCondition(gw.Status.Conditions, string(gwapiv1.GatewayConditionProgrammed))
			if c == nil || c.Reason != reason {
				return fmt.Errorf("Programmed %+v", c)
			}
			return nil
		}
	}
	testsupport.Eventually(t, timeout, "Programmed from the translation", programmed("Programmed"))

	e.setRouteConditions(t, rt.Name, metav1.Condition{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Rejected",
		Message: "Not served: port 80: an Envoy proxy rejected the configuration", LastTransitionTime: since})
	testsupport.Eventually(t, timeout, "Programmed False from the hub", programmed("Rejected"))
	c := meta.FindStatusCondition(gw.Status.Conditions, string(gwapiv1.GatewayConditionProgrammed))
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "rejected the configuration") || c.ObservedGeneration != gw.Generation {
		t.Errorf("Programmed %+v", c)
	}

	// Gateway API disabled for the tenant: the Route controller says so first.
	e.setRouteConditions(t, rt.Name, metav1.Condition{Type: "ResourceAppliedSuccessfully", Status: metav1.ConditionFalse, Reason: "Disabled",
		Message: "Gateway API is disabled for this tenant (Tenant or Config); no hub Service is made.", LastTransitionTime: since})
	testsupport.Eventually(t, timeout, "Programmed False: Disabled", programmed("Disabled"))
	testsupport.Eventually(t, timeout, "the Disabled Warning Event", func() error {
		for _, w := range e.warnings(t, "gwprob", gw.UID) {
			if strings.HasPrefix(w, "Disabled: ") {
				return nil
			}
		}
		return errors.New("none yet")
	})
}

// TestGatewayClassLayer7Disabled: the GatewayClass kubelb is not Accepted while the hub's
// TenantState says Gateway API is disabled for the tenant, and Accepted again when it no
// longer does.
func TestGatewayClassLayer7Disabled(t *testing.T) {
	e := newEnv(t)
	classReason := func(want string) func() error {
		return func() error {
			gc := &gwapiv1.GatewayClass{}
			if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Name: v1alpha1.DefaultClass}, gc); err != nil {
				return err
			}
			c := meta.FindStatusCondition(gc.Status.Conditions, string(gwapiv1.GatewayClassConditionStatusAccepted))
			if c == nil || c.Reason != want {
				return fmt.Errorf("Accepted %+v", c)
			}
			return nil
		}
	}
	testsupport.Eventually(t, timeout, "GatewayClass accepted", classReason("Accepted"))

	ts := &v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "default"}}
	if err := e.Hub.Client.Create(e.ctx, ts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Hub.Client.Delete(e.ctx, ts); err != nil {
			t.Errorf("deleting the TenantState: %v", err)
		}
		testsupport.Eventually(t, timeout, "GatewayClass accepted again", classReason("Accepted"))
	})
	meta.SetStatusCondition(&ts.Status.Conditions, metav1.Condition{Type: v1alpha1.TenantStateConditionGatewayAPI, Status: metav1.ConditionFalse,
		Reason: v1alpha1.TenantStateReasonDisabled, Message: "The hub's platform team disabled Gateway API objects for this tenant."})
	if err := e.Hub.Client.Status().Update(e.ctx, ts); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, timeout, "GatewayClass not accepted", classReason(ReasonClassDisabled))
}

// TestIngressClass: with Ingress support on, the ccm makes the IngressClass kubelb (controller
// kubelb.k8c.io/ingress-controller), and makes it again after it was deleted.
func TestIngressClass(t *testing.T) {
	e := newEnv(t)
	ic := &networkingv1.IngressClass{}
	present := func() error {
		if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Name: v1alpha1.DefaultClass}, ic); err != nil {
			return err
		}
		if ic.Spec.Controller != IngressControllerName || ic.DeletionTimestamp != nil {
			return fmt.Errorf("IngressClass %+v", ic)
		}
		return nil
	}
	testsupport.Eventually(t, timeout, "IngressClass kubelb", present)
	first := ic.UID
	if err := e.Tenant.Client.Delete(e.ctx, ic); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, timeout, "IngressClass kubelb made again", func() error {
		if err := present(); err != nil {
			return err
		}
		if ic.UID == first {
			return errors.New("not deleted yet")
		}
		return nil
	})
}

// TestGatewayClassFollowsTheHub: an Accepted GatewayClass is looked at again, so a hub that
// stops answering after it was Accepted makes it Pending (and Accepted again once the hub
// answers). The tenant and the hub are real API servers; the hub that "stops answering" is a
// client of a loopback port where nothing listens.
func TestGatewayClassFollowsTheHub(t *testing.T) {
	e := newEnv(t)
	tenant := testenv.Start(t, "tenant-gatewayclass", testenv.Options{GatewayAPIChannel: "standard"})
	gc := DesiredGatewayClass()
	gc.Name = "kubelb-follows-hub"
	if err := tenant.Client.Create(e.ctx, gc); err != nil {
		t.Fatal(err)
	}
	down, err := client.New(&rest.Config{Host: "http://127.0.0.1:1", Timeout: 5 * time.Second}, client.Options{Scheme: tenant.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	reconcileWith := func(hub client.Reader) (reconcile.Result, metav1.Condition) {
		t.Helper()
		r := &GatewayClassReconciler{Tenant: tenant.Client, Hub: hub, Namespace: tenantNS}
		res, err := r.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: gc.Name}})
		if err != nil {
			t.Fatal(err)
		}
		got := &gwapiv1.GatewayClass{}
		if err := tenant.Client.Get(e.ctx, client.ObjectKey{Name: gc.Name}, got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, string(gwapiv1.GatewayClassConditionStatusAccepted))
		if c == nil {
			t.Fatal("no Accepted condition")
		}
		return res, *c
	}
	for _, step := range []struct {
		name   string
		hub    client.Reader
		reason string
		again  time.Duration
	}{
		{"the hub answers", e.Hub.Client, "Accepted", recheckHub},
		{"the hub stops answering", down, "Pending", retryHub},
		{"the hub answers again", e.Hub.Client, "Accepted", recheckHub},
	} {
		res, c := reconcileWith(step.hub)
		if c.Reason != step.reason || res.RequeueAfter != step.again {
			t.Errorf("%s: Accepted %s %s (%s), looked at again in %s; want %s, again in %s", step.name, c.Status, c.Reason, c.Message, res.RequeueAfter, step.reason, step.again)
		}
	}
}
