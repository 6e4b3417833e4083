package translate

import (
	"fmt"
	"net/url"
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/routekind"
)

// ReasonInvalidBackendTLS: the TLS a BackendTLSPolicy asks for towards a backend cannot be
// used (no usable CA certificate, an invalid hostname or subject alternative name); that
// backend's share of requests is answered with 500, never sent unencrypted.
const ReasonInvalidBackendTLS = "InvalidBackendTLS"

// Bounds of a Route's backend TLS (the CRD's, checked again: tenants are untrusted).
const (
	maxBackendTLS            = 512
	maxBackendCACertificates = 8
	maxCABundleBytes         = 64 << 10
	maxSubjectAltNames       = 5
	wellKnownSystem          = "System"
	sanTypeHostname          = "Hostname"
	sanTypeURI               = "URI"
)

// backendTLS is the upstream TLS a Route's source context asks for towards one backend
// Service port (namespace, name and port as the route names them): nil for plain text (no
// BackendTLSPolicy targets it, or the route is not an HTTPRoute, a GRPCRoute or a TLSRoute;
// a TLSRoute asks only for the backends of listeners in mode Terminate). When the entry
// cannot be used it returns why: the backend must then answer with an error.
func (t *l7) backendTLS(r *v1alpha1.Route, namespace, name string, port int32) (*ir.UpstreamTLS, string) {
	ctx := sourceContext(r)
	if ctx == nil || len(ctx.BackendTLS) == 0 {
		return nil, ""
	}
	t.rec.taint() // its checks are shared by the routes (caChecked)
	if kind, _ := routekind.Of(r); kind != routekind.HTTPRoute && kind != routekind.GRPCRoute && kind != routekind.TLSRoute {
		return nil, ""
	}
	entries := ctx.BackendTLS
	if len(entries) > maxBackendTLS {
		entries = entries[:maxBackendTLS]
	}
	var e *v1alpha1.BackendTLS
	for i := range entries {
		if entries[i].Namespace == namespace && entries[i].Name == name && entries[i].Port == port {
			e = &entries[i]
			break
		}
	}
	if e == nil {
		if len(ctx.BackendTLS) > maxBackendTLS {
			return nil, fmt.Sprintf("the route carries %d backend TLS entries, more than %d, and Service %s/%s port %d is not among the first", len(ctx.BackendTLS), maxBackendTLS, truncate(namespace), truncate(name), port)
		}
		return nil, ""
	}
	up, msg := t.upstreamTLS(ctx, e)
	if msg != "" {
		return nil, fmt.Sprintf("BackendTLSPolicy %s/%s for Service %s/%s port %d: %s", truncate(namespace), truncate(e.Policy), truncate(namespace), truncate(name), port, msg)
	}
	return up, ""
}

// upstreamTLS checks one backend TLS entry and turns it into the IR's upstream TLS.
func (t *l7) upstreamTLS(ctx *v1alpha1.SourceContext, e *v1alpha1.BackendTLS) (*ir.UpstreamTLS, string) {
	if !validHostname(e.Hostname, false) {
		return nil, fmt.Sprintf("hostname %q is not a DNS name", truncate(e.Hostname))
	}
	up := &ir.UpstreamTLS{SNI: e.Hostname}
	switch {
	case e.CACertificates != nil && e.WellKnownCACertificates != "":
		return nil, "both CA certificates and well-known CA certificates are set"
	case e.CACertificates != nil:
		i := int(*e.CACertificates)
		if i < 0 || i >= len(ctx.BackendCACertificates) || i >= maxBackendCACertificates {
			return nil, fmt.Sprintf("CA certificates %d do not exist", i)
		}
		pemText := ctx.BackendCACertificates[i]
		if msg := t.checkCABundle(pemText); msg != "" {
			return nil, msg
		}
		up.CACertificates = pemText
	case e.WellKnownCACertificates == wellKnownSystem:
		up.SystemCA = true
	case e.WellKnownCACertificates != "":
		return nil, fmt.Sprintf("well-known CA certificates %q are not supported (only %q)", truncate(e.WellKnownCACertificates), wellKnownSystem)
	default:
		return nil, "it has no usable CA certificate (its status says why)"
	}
	if len(e.SubjectAltNames) > maxSubjectAltNames {
		return nil, fmt.Sprintf("%d subject alternative names, more than %d", len(e.SubjectAltNames), maxSubjectAltNames)
	}
	for _, n := range e.SubjectAltNames {
		switch n.Type {
		case sanTypeHostname:
			if !validHostname(n.Hostname, true) {
				return nil, fmt.Sprintf("subject alternative name %q is not a DNS name", truncate(n.Hostname))
			}
			up.SubjectAltNames = append(up.SubjectAltNames, ir.SubjectAltName{Type: ir.SANDNS, Value: n.Hostname})
		case sanTypeURI:
			if msg := checkURI(n.URI); msg != "" {
				return nil, fmt.Sprintf("subject alternative name %q %s", truncate(n.URI), msg)
			}
			up.SubjectAltNames = append(up.SubjectAltNames, ir.SubjectAltName{Type: ir.SANURI, Value: n.URI})
		default:
			return nil, fmt.Sprintf("subject alternative name type %q is not Hostname or URI", truncate(n.Type))
		}
	}
	if len(up.SubjectAltNames) == 0 { // the hostname authenticates the backend
		up.SubjectAltNames = []ir.SubjectAltName{{Type: ir.SANDNS, Value: e.Hostname}}
	}
	return up, ""
}

// checkURI: an absolute URI of printable ASCII, at most 253 bytes.
func checkURI(s string) string {
	if s == "" || len(s) > 253 || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return "is empty, longer than 253 bytes or not printable ASCII"
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque == "" && u.Host == "" && u.Path == "" {
		return "is not an absolute URI"
	}
	return ""
}

// checkCABundle says why a PEM bundle of CA certificates cannot be used ("" when it can):
// at most 64 KiB, only CERTIFICATE blocks, at least one, each an X.509 certificate. Bundles
// are checked once per translation.
func (t *l7) checkCABundle(s string) string {
	if msg, ok := t.caChecked[s]; ok {
		return msg
	}
	msg := caBundleProblem(s)
	if t.caChecked == nil {
		t.caChecked = map[string]string{}
	}
	t.caChecked[s] = msg
	return msg
}

func caBundleProblem(s string) string {
	if err := pki.CheckCABundle(s, maxCABundleBytes); err != nil {
		return "its CA certificates hold " + truncate(err.Error())
	}
	return ""
}
