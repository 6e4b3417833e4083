package source

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestClientTrafficClientValidation: a ClientTrafficPolicy's tls.clientValidation, lifetimes,
// session resumption and enableEnvoyHeaders against real API servers. The policy is Accepted
// and travels in the Gateway's Route with every new field; the ConfigMap and the Secret (the
// CRD's default kind) it names travel in context.frontendCACertificates with their CA
// certificates. The ConfigMap losing its key ca.crt and the Secret deleted re-mirror the
// Gateway: their entries then say why they cannot be used (the hub fails closed). A policy
// with mode Request is Invalid, naming it.
func TestClientTrafficClientValidation(t *testing.T) {
	e := newEnv(t)
	const ns = "mtls"
	gw, _, _ := e.policyTargets(t, ns)
	ca := testCA(t)
	e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client-ca"}, Data: map[string]string{"ca.crt": ca}})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-ca"}, Data: map[string][]byte{"ca.crt": []byte(ca)}})
	e.create(t, egPolicy(t, ClientTrafficPolicyKind, ns, "mtls", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
timeout: {http: {requestHeadersReceivedTimeout: 5s, streamIdleTimeout: 1m}, tcp: {tlsHandshakeTimeout: 3s}}
connection: {connectionLimit: {value: 10, maxConnectionDuration: 10m, maxRequestsPerConnection: 100, maxStreamDuration: 30s}}
headers: {enableEnvoyHeaders: false}
clientIPDetection: {directSourceIP: {}}
tls:
  session: {resumption: {stateless: {}}}
  clientValidation:
    optional: true
    caCertificateRefs: [{kind: ConfigMap, name: client-ca}, {name: secret-ca}]
`))
	e.policyAncestor(t, ClientTrafficPolicyKind, ns, "mtls", "Gateway", ns, "edge", "True", "Accepted")
	entries := func(c *v1alpha1.SourceContext) map[string]string {
		out := map[string]string{}
		for _, f := range c.FrontendCACertificates {
			v := f.Problem
			if f.CACertificates != nil && int(*f.CACertificates) < len(c.BackendCACertificates) && c.BackendCACertificates[*f.CACertificates] == ca {
				v = "the CA"
			}
			out[f.Kind+" "+f.Namespace+"/"+f.Name] = v
		}
		return out
	}
	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		c := rt.Spec.Source.Kubernetes.Context
		ct := c.ClientTraffic
		if ct == nil || ct.Name != "mtls" || ct.TLS == nil || ct.TLS.ClientValidation == nil || ct.TLS.Session == nil || ct.TLS.Session.Resumption == nil ||
			ct.TLS.Session.Resumption.Stateless == nil || ct.TLS.Session.Resumption.Stateful != nil {
			return fmt.Errorf("clientTraffic %+v", ct)
		}
		if v := ct.TLS.ClientValidation; v.Optional == nil || !*v.Optional || len(v.CACertificateRefs) != 2 || v.CACertificateRefs[1].Kind != "Secret" {
			return fmt.Errorf("clientValidation %+v (the CRD defaults the kind to Secret)", v)
		}
		if h := ct.Timeout.HTTP; h.RequestHeadersReceivedTimeout != "5s" || h.StreamIdleTimeout != "1m" || ct.Timeout.TCP.TLSHandshakeTimeout != "3s" {
			return fmt.Errorf("timeouts %+v %+v", h, ct.Timeout.TCP)
		}
		if l := ct.Connection.ConnectionLimit; l.MaxConnectionDuration != "10m" || l.MaxStreamDuration != "30s" || l.MaxRequestsPerConnection == nil || *l.MaxRequestsPerConnection != 100 {
			return fmt.Errorf("connectionLimit %+v", l)
		}
		if ct.Headers == nil || ct.Headers.EnableEnvoyHeaders == nil || *ct.Headers.EnableEnvoyHeaders || ct.ClientIPDetection == nil || ct.ClientIPDetection.DirectSourceIP == nil {
			return fmt.Errorf("headers %+v, clientIPDetection %+v", ct.Headers, ct.ClientIPDetection)
		}
		if got, want := entries(c), map[string]string{" mtls/client-ca": "the CA", "Secret mtls/secret-ca": "the CA"}; fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("frontendCACertificates %v, want %v", got, want)
		}
		return nil
	})

	// The ConfigMap loses its key, the Secret goes: the Route follows.
	objects.Update(t, e.Tenant.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client-ca"}}, func(cm *corev1.ConfigMap) {
		cm.Data = map[string]string{"other": "x"}
	})
	if err := e.Tenant.Client.Delete(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-ca"}}); err != nil {
		t.Fatal(err)
	}
	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		if got, want := entries(rt.Spec.Source.Kubernetes.Context), map[string]string{" mtls/client-ca": "has no key ca.crt", "Secret mtls/secret-ca": "does not exist"}; fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("frontendCACertificates %v, want %v", got, want)
		}
		return nil
	})

	objects.Update(t, e.Tenant.Client, egPolicy(t, ClientTrafficPolicyKind, ns, "mtls", ""), func(p *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(p.Object, "Request", "spec", "tls", "clientValidation", "mode")
		unstructured.RemoveNestedField(p.Object, "spec", "tls", "clientValidation", "optional")
	})
	msg := e.policyAncestor(t, ClientTrafficPolicyKind, ns, "mtls", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "tls.clientValidation.mode Request is not yet supported by kubelb") {
		t.Errorf("Invalid message %q does not name the mode", msg)
	}
}
