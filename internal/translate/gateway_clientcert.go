package translate

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// A Gateway's client certificates (spec.tls): the validation of the certificates clients
// present to its HTTPS listeners (spec.tls.frontend: a default and per-port overrides, CA
// certificates in ConfigMaps the ccm reads, context.frontendCACertificates), and the
// certificate the hub presents to backends reached over TLS (spec.tls.backend, a TLS Secret
// mirrored as the listeners' certificates are).

// Bounds of spec.tls (Gateway API's CRD bounds, enforced again: the hub does not validate the
// embedded Gateway) and of the Route's context.
const (
	maxFrontendPerPort        = 64
	maxCACertificateRefs      = 16
	maxFrontendCACertificates = 16
)

// frontendCA is what one validation (the default, or a port's override) of a Gateway gives:
// the client validation of the listeners it applies to (nil when none of its CA certificates
// can be used: those listeners are not served), and the first problem of its references.
type frontendCA struct {
	cv      *ir.ClientValidation
	reason  gwv1.ListenerConditionReason // "" when every reference resolves
	message string
}

// frontendValidation is the validation of a Gateway's listeners on port: its perPort
// override (the first 64 are read), else its default; nil for none.
func (g *gateway) frontendValidation(port gwv1.PortNumber) *gwv1.FrontendTLSValidation {
	tls := g.obj.Spec.TLS
	if tls == nil || tls.Frontend == nil {
		return nil
	}
	perPort := tls.Frontend.PerPort
	if len(perPort) > maxFrontendPerPort {
		perPort = perPort[:maxFrontendPerPort]
	}
	for i := range perPort {
		if perPort[i].Port == port {
			return perPort[i].TLS.Validation
		}
	}
	return tls.Frontend.Default.Validation
}

// insecureFallback lists the validations of a Gateway in mode AllowInsecureFallback ("the
// default", "port N"), for its InsecureFrontendValidationMode condition.
func (g *gateway) insecureFallback() []string {
	tls := g.obj.Spec.TLS
	if tls == nil || tls.Frontend == nil {
		return nil
	}
	var out []string
	if v := tls.Frontend.Default.Validation; v != nil && v.Mode == gwv1.AllowInsecureFallback {
		out = append(out, "the default")
	}
	for i, p := range tls.Frontend.PerPort {
		if i == maxFrontendPerPort {
			break
		}
		if v := p.TLS.Validation; v != nil && v.Mode == gwv1.AllowInsecureFallback {
			out = append(out, fmt.Sprintf("port %d", p.Port))
		}
	}
	return out
}

// clientValidation applies the Gateway's client certificate validation to an HTTPS listener
// (the Gateway's or one of its ListenerSets'): the CA certificates of the validation of its
// port. A reference that cannot be used sets ResolvedRefs False with its reason; when none
// can, the listener is not accepted (NoValidCACertificate) and not served, so that no client
// ever reaches it unvalidated.
//
// A ClientTrafficPolicy's validation (clienttraffic_clientcert.go) applies where the Gateway's
// own does not validate the port, to its HTTPS listeners and its TLS listeners in mode
// Terminate (the Gateway's own applies to HTTPS listeners only).
func (t *l7) clientValidation(l *gwListener) {
	v := l.gw.frontendValidation(l.spec.Port)
	pv := t.policyValidation(l.gw, l.spec.Port)
	if l.spec.Protocol != gwv1.HTTPSProtocolType && v != nil {
		// The Gateway's own validation is for HTTPS listeners; on its ports it wins over the
		// policy's (which then applies to none of their listeners).
		if pv != nil {
			pv.shadowed(t, l.gw, l.spec.Port)
		}
		return
	}
	switch {
	case v != nil && pv != nil:
		pv.shadowed(t, l.gw, l.spec.Port) // the Gateway's own validation wins
		pv = nil
	case pv != nil:
		v = pv.validation
	case v == nil:
		return
	}
	ca := t.frontendCA(l.gw, v)
	r := l.route()
	// The listener's first failing reference names its ResolvedRefs condition.
	own := ca.reason != "" && l.resolved.Status == metav1.ConditionTrue
	if own {
		l.resolved = t.cond(r, string(gwv1.ListenerConditionResolvedRefs), false, string(ca.reason), "%s", ca.message)
	}
	if ca.cv == nil {
		msg := fmt.Sprintf("client certificate validation of port %d%s has no usable CA certificate: %s", l.spec.Port, pv.describe(), ca.message)
		l.accepted = t.cond(r, string(gwv1.ListenerConditionAccepted), false, string(gwv1.ListenerReasonNoValidCACertificate), "%s", msg)
		t.problems.Add(l.ref(t), ir.SeverityError, string(gwv1.ListenerReasonNoValidCACertificate), "%s; the listener is not served", msg)
		return
	}
	if ca.reason != "" {
		l.someCACertificates = own
		t.problems.Add(l.ref(t), ir.SeverityWarning, string(ca.reason), "%s; client certificates are verified against the other CA certificates", ca.message)
	}
	l.validation = ca.cv
	if pv != nil && pv.optional {
		cv := *ca.cv
		cv.Optional = true
		l.validation = &cv
	}
}

