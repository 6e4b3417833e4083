// Package nginxurl reads the URLs of the ingress-nginx annotations that send requests
// somewhere else than the Ingress's backends (mirror-target, auth-url). kubelb sends them only to a
// Service of the Ingress's namespace, named by its in-cluster URL, never to an arbitrary
// host: the Service is then carried to the hub with the Ingress (the ccm), reached on its
// NodePorts under the tenant's endpoint policy like every backend (the hub's Ingress front
// end), and written as a backendRef (`kubectl kubelb ingress convert`). All three read the
// URL here, so that they agree on the Service.
package nginxurl

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/internal/textcut"
)

// Prefix is the prefix of ingress-nginx's annotations.
const Prefix = "nginx.ingress.kubernetes.io/"

// MirrorTarget is the annotation (without Prefix) naming where requests are copied to.
const MirrorTarget = "mirror-target"

// AuthURL is the annotation (without Prefix) naming the service that authorizes requests.
const AuthURL = "auth-url"

// RequestURI is nginx's variable for the request's path and query; a mirror-target ends with
// it to copy each request with its own path and query.
const RequestURI = "$request_uri"

// MaxLen bounds the URL read (the ccm carries ingress-nginx values of at most 1024 bytes).
const MaxLen = 1024

// clusterDomain is the cluster domain of the longest in-cluster form of a Service's name.
const clusterDomain = "cluster.local"

// Service is a URL naming a port of a Service of the Ingress's namespace.
type Service struct {
	// Name is the Service's name.
	Name string
	// Port is the Service port: the URL's, else 80 for http and 443 for https.
	Port int32
	// TLS: the URL's scheme is https.
	TLS bool
	// Host is the URL's host as written, lower-cased, without the port.
	Host string
	// Path is the URL's path before $request_uri, "" for none.
	Path string
	// RequestURI: the URL ends with $request_uri.
	RequestURI bool
}

// origin is how the scheme, host and port of a Service URL are written, for messages.
const origin = "http://<service>[.<namespace>[.svc[.cluster.local]]][:port]"

// Form says how a Service URL is written, for messages.
const Form = origin + "/<path>, naming a Service of the Ingress's namespace"

// Parse reads raw, a URL in an annotation of an Ingress of namespace ns: scheme http or
// https, host <service>, <service>.<ns>, <service>.<ns>.svc or
// <service>.<ns>.svc.cluster.local, an optional port, a path that may end with $request_uri;
// no user, query or fragment. Otherwise it says why not (the second result, "" when it can).
func Parse(raw, ns string) (Service, string) {
	raw = strings.TrimSpace(raw)
	if len(raw) > MaxLen {
		return Service{}, fmt.Sprintf("a URL of at most %d bytes", MaxLen)
	}
	var out Service
	if rest, ok := strings.CutSuffix(raw, RequestURI); ok {
		raw, out.RequestURI = rest, true
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return Service{}, "an absolute URL " + Form
	}
	switch u.Scheme {
	case "http":
		out.Port = 80
	case "https":
		out.Port, out.TLS = 443, true
	default:
		return Service{}, "an http or https URL " + Form
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return Service{}, "a URL without user, query or fragment " + Form
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Service{}, "a port from 1 to 65535"
		}
		out.Port = int32(n)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	name, domain, _ := strings.Cut(host, ".")
	if len(validation.IsDNS1035Label(name)) > 0 {
		return Service{}, fmt.Sprintf("kubelb sends requests only to a Service of the Ingress's namespace, by name: %q is no Service name; %s", truncate(host), Form)
	}
	if !slices.Contains([]string{"", ns, ns + ".svc", ns + ".svc." + clusterDomain}, domain) {
		return Service{}, fmt.Sprintf("kubelb sends requests only to a Service of the Ingress's namespace %s: %q is not one; %s", ns, truncate(host), Form)
	}
	out.Name, out.Host = name, host
	out.Path = u.EscapedPath()
	if strings.ContainsAny(out.Path, "$") || strings.ContainsFunc(out.Path, func(c rune) bool { return c <= ' ' || c >= 0x7f }) {
		return Service{}, "a path without nginx variables (other than a final $request_uri), spaces or control characters"
	}
	return out, ""
}

// Mirror reads mirror-target: the Service requests are copied to. Each request is copied
// with its own path and query, so the URL's path must be $request_uri alone ("/$request_uri"
// or none before it), as in ingress-nginx's documented example.
func Mirror(raw, ns string) (Service, string) {
	s, msg := Parse(raw, ns)
	if msg != "" {
		return s, msg
	}
	if !s.RequestURI || (s.Path != "" && s.Path != "/") {
		return Service{}, "kubelb copies each request with its own path and query: write " + origin + "/" + RequestURI
	}
	return s, ""
}

// Auth reads auth-url: the Service asked about each request, at the URL's path ("/" when it
// has none), as nginx's auth_request asks it: the path is the URL's, not the request's, so it
// may not end with $request_uri.
func Auth(raw, ns string) (Service, string) {
	s, msg := Parse(raw, ns)
	if msg != "" {
		return s, msg
	}
	if s.RequestURI {
		return Service{}, "the service is asked at the URL's own path: leave $request_uri out"
	}
	if s.Path == "" {
		s.Path = "/"
	}
	return s, ""
}

// Services are the Services of namespace ns the ingress-nginx annotations of an Ingress send
// requests to (mirror-target, auth-url), which its Route carries to the hub: none when the URL
// is not one kubelb reads.
func Services(annotations map[string]string, ns string) []string {
	var out []string
	for key, read := range map[string]func(string, string) (Service, string){MirrorTarget: Mirror, AuthURL: Auth} {
		if v, ok := annotations[Prefix+key]; ok {
			if s, msg := read(v, ns); msg == "" && !slices.Contains(out, s.Name) {
				out = append(out, s.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// truncate bounds a value quoted in a message, as the hub's messages quote values.
func truncate(s string) string { return textcut.Cut(s, 64+len(textcut.Ellipsis), textcut.Ellipsis) }
