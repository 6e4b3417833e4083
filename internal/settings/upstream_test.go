package settings

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
)

// TestResolveUpstream: each spec.upstream field of the Tenant overrides the Config's, unset
// ones keep the Config's (and zero, translate's defaults, when neither sets them); the
// Tenant may turn health checks back on; values out of range (which the CRDs refuse) are
// ignored.
func TestResolveUpstream(t *testing.T) {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{Upstream: kubelbv1alpha1.UpstreamSettings{
		ConnectTimeout: d(2 * time.Second), MaxConnections: ptr.To[int32](100), UDPIdleTimeout: d(time.Minute),
		HealthCheck: kubelbv1alpha1.UpstreamHealthCheck{Disable: ptr.To(true), Interval: d(3 * time.Second), UnhealthyThreshold: ptr.To[int32](4)},
	}}}
	tenant := &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{Upstream: kubelbv1alpha1.UpstreamSettings{
		ConnectTimeout: d(time.Hour), // out of range: ignored
		MaxConnections: ptr.To[int32](50),
		HealthCheck:    kubelbv1alpha1.UpstreamHealthCheck{Disable: ptr.To(false), Timeout: d(time.Second), HealthyThreshold: ptr.To[int32](3)},
	}}}
	if got := Resolve(nil, nil).Upstream; got != (translate.Options{}) {
		t.Errorf("without Config and Tenant: %+v, want the zero value (the defaults)", got)
	}
	want := translate.Options{ConnectTimeout: 2 * time.Second, MaxConnectionsPerCluster: 100, UDPSessionIdleTimeout: time.Minute,
		HealthCheck: translate.HealthCheck{Disabled: true, Interval: 3 * time.Second, UnhealthyThreshold: 4}}
	if got := Resolve(config, nil).Upstream; got != want {
		t.Errorf("Config only: %+v, want %+v", got, want)
	}
	want.MaxConnectionsPerCluster = 50
	want.HealthCheck = translate.HealthCheck{Interval: 3 * time.Second, Timeout: time.Second, UnhealthyThreshold: 4, HealthyThreshold: 3}
	if got := Resolve(config, tenant).Upstream; got != want {
		t.Errorf("Tenant over Config: %+v, want %+v", got, want)
	}
	// Overlaid on the manager's options, the tenant's set fields win and the rest stay.
	base := translate.Options{ListenerAddress: "::", ConnectTimeout: 9 * time.Second, HealthCheck: translate.HealthCheck{NoTrafficInterval: time.Second}}
	over := base.WithUpstream(Resolve(config, tenant).Upstream)
	if over.ListenerAddress != "::" || over.ConnectTimeout != 2*time.Second || over.HealthCheck.NoTrafficInterval != time.Second ||
		over.HealthCheck.Timeout != time.Second || over.MaxConnectionsPerCluster != 50 {
		t.Errorf("overlaid: %+v", over)
	}
}

// TestResolveHTTPTimeouts: spec.http of the Tenant over the Config's, field by field; a
// Tenant's request timeout of 0s (none) overrides a Config's 30s; overlaid on the manager's
// options, the tenant's request timeout is final, even 0.
func TestResolveHTTPTimeouts(t *testing.T) {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{HTTP: kubelbv1alpha1.HTTPSettings{
		RequestTimeout: d(30 * time.Second), StreamIdleTimeout: d(10 * time.Minute)}}}
	if got := Resolve(config, nil).Upstream; got.RequestTimeout != 30*time.Second || got.StreamIdleTimeout != 10*time.Minute {
		t.Errorf("Config only: request %s, idle %s; want 30s, 10m", got.RequestTimeout, got.StreamIdleTimeout)
	}
	tenant := &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{HTTP: kubelbv1alpha1.HTTPSettings{RequestTimeout: d(0)}}}
	got := Resolve(config, tenant).Upstream
	if got.RequestTimeout != 0 || got.StreamIdleTimeout != 10*time.Minute {
		t.Errorf("Tenant 0s over Config 30s: request %s, idle %s; want 0s, 10m", got.RequestTimeout, got.StreamIdleTimeout)
	}
	tenant.Spec.HTTP = kubelbv1alpha1.HTTPSettings{RequestTimeout: d(25 * time.Hour), StreamIdleTimeout: d(0)} // out of range: ignored
	if got := Resolve(config, tenant).Upstream; got.RequestTimeout != 30*time.Second || got.StreamIdleTimeout != 10*time.Minute {
		t.Errorf("out of range values: request %s, idle %s; want the Config's", got.RequestTimeout, got.StreamIdleTimeout)
	}
	base := translate.Options{RequestTimeout: time.Minute, StreamIdleTimeout: time.Minute}
	over := base.WithUpstream(Resolve(nil, &kubelbv1alpha1.Tenant{}).Upstream)
	if over.RequestTimeout != 0 || over.StreamIdleTimeout != time.Minute {
		t.Errorf("overlaid: request %s, idle %s; want 0s (none) and the manager's 1m", over.RequestTimeout, over.StreamIdleTimeout)
	}
}

