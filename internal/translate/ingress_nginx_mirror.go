package translate

import (
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/nginxurl"
)

// The ingress-nginx annotations of request mirroring kubelb honours (without the prefix).
const (
	nginxMirrorTarget = nginxurl.MirrorTarget
	nginxMirrorHost   = "mirror-host"
	nginxMirrorBody   = "mirror-request-body"
)

// nginxMirror is what mirror-target, mirror-host and mirror-request-body ask for, checked:
// the Service of the Ingress's namespace every request is copied to, and the Host of the
// copies.
type nginxMirror struct {
	svc  nginxurl.Service
	host string
	// resolved: the Service was looked up (once, for the first route that copies); cluster
	// is its cluster, "" when it cannot be used (reported).
	resolved bool
	cluster  string
}

// nginxMirrorAnnotations reads mirror-target, the in-cluster URL of a Service of the
// Ingress's namespace ns ending with $request_uri (nginxurl.Mirror: never another host, so
// copies reach only what the tenant's endpoint policy lets its backends reach);
// mirror-host, the Host of the copies (by default the URL's host, as in ingress-nginx); and
// mirror-request-body: "off" cannot be served (Envoy copies whole requests), so nothing is
// mirrored then rather than more than asked. nil for no mirror.
func nginxMirrorAnnotations(ns string, value func(string) (string, bool), bad func(key, v, want string)) *nginxMirror {
	v, ok := value(nginxMirrorTarget)
	if !ok {
		return nil
	}
	svc, msg := plainHTTP(nginxurl.Mirror(v, ns))
	if msg != "" {
		bad(nginxMirrorTarget, v, msg+"; requests are not mirrored")
		return nil
	}
	if b, ok := value(nginxMirrorBody); ok && strings.EqualFold(b, "off") {
		bad(nginxMirrorBody, b, "kubelb copies whole requests, their bodies included; requests are not mirrored")
		return nil
	}
	m := &nginxMirror{svc: svc, host: svc.Host}
	if h, ok := value(nginxMirrorHost); ok {
		if nginxHostHeader(h) && len(h) <= ir.MaxMirrorHost {
			m.host = strings.ToLower(h)
		} else {
			bad(nginxMirrorHost, h, "a host name, optionally with :port; the copies carry the host of "+nginxMirrorTarget)
		}
	}
	return m
}

// mirror resolves the Service of mirror-target (once) for the routes of Ingress Route r
// (namespace ns) that forward to backends: a Service the Route does not carry, or without
// the port or its NodePort, is a Warning and nothing is mirrored. The hub reaches it as it
// reaches the Ingress's backends: on the tenant nodes' NodePorts, under the endpoint policy.
func (n *nginxIngress) mirror(t *l7, r *v1alpha1.Route, ns string) {
	m := n.mirrorCopies
	if m == nil || m.resolved || !n.forwards() {
		return
	}
	m.resolved = true
	owner := t.ref(r, "")
	be, reason, msg := t.backend(r, owner, ns, m.svc.Name, m.svc.Port, false, "")
	if reason != "" {
		t.problems.Add(owner, ir.SeverityWarning, reason, "annotation %s%s: %s; requests are not mirrored", NginxAnnotationPrefix, nginxMirrorTarget, msg)
		return
	}
	m.cluster = be.cluster
}

// mirrors are the copies of route's requests (mirror-target): all of them, to the Service's
// cluster, with the mirror's Host.
func (n *nginxIngress) mirrors(route *ir.Route) []ir.Mirror {
	m := n.mirrorCopies
	if m == nil || m.cluster == "" || len(route.Backends) == 0 {
		return nil
	}
	return []ir.Mirror{{Cluster: m.cluster, PerMillion: 1000000, Host: m.host}}
}

// plainHTTP is svc and msg as nginxurl read an annotation's URL, with https refused: the hub
// reaches the Services of an Ingress in plain HTTP, as it reaches its backends.
func plainHTTP(svc nginxurl.Service, msg string) (nginxurl.Service, string) {
	if msg == "" && svc.TLS {
		msg = "kubelb reaches the Services of an Ingress in plain HTTP, as its backends: write http://"
	}
	return svc, msg
}

// forwards reports whether the Ingress's routes forward to backends at all (not a canary
// folded into another Ingress, not a redirect, not refused or closed), which is when its
// mirror and auth services are looked up.
func (n *nginxIngress) forwards() bool {
	return n.canary == nil && n.redirect == nil && !n.refuseAll && !n.authClosed
}
