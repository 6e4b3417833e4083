package translate

import (
	"net/http"
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// sslRedirect reads whether Ingress Route r redirects its TLS hosts from HTTP to HTTPS: its
// annotation kubelb.k8c.io/ssl-redirect ("true" or "false"), else the tenant's
// spec.ingress.sslRedirect. Another value is reported (InvalidAnnotation, a Warning) and the
// tenant's applies.
func (t *l7) sslRedirect(r *v1alpha1.Route, annotations map[string]string) bool {
	v, ok := annotations[v1alpha1.AnnotationSSLRedirect]
	if !ok {
		return t.opts.IngressSSLRedirect
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true
	case "false":
		return false
	}
	tenant := "off"
	if t.opts.IngressSSLRedirect {
		tenant = "on"
	}
	t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonInvalidAnnotation,
		"annotation %s=%q is not understood (use \"true\" or \"false\"); the tenant's spec.ingress.sslRedirect applies (%s)",
		v1alpha1.AnnotationSSLRedirect, truncate(v), tenant)
	return t.opts.IngressSSLRedirect
}

// httpsRedirect is route r on the HTTP listener of a host it redirects to HTTPS: the same
// match, answered with 301 to https, the same host and path. The listener's tenant-facing
// port is 80 and the Location's is 443, both well known, so the Location carries no port (as
// redirect decides for Gateway listeners).
func httpsRedirect(r *ir.Route) *ir.Route {
	c := cloneRoute(r)
	return &ir.Route{Name: c.Name, Owners: c.Owners, Match: c.Match,
		Redirect: &ir.Redirect{Scheme: "https", StatusCode: http.StatusMovedPermanently}}
}
