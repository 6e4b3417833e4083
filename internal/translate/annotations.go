package translate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// durationAnnotation reads the annotation key of a tenant object: set tells whether it is
// there, ok whether its value v is a Go duration d from lo to hi.
func durationAnnotation(annotations map[string]string, key string, lo, hi time.Duration) (d time.Duration, v string, set, ok bool) {
	v, set = annotations[key]
	if !set {
		return 0, "", false, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	return d, v, true, err == nil && DurationInRange(d, lo, hi)
}

// ProxyProtocol reads the kubelb.k8c.io/proxy-protocol annotation of a LoadBalancer: on is
// true for "v2" and "true"; ok is false for a value that is not understood (PROXY protocol
// is then off).
func ProxyProtocol(lb *v1alpha1.LoadBalancer) (on, ok bool) {
	v, set := lb.Annotations[v1alpha1.AnnotationProxyProtocol]
	if !set {
		return false, true
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "v2", "true":
		return true, true
	case "", "false":
		return false, true
	}
	return false, false
}

// ParseIPMode reads an ipMode ("VIP" or "Proxy", any case).
func ParseIPMode(v string) (corev1.LoadBalancerIPMode, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "vip":
		return corev1.LoadBalancerIPModeVIP, true
	case "proxy":
		return corev1.LoadBalancerIPModeProxy, true
	}
	return "", false
}

// IPMode decides the ipMode of a LoadBalancer's addresses: its kubelb.k8c.io/ip-mode
// annotation when valid, else the tenant's (Config/Tenant spec.loadBalancer.ipMode, nil when
// unset), else Proxy when PROXY protocol is on for one of its TCP ports — with VIP, the
// tenant's kube-proxy would short-cut in-cluster traffic to the address, which would then
// skip Envoy and PROXY protocol — and VIP otherwise.
func IPMode(lb *v1alpha1.LoadBalancer, tenant *corev1.LoadBalancerIPMode) corev1.LoadBalancerIPMode {
	if m, ok := ParseIPMode(lb.Annotations[v1alpha1.AnnotationIPMode]); ok {
		return m
	}
	if tenant != nil {
		if m, ok := ParseIPMode(string(*tenant)); ok {
			return m
		}
	}
	if on, _ := ProxyProtocol(lb); on {
		for _, p := range lb.Spec.Ports {
			if v1alpha1.ProtocolOrTCP(p.Protocol) == corev1.ProtocolTCP {
				return corev1.LoadBalancerIPModeProxy
			}
		}
	}
	return corev1.LoadBalancerIPModeVIP
}

// SetIPMode sets mode on every ingress entry of st that has an IP (the API server refuses an
// ipMode on an entry without one).
func SetIPMode(st *corev1.LoadBalancerStatus, mode corev1.LoadBalancerIPMode) {
	for i := range st.Ingress {
		if st.Ingress[i].IP == "" {
			st.Ingress[i].IPMode = nil
			continue
		}
		m := mode
		st.Ingress[i].IPMode = &m
	}
}

// upstreamAnnotations returns the options of one LoadBalancer: the tenant's (t.opts, with
// defaults) with the upstream annotations of the LoadBalancer in their place. A value that
// is not understood or out of range is reported (InvalidAnnotation) and the tenant's value
// applies.
func (t *l4) upstreamAnnotations(lb *v1alpha1.LoadBalancer) Options {
	o := t.opts
	if len(lb.Annotations) == 0 {
		return o
	}
	ref := t.ref(lb, "")
	bad := func(key, v, want string, current any) {
		t.problem(ref, ir.SeverityWarning, ReasonInvalidAnnotation, "annotation %s=%q is not understood (%s); %v applies",
			key, truncate(v), want, current)
	}
	duration := func(key string, dst *time.Duration, lo, hi time.Duration) {
		d, v, set, ok := durationAnnotation(lb.Annotations, key, lo, hi)
		if !set {
			return
		}
		if !ok {
			cur := any(shortDuration(*dst))
			if *dst == 0 {
				cur = "Envoy's default"
			}
			bad(key, v, fmt.Sprintf("use a duration from %s to %s", shortDuration(lo), shortDuration(hi)), cur)
			return
		}
		*dst = d
	}
	count := func(key string, dst *uint32, hi uint32) {
		v, ok := lb.Annotations[key]
		if !ok {
			return
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 1 || n > uint64(hi) {
			bad(key, v, fmt.Sprintf("use a whole number from 1 to %d", hi), *dst)
			return
		}
		*dst = uint32(n)
	}
	duration(v1alpha1.AnnotationConnectTimeout, &o.ConnectTimeout, MinConnectTimeout, MaxConnectTimeout)
	count(v1alpha1.AnnotationMaxConnections, &o.MaxConnectionsPerCluster, MaxMaxConnectionsPerCluster)
	duration(v1alpha1.AnnotationUDPIdleTimeout, &o.UDPSessionIdleTimeout, MinUDPSessionIdleTimeout, MaxUDPSessionIdleTimeout)
	hc := &o.HealthCheck
	if v, ok := lb.Annotations[v1alpha1.AnnotationHealthCheckDisable]; ok {
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			bad(v1alpha1.AnnotationHealthCheckDisable, v, `use "true" or "false"`, hc.Disabled)
		} else {
			hc.Disabled = b
		}
	}
	duration(v1alpha1.AnnotationHealthCheckInterval, &hc.Interval, MinHealthCheckInterval, MaxHealthCheckInterval)
	duration(v1alpha1.AnnotationHealthCheckTimeout, &hc.Timeout, MinHealthCheckTimeout, MaxHealthCheckTimeout)
	count(v1alpha1.AnnotationHealthCheckUnhealthyThreshold, &hc.UnhealthyThreshold, MaxHealthCheckThreshold)
	count(v1alpha1.AnnotationHealthCheckHealthyThreshold, &hc.HealthyThreshold, MaxHealthCheckThreshold)
	noTraffic := hc.NoTrafficInterval
	duration(v1alpha1.AnnotationHealthCheckNoTrafficInterval, &noTraffic, MinNoTrafficInterval, MaxNoTrafficInterval)
	hc.NoTrafficInterval = noTraffic
	if v, ok := lb.Annotations[v1alpha1.AnnotationIPMode]; ok {
		if _, ok := ParseIPMode(v); !ok {
			t.problem(ref, ir.SeverityWarning, ReasonInvalidAnnotation, "annotation %s=%q is not understood (use \"VIP\" or \"Proxy\"); the tenant's ipMode applies",
				v1alpha1.AnnotationIPMode, truncate(v))
		}
	}
	return o
}

// shortDuration prints d without trailing zero units: "10m", not "10m0s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
