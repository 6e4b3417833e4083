package source

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestSecurityPolicyExtAuth: an HTTPRoute's SecurityPolicy with extAuth travels in the route's
// Route. While its authorization Service does not exist the policy says so (Invalid, Warning
// Event) and the Route carries no such Service; when the ClusterIP Service appears the Route
// embeds its NodePort twin (as a backend's) and the policy is Accepted. A policy with an
// extAuth field kubelb does not serve (bodyToExtAuth) is Invalid naming it; fixed, the
// Gateway's Route carries it and embeds the Service as well.
func TestSecurityPolicyExtAuth(t *testing.T) {
	e := newEnv(t)
	const ns = "ext-auth"
	gw, web, _ := e.policyTargets(t, ns)
	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "authz", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
extAuth:
  http:
    backendRefs: [{name: auth, port: 8080}]
    path: /check
    headersToBackend: [x-user]
  headersToExtAuth: [x-tenant]
`))
	embedsAuth := func(rt *v1alpha1.Route) bool {
		for _, s := range rt.Spec.Source.Kubernetes.Services {
			if s.Labels[v1alpha1.LabelOriginName] == "auth" || s.Name == "auth" {
				return true
			}
		}
		return false
	}
	msg := e.policyAncestor(t, SecurityPolicyKind, ns, "authz", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "Service "+ns+"/auth named by extAuth.http.backendRefs does not exist") {
		t.Errorf("message %q does not name the missing Service", msg)
	}
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		sec := rt.Spec.Source.Kubernetes.Context.Security
		if sec == nil || sec.ExtAuth == nil || sec.ExtAuth.HTTP == nil || sec.ExtAuth.HTTP.Path != "/check" || sec.ExtAuth.HTTP.BackendRefs[0].Name != "auth" {
			return fmt.Errorf("security %+v", sec)
		}
		if embedsAuth(rt) {
			return fmt.Errorf("the Route embeds a Service auth that does not exist")
		}
		return nil
	})
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "SecurityPolicy", Name: "authz", Reason: "Invalid", Type: "Warning"})

	// The Service appears: its NodePort twin travels in the route's Route; Accepted.
	e.create(t, clusterIP(ns, "auth", 8080))
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		for _, s := range rt.Spec.Source.Kubernetes.Services {
			if s.Labels[v1alpha1.LabelOriginName] == "auth" && s.Spec.Type == corev1.ServiceTypeNodePort && len(s.Spec.Ports) == 1 &&
				s.Spec.Ports[0].Port == 8080 && s.Spec.Ports[0].NodePort > 0 {
				return nil
			}
		}
		return fmt.Errorf("the Route does not embed the NodePort twin of Service auth: %d Services", len(rt.Spec.Source.Kubernetes.Services))
	})
	e.policyAncestor(t, SecurityPolicyKind, ns, "authz", "Gateway", ns, "edge", "True", "Accepted")

	// On the Gateway, a field kubelb does not serve: Invalid, naming it; the Gateway's Route
	// carries no policy.
	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "gateway-authz", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
extAuth:
  grpc:
    backendRefs: [{name: auth, port: 8080}]
  bodyToExtAuth: {maxRequestBytes: 1024}
`))
	msg = e.policyAncestor(t, SecurityPolicyKind, ns, "gateway-authz", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "spec.extAuth.bodyToExtAuth not yet supported by kubelb") {
		t.Errorf("message %q does not name bodyToExtAuth", msg)
	}
	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		if c := rt.Spec.Source.Kubernetes.Context; c != nil && c.Security != nil {
			return fmt.Errorf("the Gateway's Route carries %+v", c.Security)
		}
		return nil
	})

	// Fixed: the Gateway's Route carries the policy and embeds the Service's twin too.
	objects.Update(t, e.Tenant.Client, egPolicy(t, SecurityPolicyKind, ns, "gateway-authz", ""), func(p *unstructured.Unstructured) {
		unstructured.RemoveNestedField(p.Object, "spec", "extAuth", "bodyToExtAuth")
	})
	e.policyAncestor(t, SecurityPolicyKind, ns, "gateway-authz", "Gateway", ns, "edge", "True", "Accepted")
	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		if c := rt.Spec.Source.Kubernetes.Context; c == nil || c.Security == nil || c.Security.ExtAuth == nil || c.Security.ExtAuth.GRPC == nil {
			return fmt.Errorf("the Gateway's Route carries no extAuth")
		}
		if !embedsAuth(rt) {
			return fmt.Errorf("the Gateway's Route does not embed Service auth")
		}
		return nil
	})
}
