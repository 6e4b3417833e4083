package translate

import (
	"fmt"
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/nginxurl"
)

// The ingress-nginx annotations of external authentication kubelb honours (without the
// prefix).
const (
	nginxAuthURL             = nginxurl.AuthURL
	nginxAuthResponseHeaders = "auth-response-headers"
)

// maxNginxAuthHeaders bounds auth-response-headers (Envoy's ext_authz, as a SecurityPolicy's).
const maxNginxAuthHeaders = 16

// nginxExtAuth is what auth-url and auth-response-headers ask for, checked: the Service of the
// Ingress's namespace asked about each request, at the URL's path, and the headers of its
// allowing answer copied to the request.
type nginxExtAuth struct {
	svc     nginxurl.Service
	headers []string
	// name is the service the routes ask (ir.Route.ExtAuth), once resolved; resolved: looked
	// up (the first route that forwards).
	name     string
	resolved bool
}

// nginxExtAuthAnnotations reads auth-url, the in-cluster URL of a Service of the Ingress's
// namespace ns (nginxurl.Auth), and auth-response-headers (header names, comma-separated).
// A URL kubelb does not read closes the paths (an Error; they answer 500): an Ingress asking
// for authentication is never served without. A header list it does not read is a Warning,
// and no header is copied.
func (t *l7) nginxExtAuthAnnotations(r *v1alpha1.Route, ns string, value func(string) (string, bool), bad func(key, v, want string)) (*nginxExtAuth, bool) {
	v, ok := value(nginxAuthURL)
	if !ok {
		return nil, false
	}
	svc, msg := plainHTTP(nginxurl.Auth(v, ns))
	if msg != "" {
		t.problems.Add(t.ref(r, ""), ir.SeverityError, ReasonInvalidAnnotation, "annotation %s%s=%q: %s; the Ingress's paths answer 500 until it is fixed",
			NginxAnnotationPrefix, nginxAuthURL, truncate(v), msg)
		return nil, true
	}
	a := &nginxExtAuth{svc: svc}
	if h, ok := value(nginxAuthResponseHeaders); ok {
		var headers []string
		for _, e := range strings.Split(h, ",") {
			if e = strings.ToLower(strings.TrimSpace(e)); e == "" {
				continue
			}
			if !validHeaderName(e) || len(headers) == maxNginxAuthHeaders {
				bad(nginxAuthResponseHeaders, h, fmt.Sprintf("header names, comma-separated, at most %d; none is copied", maxNginxAuthHeaders))
				headers = nil
				break
			}
			headers = append(headers, e)
		}
		a.headers = headers
	}
	return a, false
}

// extAuth resolves the service of auth-url (once) for the routes of Ingress Route r
// (namespace ns) that forward to backends: the hub reaches it as it reaches the Ingress's
// backends (the tenant's nodes × its NodePort, under the endpoint policy), and the listeners
// serving the routes run Envoy's ext_authz for it (markListeners). A Service the Route does
// not carry, or more services than a listener runs, close the paths (500, an Error).
func (n *nginxIngress) extAuth(t *l7, r *v1alpha1.Route, ns string) {
	a := n.authService
	if a == nil || a.resolved || !n.forwards() {
		return
	}
	a.resolved = true
	owner := t.ref(r, "")
	name := r.Name + "/" + nginxAuthURL
	svc, _, msg := t.extAuths.get(name,
		func() (*ir.ExtAuthService, string) {
			b, _, why := t.backend(r, owner, ns, a.svc.Name, a.svc.Port, false, "")
			if why != "" {
				return nil, why
			}
			// Envoy sends the service Host, the method, Authorization and Content-Length;
			// nginx sends every header: the session cookie of an SSO proxy too.
			return &ir.ExtAuthService{Name: name, Cluster: b.cluster, PathOverride: a.svc.Path, HeadersToExtAuth: []string{"cookie"}, HeadersToBackend: a.headers}, ""
		},
		func() string {
			return fmt.Sprintf("annotation %s%s: the tenant's routes are under more than %d external authorization services (auth-url Ingresses and SecurityPolicies with extAuth); the Ingress's paths answer 500 until fewer are used",
				NginxAnnotationPrefix, nginxAuthURL, maxExtAuthServices)
		},
		func(why string) string {
			return fmt.Sprintf("annotation %s%s: %s; the Ingress's paths answer 500 until it is fixed", NginxAnnotationPrefix, nginxAuthURL, why)
		})
	if svc == nil {
		t.problems.Add(owner, ir.SeverityError, ReasonExtAuthUnusable, "%s", msg)
		n.authClosed = true
		return
	}
	a.name = name
}
