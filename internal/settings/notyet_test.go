package settings

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

func TestNotYet(t *testing.T) {
	t.Parallel()
	everything := kubelbv1alpha1.ConfigSpec{
		Ingress:    kubelbv1alpha1.IngressSettings{Class: ptr.To("nginx"), Disable: true},
		GatewayAPI: kubelbv1alpha1.GatewayAPISettings{Class: ptr.To("eg"), DefaultGateway: &corev1.ObjectReference{Name: "gw"}, Disable: true},
		DNS: kubelbv1alpha1.DNSSettings{WildcardDomain: ptr.To("*.example.com"), AllowExplicitHostnames: ptr.To(false),
			UseDNSAnnotations: ptr.To(true), UseCertificateAnnotations: ptr.To(true)},
		Certificates: kubelbv1alpha1.CertificatesSettings{DefaultClusterIssuer: ptr.To("letsencrypt")},
		EnvoyProxy: kubelbv1alpha1.EnvoyProxy{Topology: kubelbv1alpha1.EnvoyProxyTopologyGlobal,
			HeaderLimits: &kubelbv1alpha1.HeaderLimits{MaxResponseHeadersKb: ptr.To[uint32](64)}, PodMonitor: &kubelbv1alpha1.PodMonitor{Enabled: true}},
	}
	shared := []string{"spec.gatewayAPI.defaultGateway", "spec.dns.useCertificateAnnotations"}
	prefix := func(kind string, paths ...string) []string {
		out := make([]string, len(paths))
		for i, p := range paths {
			out[i] = kind + " " + p
		}
		return out
	}
	allConfig := append(prefix("Config", shared...),
		"Config spec.envoyProxy.topology", "Config spec.envoyProxy.headerLimits.maxResponseHeadersKb")

	cases := []struct {
		name   string
		config *kubelbv1alpha1.Config
		tenant *kubelbv1alpha1.Tenant
		want   []string
	}{
		{name: "no objects"},
		{name: "empty objects", config: &kubelbv1alpha1.Config{}, tenant: &kubelbv1alpha1.Tenant{}},
		{name: "only what is implemented", config: &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{
			LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{Class: ptr.To("metallb"), Disable: true},
			Ingress:      kubelbv1alpha1.IngressSettings{Class: ptr.To("nginx"), Disable: true},
			GatewayAPI:   kubelbv1alpha1.GatewayAPISettings{Class: ptr.To("eg"), Disable: true},
			EnvoyProxy: kubelbv1alpha1.EnvoyProxy{Topology: kubelbv1alpha1.EnvoyProxyTopologyShared, Replicas: 3,
				UseDaemonset: true, OverloadManager: &kubelbv1alpha1.OverloadManager{Enabled: true}},
			AnnotationSettings: kubelbv1alpha1.AnnotationSettings{PropagateAllAnnotations: ptr.To(true)},
			Limits:             kubelbv1alpha1.Limits{LoadBalancers: ptr.To[int32](10)},
		}}, tenant: &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
			LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{Class: ptr.To("cilium")},
			EnvoyProxy:   kubelbv1alpha1.TenantEnvoyProxy{Replicas: ptr.To[int32](2)},
			// Enforced by the manager (internal/quota).
			Limits: kubelbv1alpha1.Limits{LoadBalancers: ptr.To[int32](2), Routes: ptr.To[int32](3),
				ListenerPorts: ptr.To[int32](4), EndpointsPerCluster: ptr.To[int32](5)},
		}}},
		{name: "everything in the Config", config: &kubelbv1alpha1.Config{Spec: everything}, want: allConfig},
		{name: "everything in the Tenant", tenant: &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
			Ingress: everything.Ingress, GatewayAPI: kubelbv1alpha1.TenantGatewayAPISettings{GatewayAPISettings: everything.GatewayAPI}, DNS: everything.DNS, Certificates: everything.Certificates,
		}}, want: prefix("Tenant", shared...)},
		{name: "dedicated topology", config: &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{
			EnvoyProxy: kubelbv1alpha1.EnvoyProxy{Topology: kubelbv1alpha1.EnvoyProxyTopologyDedicated},
		}}, want: []string{"Config spec.envoyProxy.topology"}},
		{name: "certificate annotations that are off are still set; podMonitor is the chart's", config: &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{
			EnvoyProxy: kubelbv1alpha1.EnvoyProxy{PodMonitor: &kubelbv1alpha1.PodMonitor{}},
		}}, tenant: &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
			DNS:          kubelbv1alpha1.DNSSettings{UseCertificateAnnotations: ptr.To(false), WildcardDomain: ptr.To("")},
			Certificates: kubelbv1alpha1.CertificatesSettings{DefaultClusterIssuer: ptr.To("")},
		}}, want: []string{"Tenant spec.dns.useCertificateAnnotations"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, NotYet(tc.config, tc.tenant)); diff != "" {
				t.Fatalf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestNotYetWarnerOncePerGeneration(t *testing.T) {
	t.Parallel()
	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	var w NotYetWarner
	tn := &kubelbv1alpha1.Tenant{}
	tn.UID, tn.Name, tn.Generation = "u1", "a", 1
	on := true
	tn.Spec.DNS.UseCertificateAnnotations = &on
	w.Warn(log, nil, tn)
	w.Warn(log, nil, tn)
	if len(lines) != 1 || !strings.Contains(lines[0], "spec.dns.useCertificateAnnotations") {
		t.Fatalf("after two reconciles of one generation: %q", lines)
	}
	tn.Generation = 2
	w.Warn(log, nil, tn)
	if len(lines) != 2 {
		t.Fatalf("a new generation was not warned about: %q", lines)
	}
	clean := &kubelbv1alpha1.Tenant{}
	clean.UID, clean.Generation = "u2", 1
	w.Warn(log, nil, clean)
	if len(lines) != 2 {
		t.Fatalf("a Tenant without not-yet fields was warned about: %q", lines)
	}
}
