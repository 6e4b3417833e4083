package translate

import (
	"fmt"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// routeTimeouts are the timeouts of the routes to backends of one Ingress, HTTPRoute or
// GRPCRoute that its rules do not set themselves (an HTTPRoute rule's timeouts.request wins):
// the tenant's spec.http, with the object's annotations in their place.
type routeTimeouts struct {
	request time.Duration // 0: none, the request or stream takes as long as it takes
	idle    time.Duration // 0: the listener's, the tenant's spec.http.streamIdleTimeout
}

// routeTimeouts reads the timeouts of Route r's tenant object (annotations: its
// annotations). A value that is not understood or out of range is reported
// (InvalidAnnotation, a Warning) and the tenant's applies. The stream idle timeout protects
// Envoy, so the annotation may only shorten the tenant's.
func (t *l7) routeTimeouts(r *v1alpha1.Route, annotations map[string]string) routeTimeouts {
	out := routeTimeouts{request: t.opts.RequestTimeout}
	if len(annotations) == 0 {
		return out
	}
	bad := func(key, v, want, current string) {
		t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonInvalidAnnotation, "annotation %s=%q is not understood (%s); %s applies",
			key, truncate(v), want, current)
	}
	switch d, v, set, ok := durationAnnotation(annotations, v1alpha1.AnnotationRequestTimeout, 0, MaxRequestTimeout); {
	case set && !ok:
		bad(v1alpha1.AnnotationRequestTimeout, v, fmt.Sprintf("use a duration from 0s, none, to %s", shortDuration(MaxRequestTimeout)), describeRequestTimeout(out.request))
	case set:
		out.request = d
	}
	tenant := t.opts.StreamIdleTimeout
	if d, v, set, ok := durationAnnotation(annotations, v1alpha1.AnnotationStreamIdleTimeout, MinStreamIdleTimeout, tenant); set {
		switch {
		case !ok:
			bad(v1alpha1.AnnotationStreamIdleTimeout, v, fmt.Sprintf("use a duration from %s to the tenant's %s (spec.http.streamIdleTimeout)", shortDuration(MinStreamIdleTimeout), shortDuration(tenant)),
				"the tenant's "+shortDuration(tenant))
		case d < tenant:
			out.idle = d
		}
	}
	return out
}

// describeRequestTimeout names a request timeout in a message.
func describeRequestTimeout(d time.Duration) string {
	if d == 0 {
		return "no request timeout"
	}
	return "a request timeout of " + shortDuration(d)
}

// set gives route (which forwards to backends) these timeouts.
func (rt routeTimeouts) set(route *ir.Route) {
	route.Timeout, route.IdleTimeout = ir.Duration(rt.request), ir.Duration(rt.idle)
}