// frontendCA resolves one validation of a Gateway (once per translation): the CA
// certificates of its caCertificateRefs (the first 16), joined, at most 64 KiB.
func (t *l7) frontendCA(g *gateway, v *gwv1.FrontendTLSValidation) frontendCA {
	if ca, ok := g.frontendCAs[v]; ok {
		return ca
	}
	var ca frontendCA
	refs := v.CACertificateRefs
	var msgs []string
	if len(refs) > maxCACertificateRefs {
		msgs = append(msgs, fmt.Sprintf("only the first %d of %d caCertificateRefs are read", maxCACertificateRefs, len(refs)))
		refs = refs[:maxCACertificateRefs]
	}
	var bundles []string
	size := 0
	_, secrets := g.policyValidationOf(v) // a ClientTrafficPolicy's may name Secrets
	for i, ref := range refs {
		pemText, reason, msg := t.frontendCARef(g, ref, secrets)
		if reason == "" && !slices.Contains(bundles, pemText) {
			if size+len(pemText) > maxCABundleBytes {
				reason, msg = gwv1.ListenerReasonInvalidCACertificateRef, fmt.Sprintf("makes the CA certificates larger than %d bytes", maxCABundleBytes)
			} else {
				bundles = append(bundles, pemText)
				size += len(pemText)
			}
		}
		if reason == "" {
			continue
		}
		if ca.reason == "" || reason == gwv1.ListenerReasonRefNotPermitted { // RefNotPermitted wins: the user must add a grant
			ca.reason = reason
		}
		msgs = append(msgs, fmt.Sprintf("caCertificateRefs[%d] %s", i, msg))
	}
	if len(refs) == 0 {
		ca.reason = gwv1.ListenerReasonInvalidCACertificateRef
		msgs = append(msgs, "no caCertificateRefs")
	}
	ca.message = strings.Join(msgs, "; ")
	if ca.reason == "" && ca.message != "" { // only more references than are read
		ca.reason = gwv1.ListenerReasonInvalidCACertificateRef
	}
	if len(bundles) > 0 {
		ca.cv = &ir.ClientValidation{CACertificates: strings.Join(bundles, ""), AllowInsecureFallback: v.Mode == gwv1.AllowInsecureFallback}
	}
	if g.frontendCAs == nil {
		g.frontendCAs = map[*gwv1.FrontendTLSValidation]frontendCA{}
	}
	g.frontendCAs[v] = ca
	return ca
}

// frontendCARef resolves one caCertificateRef of a Gateway into its PEM CA certificates, or
// says why it cannot be used: a ConfigMap of the core group (InvalidCACertificateKind), in
// the Gateway's namespace or permitted by a ReferenceGrant (RefNotPermitted), that the ccm
// found with usable CA certificates in its key ca.crt (InvalidCACertificateRef).
//
// A ClientTrafficPolicy's validation (secrets) may also name Secrets of the Gateway's
// namespace, which the ccm reads as it does ConfigMaps (kind Secret in the Route's
// context.frontendCACertificates).
func (t *l7) frontendCARef(g *gateway, ref gwv1.ObjectReference, secrets bool) (string, gwv1.ListenerConditionReason, string) {
	group, kind := string(ref.Group), string(ref.Kind)
	if group == "core" {
		group = ""
	}
	ns := g.namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	what := fmt.Sprintf("%s %s/%s", truncate(refKindName(group, kind)), truncate(ns), truncate(string(ref.Name)))
	if group != "" || (kind != "ConfigMap" && (!secrets || kind != "Secret")) {
		return "", gwv1.ListenerReasonInvalidCACertificateKind, fmt.Sprintf("%s: only ConfigMaps (core group) can hold CA certificates", what)
	}
	if reason, msg := checkObjectName(kind, ns, string(ref.Name)); reason != "" {
		return "", gwv1.ListenerReasonInvalidCACertificateRef, msg
	}
	if ns != g.namespace && !t.granted(g.route, "", "ConfigMap", ns, string(ref.Name)) {
		return "", gwv1.ListenerReasonRefNotPermitted, fmt.Sprintf("%s is in another namespace and no ReferenceGrant there permits it%s", what, noContext(g.route))
	}
	ctx := sourceContext(g.route)
	if ctx == nil {
		return "", gwv1.ListenerReasonInvalidCACertificateRef, fmt.Sprintf("%s cannot be read: the Route carries no source context (as from a KubeLB CE ccm)", what)
	}
	entries := ctx.FrontendCACertificates
	if len(entries) > maxFrontendCACertificates {
		entries = entries[:maxFrontendCACertificates]
	}
	i := slices.IndexFunc(entries, func(e v1alpha1.FrontendCACertificate) bool {
		return e.Namespace == ns && e.Name == string(ref.Name) && frontendCAKind(e.Kind) == kind
	})
	if i < 0 {
		return "", gwv1.ListenerReasonInvalidCACertificateRef, fmt.Sprintf("%s has not reached the hub (the ccm reports the first %d ConfigMaps and Secrets a Gateway and its ClientTrafficPolicies name)", what, maxFrontendCACertificates)
	}
	e := entries[i]
	if e.Problem != "" {
		return "", gwv1.ListenerReasonInvalidCACertificateRef, fmt.Sprintf("%s %s", what, truncate(e.Problem))
	}
	if e.CACertificates == nil || *e.CACertificates < 0 || int(*e.CACertificates) >= len(ctx.BackendCACertificates) || *e.CACertificates >= maxBackendCACertificates {
		return "", gwv1.ListenerReasonInvalidCACertificateRef, fmt.Sprintf("%s: its CA certificates are missing from the Route", what)
	}
	pemText := ctx.BackendCACertificates[*e.CACertificates]
	if msg := t.checkCABundle(pemText); msg != "" {
		return "", gwv1.ListenerReasonInvalidCACertificateRef, fmt.Sprintf("%s: %s", what, msg)
	}
	if !strings.HasSuffix(pemText, "\n") {
		pemText += "\n"
	}
	return pemText, "", ""
}