// TestResolveIPMode: the Tenant's spec.loadBalancer.ipMode over the Config's; and
// translate.IPMode: the Service's annotation over both, else Proxy exactly when PROXY
// protocol is on for a TCP port.
func TestResolveIPMode(t *testing.T) {
	proxy, vip := corev1.LoadBalancerIPModeProxy, corev1.LoadBalancerIPModeVIP
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{IPMode: &proxy}}}
	tenant := &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{IPMode: &vip}}}
	if got := Resolve(nil, nil).IPMode; got != nil {
		t.Errorf("unset: %v", *got)
	}
	if got := Resolve(config, &kubelbv1alpha1.Tenant{}).IPMode; got == nil || *got != proxy {
		t.Errorf("Config's: %v", got)
	}
	if got := Resolve(config, tenant).IPMode; got == nil || *got != vip {
		t.Errorf("Tenant's: %v", got)
	}

	lb := func(annotations map[string]string, protocols ...corev1.Protocol) *kubelbv1alpha1.LoadBalancer {
		l := &kubelbv1alpha1.LoadBalancer{}
		l.Annotations = annotations
		for i, p := range protocols {
			l.Spec.Ports = append(l.Spec.Ports, kubelbv1alpha1.LoadBalancerPort{Port: int32(80 + i), Protocol: p})
		}
		return l
	}
	pp := map[string]string{kubelbv1alpha1.AnnotationProxyProtocol: "v2"}
	for _, c := range []struct {
		name   string
		lb     *kubelbv1alpha1.LoadBalancer
		tenant *corev1.LoadBalancerIPMode
		want   corev1.LoadBalancerIPMode
	}{
		{"plain", lb(nil, corev1.ProtocolTCP), nil, vip},
		{"PROXY protocol", lb(pp, corev1.ProtocolTCP), nil, proxy},
		{"PROXY protocol, UDP only (not spoken)", lb(pp, corev1.ProtocolUDP), nil, vip},
		{"PROXY protocol not understood", lb(map[string]string{kubelbv1alpha1.AnnotationProxyProtocol: "v1"}, ""), nil, vip},
		{"tenant says VIP", lb(pp, ""), &vip, vip},
		{"tenant says Proxy", lb(nil, ""), &proxy, proxy},
		{"annotation over tenant", lb(map[string]string{kubelbv1alpha1.AnnotationIPMode: "vip"}), &proxy, vip},
		{"annotation over PROXY protocol", lb(map[string]string{kubelbv1alpha1.AnnotationProxyProtocol: "true", kubelbv1alpha1.AnnotationIPMode: "VIP"}, ""), nil, vip},
		{"annotation not understood", lb(map[string]string{kubelbv1alpha1.AnnotationIPMode: "Direct"}, ""), &proxy, proxy},
	} {
		if got := translate.IPMode(c.lb, c.tenant); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}

	st := corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "lb.example.com", IPMode: &vip}}}
	translate.SetIPMode(&st, proxy)
	if st.Ingress[0].IPMode == nil || *st.Ingress[0].IPMode != proxy || st.Ingress[1].IPMode != nil {
		t.Errorf("SetIPMode: %+v (an entry without an IP may have no ipMode)", st.Ingress)
	}
}

// TestResolveIngressSSLRedirect: spec.ingress.sslRedirect of the Tenant over the Config's;
// unset (both) is off, and a Tenant's false turns a Config's true off.
func TestResolveIngressSSLRedirect(t *testing.T) {
	config := func(v *bool) *kubelbv1alpha1.Config {
		return &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{Ingress: kubelbv1alpha1.IngressSettings{SSLRedirect: v}}}
	}
	tenant := func(v *bool) *kubelbv1alpha1.Tenant {
		return &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{Ingress: kubelbv1alpha1.IngressSettings{SSLRedirect: v}}}
	}
	for _, c := range []struct {
		name   string
		config *kubelbv1alpha1.Config
		tenant *kubelbv1alpha1.Tenant
		want   bool
	}{
		{"neither", nil, nil, false},
		{"unset", config(nil), tenant(nil), false},
		{"Config on", config(ptr.To(true)), tenant(nil), true},
		{"Tenant on", config(nil), tenant(ptr.To(true)), true},
		{"Tenant off over Config on", config(ptr.To(true)), tenant(ptr.To(false)), false},
		{"Tenant on over Config off", config(ptr.To(false)), tenant(ptr.To(true)), true},
	} {
		if got := Resolve(c.config, c.tenant).IngressSSLRedirect; got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestResolveIngressDefaultCertificate: spec.ingress.defaultCertificate of the Tenant over the
// Config's; unset (both): none.
func TestResolveIngressDefaultCertificate(t *testing.T) {
	ref := func(ns, name string) *kubelbv1alpha1.SecretRef {
		return &kubelbv1alpha1.SecretRef{Namespace: ns, Name: name}
	}
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{Ingress: kubelbv1alpha1.IngressSettings{DefaultCertificate: ref("kubelb", "wildcard")}}}
	tenant := &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{Ingress: kubelbv1alpha1.IngressSettings{DefaultCertificate: ref("certs", "team-a")}}}
	if got := Resolve(nil, &kubelbv1alpha1.Tenant{}).IngressDefaultCertificate; got != nil {
		t.Errorf("unset: %v", got)
	}
	if got := Resolve(config, &kubelbv1alpha1.Tenant{}).IngressDefaultCertificate; got == nil || got.String() != "kubelb/wildcard" {
		t.Errorf("Config's: %v", got)
	}
	if got := Resolve(config, tenant).IngressDefaultCertificate; got == nil || got.String() != "certs/team-a" {
		t.Errorf("Tenant's over Config's: %v", got)
	}
}
