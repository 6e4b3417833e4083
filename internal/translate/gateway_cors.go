package translate

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/ir"
)

// The CORS filter of an HTTPRoute rule (Gateway API HTTPRouteCORS) becomes the CORS policy of
// its routes (ir.CORSPolicy); the listeners serving them run Envoy's CORS filter.

// corsOriginRE is an origin as Gateway API's CORSOrigin allows it (scheme, host with an
// optional leading wildcard label or "*" alone, optional port); "*" alone is read apart.
var corsOriginRE = regexp.MustCompile(`^(https?)://(\*|(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*)(?::([0-9]{1,5}))?$`)

// corsDefaultMaxAge is Access-Control-Max-Age when maxAge is not set (Gateway API's default).
const corsDefaultMaxAge = 5

// corsPolicy reads a CORS filter: the policy, what it leaves out (a warning, "" for nothing),
// or why the rule cannot be served. Lists are bounded as Gateway API bounds them.
func corsPolicy(f *gwv1.HTTPCORSFilter) (*ir.CORSPolicy, string, string) {
	if len(f.AllowOrigins) > ir.MaxCORSOrigins || len(f.AllowHeaders) > ir.MaxCORSHeaders || len(f.ExposeHeaders) > ir.MaxCORSHeaders || len(f.AllowMethods) > len(httpMethods) {
		return nil, "", fmt.Sprintf("at most %d origins, %d methods and %d allowed and exposed headers each", ir.MaxCORSOrigins, len(httpMethods), ir.MaxCORSHeaders)
	}
	out := &ir.CORSPolicy{MaxAge: corsDefaultMaxAge, AllowCredentials: f.AllowCredentials != nil && *f.AllowCredentials}
	if f.MaxAge < 0 {
		return nil, "", fmt.Sprintf("maxAge %d is negative", f.MaxAge)
	}
	if f.MaxAge > 0 {
		out.MaxAge = uint32(f.MaxAge)
	}
	for _, o := range f.AllowOrigins {
		origin, err := corsOrigin(string(o))
		if err != "" {
			return nil, "", err
		}
		if !slices.Contains(out.AllowOrigins, origin) {
			out.AllowOrigins = append(out.AllowOrigins, origin)
		}
	}
	if len(out.AllowOrigins) > 1 && slices.Contains(out.AllowOrigins, "*") {
		return nil, "", `allowOrigins "*" cannot be listed with other origins`
	}
	for _, m := range f.AllowMethods {
		s := string(m)
		if s != "*" && !slices.Contains(httpMethods, s) {
			return nil, "", fmt.Sprintf("allowMethods: %q is not an HTTP method", truncate(s))
		}
		if !slices.Contains(out.AllowMethods, s) {
			out.AllowMethods = append(out.AllowMethods, s)
		}
	}
	if len(out.AllowMethods) > 1 && slices.Contains(out.AllowMethods, "*") {
		return nil, "", `allowMethods "*" cannot be listed with other methods`
	}
	var err string
	if out.AllowHeaders, err = corsHeaders("allowHeaders", f.AllowHeaders); err != "" {
		return nil, "", err
	}
	if out.ExposeHeaders, err = corsHeaders("exposeHeaders", f.ExposeHeaders); err != "" {
		return nil, "", err
	}
	warn := ""
	if out.AllowCredentials && slices.Contains(out.ExposeHeaders, "*") {
		// With credentials, browsers read "*" as a header named "*"; the other headers of
		// the response cannot be listed in advance.
		out.ExposeHeaders = nil
		warn = `exposeHeaders "*" is not sent with allowCredentials: true (browsers would read it as a header named "*"); only the CORS-safelisted response headers are exposed`
	}
	return out, warn, ""
}

// corsOrigin reads an allowed origin as the IR holds it: "*", or scheme://host[:port] in
// lower case with the scheme's own port left out.
func corsOrigin(o string) (string, string) {
	if o == "*" {
		return o, ""
	}
	o = strings.ToLower(o)
	m := corsOriginRE.FindStringSubmatch(o)
	if m == nil || len(o) > 253 {
		return "", fmt.Sprintf("allowOrigins: %q is not an origin scheme://host[:port]", truncate(o))
	}
	scheme, host, port := m[1], m[2], m[3]
	if port == "" {
		return scheme + "://" + host, ""
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", fmt.Sprintf("allowOrigins: the port of %q is out of range", truncate(o))
	}
	if scheme == "http" && p == 80 || scheme == "https" && p == 443 {
		return scheme + "://" + host, ""
	}
	return fmt.Sprintf("%s://%s:%d", scheme, host, p), ""
}

// corsHeaders reads allowHeaders or exposeHeaders (field): "*" alone or header names, lower
// case, each once.
func corsHeaders(field string, hs []gwv1.HTTPHeaderName) ([]string, string) {
	var out []string
	for _, h := range hs {
		s := string(h)
		if s != "*" && !validHeaderName(s) {
			return nil, fmt.Sprintf("%s: %q is not a header name", field, truncate(s))
		}
		s = strings.ToLower(s)
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) > 1 && slices.Contains(out, "*") {
		return nil, fmt.Sprintf("%s \"*\" cannot be listed with other headers", field)
	}
	return out, ""
}