// frontendCAKind is the kind of a context.frontendCACertificates entry (unset: ConfigMap).
func frontendCAKind(kind string) string {
	if kind == "" {
		return "ConfigMap"
	}
	return kind
}

func refKindName(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// backendClientCertificate resolves a Gateway's spec.tls.backend.clientCertificateRef: the
// IR Secret presented to backends reached over TLS (BackendTLSPolicy), and the Gateway's
// ResolvedRefs condition when it cannot be used (InvalidClientCertificateRef, RefNotPermitted).
// Without a usable certificate none is presented; the backend decides whether to accept that.
func (t *l7) backendClientCertificate(g *gateway) {
	tls := g.obj.Spec.TLS
	if tls == nil || tls.Backend == nil || tls.Backend.ClientCertificateRef == nil {
		return
	}
	ref := tls.Backend.ClientCertificateRef
	r := g.route
	fail := func(reason gwv1.GatewayConditionReason, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		c := t.cond(r, string(gwv1.GatewayConditionResolvedRefs), false, string(reason), "%s", msg)
		g.clientCertCond = &c
		t.problems.Add(t.ref(r, ""), ir.SeverityError, string(reason), "%s; no client certificate is presented to backends", msg)
	}
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if group == "core" {
		group = ""
	}
	ns := g.namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	what := fmt.Sprintf("tls.backend.clientCertificateRef %s %s/%s", truncate(refKindName(group, kind)), truncate(ns), truncate(string(ref.Name)))
	if group != "" || kind != "Secret" {
		fail(gwv1.GatewayReasonInvalidClientCertificateRef, "%s is not a Secret", what)
		return
	}
	if ns != g.namespace && !t.granted(r, "", "Secret", ns, string(ref.Name)) {
		fail(gwv1.GatewayReasonRefNotPermitted, "%s is in another namespace and no ReferenceGrant there permits it%s", what, noContext(r))
		return
	}
	name, reason, msg := t.certificate(t.ref(r, ""), ns, string(ref.Name))
	if reason != "" {
		fail(gwv1.GatewayReasonInvalidClientCertificateRef, "%s: %s", what, msg)
		return
	}
	g.clientCert = name
}

// resolvedRefsCondition is a Gateway's ResolvedRefs condition, written when it names a backend
// client certificate: False when the certificate cannot be used, or (ListenersNotResolved)
// when a listener's references do not all resolve; nil when it names none.
func (t *l7) resolvedRefsCondition(g *gateway) *metav1.Condition {
	if g.clientCertCond != nil {
		return g.clientCertCond
	}
	if g.clientCert == "" {
		return nil
	}
	var bad []string
	for _, l := range g.listeners[:g.own] {
		if l.resolved.Status != metav1.ConditionTrue {
			bad = append(bad, truncate(string(l.spec.Name)))
		}
	}
	if len(bad) > 0 {
		c := t.cond(g.route, string(gwv1.GatewayConditionResolvedRefs), false, string(gwv1.GatewayReasonListenersNotResolved), "the references of listeners %s do not all resolve", strings.Join(bad, ", "))
		return &c
	}
	c := t.cond(g.route, string(gwv1.GatewayConditionResolvedRefs), true, string(gwv1.GatewayReasonResolvedRefs), "the backend client certificate and every listener's references are resolved")
	return &c
}
