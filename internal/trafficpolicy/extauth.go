package trafficpolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// External authorization (a SecurityPolicy's extAuth): each request is first sent to an
// authorization service, a Service of the policy's namespace, over HTTP or gRPC. The ccm
// embeds the Service in the Route as it embeds backends; the hub reaches it as any backend
// (the tenant's nodes × its NodePort, under the endpoint policy).

// Bounds of an extAuth.
const (
	// MaxExtAuthHeaders bounds headersToExtAuth and http.headersToBackend.
	MaxExtAuthHeaders = 16
	// MaxExtAuthPath bounds http.path.
	MaxExtAuthPath = 256
)

// servedExtAuth is the tree of extAuth fields kubelb serves (extAuthUnsupported checks the
// fields of each backendRefs entry).
var servedExtAuth = map[string]any{
	"http": map[string]any{
		"backendRefs":      nil,
		"path":             nil,
		"headersToBackend": nil,
	},
	"grpc":             map[string]any{"backendRefs": nil},
	"headersToExtAuth": nil,
	"failOpen":         nil,
}

// extAuthBackendRefFields are the fields of an extAuth backendRefs entry kubelb serves.
var extAuthBackendRefFields = map[string]any{"group": nil, "kind": nil, "name": nil, "namespace": nil, "port": nil, "weight": nil}

// extAuthUnsupported names the fields of the extAuth backendRefs entries kubelb does not
// serve (filters...).
func extAuthUnsupported(spec map[string]any) []string {
	e, ok := spec["extAuth"].(map[string]any)
	if !ok {
		return nil
	}
	var un []string
	for _, proto := range []string{"grpc", "http"} {
		m, ok := e[proto].(map[string]any)
		if !ok {
			continue
		}
		refs, _ := m["backendRefs"].([]any)
		for i, r := range refs {
			if rm, ok := r.(map[string]any); ok {
				for _, f := range unsupported(rm, extAuthBackendRefFields) {
					un = append(un, fmt.Sprintf("spec.extAuth.%s.backendRefs[%d]%s", proto, i, f[len("spec"):]))
				}
			}
		}
	}
	return un
}

// ExtAuth is a checked extAuth: the Service port of the authorization service (of the
// policy's namespace), its protocol, and what is sent to it and taken from its answer.
type ExtAuth struct {
	// Service and Port name the authorization service.
	Service string
	Port    int32
	// GRPC: Envoy's Authorization protocol; otherwise plain HTTP.
	GRPC bool
	// Path (HTTP) is the prefix of the authorization requests' paths ("" none).
	Path string
	// HeadersToExtAuth (lower case, sorted, unique) are sent to the service besides those
	// Envoy always sends; HeadersToBackend (HTTP; lower case, sorted, unique) are copied from
	// an allowing answer to the request.
	HeadersToExtAuth []string
	HeadersToBackend []string
	// FailOpen serves requests when the service cannot be reached.
	FailOpen bool
}

// resolveExtAuth checks an extAuth of a policy of namespace ns.
func resolveExtAuth(ns string, e *v1alpha1.SecurityExtAuth) (*ExtAuth, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	out := &ExtAuth{FailOpen: e.FailOpen != nil && *e.FailOpen}
	var refs []v1alpha1.SecurityBackendRef
	field := ""
	switch {
	case (e.HTTP == nil) == (e.GRPC == nil):
		bad("extAuth needs exactly one of http and grpc")
	case e.HTTP != nil:
		refs, field = e.HTTP.BackendRefs, "extAuth.http"
		out.Path = e.HTTP.Path
		if p := e.HTTP.Path; p != "" && (len(p) > MaxExtAuthPath || !strings.HasPrefix(p, "/") || !headerValueOK(p) || strings.ContainsAny(p, "?#")) {
			bad("extAuth.http.path %q: a path starting with /, at most %d printable characters, without spaces, ? or #", truncate(p), MaxExtAuthPath)
		}
		out.HeadersToBackend = headerList("extAuth.http.headersToBackend", e.HTTP.HeadersToBackend, bad)
	default:
		refs, field = e.GRPC.BackendRefs, "extAuth.grpc"
		out.GRPC = true
	}
	if field != "" {
		if len(refs) != 1 {
			bad("%s.backendRefs has %d entries; kubelb serves exactly one Service", field, len(refs))
		} else {
			out.Service, out.Port = extAuthService(field+".backendRefs[0]", ns, refs[0], bad)
		}
	}
	out.HeadersToExtAuth = headerList("extAuth.headersToExtAuth", e.HeadersToExtAuth, bad)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// extAuthService checks a reference to the authorization Service port.
func extAuthService(field, ns string, r v1alpha1.SecurityBackendRef, bad func(string, ...any)) (string, int32) {
	switch {
	case r.Group != nil && *r.Group != "" && *r.Group != "core":
		bad("%s group %q: the authorization service is a core Service", field, truncate(*r.Group))
	case r.Kind != nil && *r.Kind != "Service":
		bad("%s kind %q: the authorization service is a Service", field, truncate(*r.Kind))
	case r.Namespace != nil && *r.Namespace != "" && *r.Namespace != ns:
		bad("%s namespace %q: a Service of another namespace is not yet supported by kubelb; use one of the policy's namespace", field, truncate(*r.Namespace))
	case len(validation.IsDNS1035Label(r.Name)) > 0:
		bad("%s name %q is not a Service name", field, truncate(r.Name))
	case r.Port == nil || *r.Port < 1 || *r.Port > 65535:
		bad("%s needs a port from 1 to 65535", field)
	case r.Weight != nil && *r.Weight == 0:
		bad("%s weight 0 sends no request to the service; leave it unset", field)
	default:
		return r.Name, *r.Port
	}
	return "", 0
}

// headerList checks a list of header names and returns them lower case, sorted, unique.
func headerList(field string, l []string, bad func(string, ...any)) []string {
	if len(l) > MaxExtAuthHeaders {
		bad("%s has %d headers, at most %d", field, len(l), MaxExtAuthHeaders)
		return nil
	}
	var out []string
	for i, h := range l {
		lh := strings.ToLower(h)
		switch {
		case len(h) > MaxNameLength || len(validation.IsHTTPHeaderName(h)) > 0:
			bad("%s[%d] %q is not an HTTP header name", field, i, truncate(h))
		case slices.Contains(hopByHop, lh) || strings.HasPrefix(lh, "x-envoy-"):
			bad("%s[%d] %q is a connection's header, Host or Envoy's own", field, i, truncate(h))
		case !slices.Contains(out, lh):
			out = append(out, lh)
		}
	}
	slices.Sort(out)
	return out
}
