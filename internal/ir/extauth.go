package ir

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ExtAuthService is an external authorization service (a SecurityPolicy's extAuth) that the
// listeners serving its routes ask about each of their requests (Envoy's ext_authz filter,
// one per service): a denying answer reaches the client with its status; an allowing one lets
// the request on (with HeadersToBackend of the answer, HTTP); a service that cannot be
// reached refuses the request with 403, or lets it on when FailOpen.
type ExtAuthService struct {
	// Name is unique in the listener; routes name it (Route.ExtAuth).
	Name string `json:"name"`
	// Cluster is the cluster of the service (HTTP/2 for gRPC).
	Cluster string `json:"cluster"`
	// GRPC: Envoy's envoy.service.auth.v3.Authorization protocol; otherwise plain HTTP.
	GRPC bool `json:"grpc,omitempty"`
	// Path (HTTP) prefixes the authorization requests' paths.
	Path string `json:"path,omitempty"`
	// PathOverride (HTTP), instead of Path, is the whole path of every authorization request
	// (ingress-nginx's auth-url asks its URL as written).
	PathOverride string `json:"pathOverride,omitempty"`
	// HeadersToExtAuth (lower case) are sent to the service besides Envoy's own.
	HeadersToExtAuth []string `json:"headersToExtAuth,omitempty"`
	// HeadersToBackend (HTTP, lower case) are copied from an allowing answer to the request.
	HeadersToBackend []string `json:"headersToBackend,omitempty"`
	// FailOpen serves requests when the service cannot be reached.
	FailOpen bool `json:"failOpen,omitempty"`
}

// Bounds of external authorization: the services of one listener, the headers of one.
const (
	MaxListenerExtAuths = 8
	maxExtAuthHeaders   = 16
	maxExtAuthString    = 256
	// maxExtAuthName bounds a service's name: "<Route>/<namespace>/<policy>", Kubernetes
	// names of at most 253, 63 and 253 characters.
	maxExtAuthName = 640
)

// ExtAuthNames are the external authorization services the routes of the configuration ask.
func (rc *RouteConfig) ExtAuthNames() []string {
	var out []string
	rc.anyRoute(func(r *Route) bool {
		if r.ExtAuth != "" && !slices.Contains(out, r.ExtAuth) {
			out = append(out, r.ExtAuth)
		}
		return false
	})
	slices.Sort(out)
	return out
}

// validateExtAuth checks the listener's external authorization services: existing clusters,
// sane fields, sorted by name, exactly those its routes ask (routes: ExtAuthNames by route
// configuration).
func (l *Listener) validateExtAuth(clusters map[string]bool, routes map[string][]string) error {
	var want []string
	for _, rc := range append([]string{l.RouteConfig}, tlsRouteConfigs(l)...) {
		want = append(want, routes[rc]...)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if len(l.ExtAuth) > 0 && !l.Protocol.ServesHTTP() {
		return fmt.Errorf("external authorization on a %s listener (HTTP, HTTPS and HTTP3 only)", l.Protocol)
	}
	if len(l.ExtAuth) > MaxListenerExtAuths {
		return fmt.Errorf("%d external authorization services, at most %d", len(l.ExtAuth), MaxListenerExtAuths)
	}
	var have []string
	for _, s := range l.ExtAuth {
		if err := s.validate(clusters); err != nil {
			return fmt.Errorf("external authorization %q: %w", s.Name, err)
		}
		have = append(have, s.Name)
	}
	if !slices.IsSorted(have) || len(slices.Compact(slices.Clone(have))) != len(have) {
		return errors.New("external authorization services not sorted by name, or repeated")
	}
	if !slices.Equal(have, want) {
		return fmt.Errorf("external authorization services %v, but its routes ask %v", have, want)
	}
	return nil
}

// tlsRouteConfigs are the route configurations of an HTTPS listener's filter chains.
func tlsRouteConfigs(l *Listener) []string {
	var out []string
	for _, t := range l.TLS {
		out = append(out, t.RouteConfig)
	}
	return out
}

func (s *ExtAuthService) validate(clusters map[string]bool) error {
	printable := func(v string) bool {
		return len(v) <= maxExtAuthString && !strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r > '~' })
	}
	switch {
	case s.Name == "" || len(s.Name) > maxExtAuthName || strings.ContainsFunc(s.Name, func(r rune) bool { return r <= ' ' || r > '~' }):
		return errors.New("name empty, too long or not printable")
	case !clusters[s.Cluster]:
		return fmt.Errorf("cluster %q does not exist", s.Cluster)
	case s.Path != "" && (!strings.HasPrefix(s.Path, "/") || !printable(s.Path) || strings.ContainsAny(s.Path, "?#")):
		return fmt.Errorf("path %q is not a path", s.Path)
	case s.PathOverride != "" && (!strings.HasPrefix(s.PathOverride, "/") || !printable(s.PathOverride) || strings.ContainsAny(s.PathOverride, "?#") || s.Path != ""):
		return fmt.Errorf("path override %q is not a path, or comes with a path prefix", s.PathOverride)
	case s.GRPC && (s.Path != "" || s.PathOverride != "" || len(s.HeadersToBackend) > 0):
		return errors.New("path and headers to the backend are for an HTTP service")
	case len(s.HeadersToExtAuth) > maxExtAuthHeaders || len(s.HeadersToBackend) > maxExtAuthHeaders:
		return fmt.Errorf("more than %d headers", maxExtAuthHeaders)
	}
	for _, h := range append(slices.Clone(s.HeadersToExtAuth), s.HeadersToBackend...) {
		if h == "" || !printable(h) || h != strings.ToLower(h) || strings.ContainsAny(h, ":\"(),/;<=>?@[\\]{}") {
			return fmt.Errorf("header %q is not a lower-case header name", h)
		}
	}
	return nil
}
