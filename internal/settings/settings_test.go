package settings

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

func TestResolveTenantOverridesConfig(t *testing.T) {
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{
		LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{Class: ptr.To("metallb")},
		EnvoyProxy: kubelbv1alpha1.EnvoyProxy{Replicas: 3, NodeSelector: map[string]string{"role": "lb"},
			HeaderLimits: &kubelbv1alpha1.HeaderLimits{MaxRequestHeadersKb: ptr.To[uint32](60)},
			AccessLog:    &kubelbv1alpha1.AccessLog{Enabled: true}},
	}}
	tenant := &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
		LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{Class: ptr.To("cilium"), Disable: true},
		EnvoyProxy: kubelbv1alpha1.TenantEnvoyProxy{Replicas: ptr.To[int32](5),
			HeaderLimits: &kubelbv1alpha1.HeaderLimits{MaxRequestHeadersCount: ptr.To[uint32](50)},
			AccessLog:    &kubelbv1alpha1.AccessLog{}},
	}}
	tenant.Name = "a"
	got := Resolve(config, tenant)
	if *got.LoadBalancerClass != "cilium" || !got.DisableLoadBalancer || got.Envoy.Replicas != 5 ||
		got.Envoy.NodeSelector["role"] != "lb" || got.Name != "a" {
		t.Fatalf("unexpected %+v", got)
	}
	// The Tenant's header limits replace the Config's as a whole.
	if hl := got.Envoy.HeaderLimits; hl == nil || hl.MaxRequestHeadersKb != nil || hl.MaxRequestHeadersCount == nil || *hl.MaxRequestHeadersCount != 50 {
		t.Fatalf("header limits %+v, want the Tenant's", got.Envoy.HeaderLimits)
	}
	// The Tenant's access log setting replaces the Config's: this tenant turns it off.
	if al := got.Envoy.AccessLog; al == nil || al.Enabled {
		t.Fatalf("access log %+v, want the Tenant's (off)", al)
	}
	// The Config is not modified by the merge.
	if *config.Spec.LoadBalancer.Class != "metallb" || config.Spec.EnvoyProxy.Replicas != 3 {
		t.Fatal("Resolve modified the Config")
	}
	onlyConfig := Resolve(config, nil)
	if *onlyConfig.LoadBalancerClass != "metallb" || onlyConfig.Envoy.Replicas != 3 || onlyConfig.DisableLoadBalancer ||
		onlyConfig.Envoy.HeaderLimits == nil || *onlyConfig.Envoy.HeaderLimits.MaxRequestHeadersKb != 60 ||
		onlyConfig.Envoy.AccessLog == nil || !onlyConfig.Envoy.AccessLog.Enabled {
		t.Fatalf("config only: %+v", onlyConfig)
	}
	if none := Resolve(nil, nil); none.Envoy.Replicas != 3 || none.LoadBalancerClass != nil {
		t.Fatalf("defaults: %+v", none)
	}
}

func TestAnnotations(t *testing.T) {
	source := map[string]string{
		"external-dns.alpha.kubernetes.io/hostname": "a.example.com",
		"team":                             "x",
		"secret":                           "y",
		"kubelb.k8c.io/proxy-protocol":     "v2",
		"metallb.universe.tf/address-pool": "public",
	}
	cases := map[string]struct {
		settings kubelbv1alpha1.AnnotationSettings
		want     map[string]string
	}{
		"nothing propagates by default": {want: nil},
		"listed keys, any value or the one allowed": {
			settings: kubelbv1alpha1.AnnotationSettings{PropagatedAnnotations: &map[string]string{
				"external-dns.alpha.kubernetes.io/hostname": "", "metallb.universe.tf/address-pool": "private",
			}},
			want: map[string]string{"external-dns.alpha.kubernetes.io/hostname": "a.example.com"},
		},
		"all but denied and steering, over defaults": {
			settings: kubelbv1alpha1.AnnotationSettings{
				PropagateAllAnnotations: ptr.To(true),
				DeniedAnnotations:       []string{"secret"},
				DefaultAnnotations: map[kubelbv1alpha1.AnnotatedResource]kubelbv1alpha1.Annotations{
					"all": {"owner": "platform", "team": "default"}, "service": {"svc": "yes"}, "ingress": {"ing": "no"},
				},
			},
			want: map[string]string{"team": "x", "owner": "platform", "svc": "yes"},
		},
		"all, with steering the platform team allows (a prefix, a key) or lists": {
			settings: kubelbv1alpha1.AnnotationSettings{
				PropagateAllAnnotations:    ptr.To(true),
				DeniedAnnotations:          []string{"secret"},
				AllowedSteeringAnnotations: []string{"metallb.universe.tf/", "kube-vip.io/loadbalancerIPs"},
				PropagatedAnnotations:      &map[string]string{"external-dns.alpha.kubernetes.io/hostname": "a.example.com"},
			},
			want: map[string]string{
				"external-dns.alpha.kubernetes.io/hostname": "a.example.com", "team": "x",
				"metallb.universe.tf/address-pool": "public",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Tenant{AnnotationSettings: tc.settings}.Annotations(kubelbv1alpha1.AnnotatedResourceService, source)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("-want +got:\n%s", diff)
			}
		})
	}
}

// TestSteeringAnnotations: every known prefix (and a subdomain of one) is steering; the
// keys dropped by propagateAllAnnotations are listed, sorted, but not those the platform
// team allows, lists or denies anyway.
func TestSteeringAnnotations(t *testing.T) {
	for _, k := range []string{"metallb.universe.tf/loadBalancerIPs", "metallb.io/ip-allocated-from-pool", "kube-vip.io/loadbalancerIPs",
		"external-dns.alpha.kubernetes.io/hostname", "service.beta.kubernetes.io/aws-load-balancer-eip-allocations",
		"lbipam.cilium.io/ips", "io.cilium/lb-ipam-ips", "io.cilium.foo/x", "purelb.io/addresses", "networking.gke.io/load-balancer-ip-addresses",
		"a.metallb.universe.tf/x"} {
		if !IsSteeringAnnotation(k) {
			t.Errorf("%s is not steering", k)
		}
	}
	for _, k := range []string{"team", "example.com/metallb.universe.tf", "metallb.universe.tf.example.com/x", "prometheus.io/scrape"} {
		if IsSteeringAnnotation(k) {
			t.Errorf("%s is steering", k)
		}
	}
	tn := Tenant{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{
		PropagateAllAnnotations:    ptr.To(true),
		AllowedSteeringAnnotations: []string{"kube-vip.io/"},
		PropagatedAnnotations:      &map[string]string{"purelb.io/service-group": ""},
		DeniedAnnotations:          []string{"lbipam.cilium.io/ips"},
	}}
	got := tn.DroppedSteeringAnnotations(map[string]string{"metallb.universe.tf/loadBalancerIPs": "10.0.0.1", "kube-vip.io/loadbalancerIPs": "10.0.0.1",
		"purelb.io/service-group": "a", "lbipam.cilium.io/ips": "10.0.0.1", "external-dns.alpha.kubernetes.io/hostname": "x", "team": "a"})
	if diff := cmp.Diff([]string{"external-dns.alpha.kubernetes.io/hostname", "metallb.universe.tf/loadBalancerIPs"}, got); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	tn.AnnotationSettings.PropagateAllAnnotations = nil
	if got := tn.DroppedSteeringAnnotations(map[string]string{"metallb.universe.tf/loadBalancerIPs": "10.0.0.1"}); got != nil {
		t.Errorf("dropped %v without propagateAllAnnotations", got)
	}
}

func TestResolveEndpointPolicy(t *testing.T) {
	t.Parallel()
	rules := func(src string, cidrs ...string) []translate.PolicyRule {
		var out []translate.PolicyRule
		for _, c := range cidrs {
			out = append(out, translate.PolicyRule{Prefix: netip.MustParsePrefix(c), Source: src})
		}
		return out
	}
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{
		Allow: []string{"127.0.0.0/8", "10.1.2.3/8"}, Deny: []string{"127.0.0.2/32"}}}}
	for _, tc := range []struct {
		name        string
		config      *kubelbv1alpha1.Config
		tenant      *kubelbv1alpha1.Tenant
		allow, deny []translate.PolicyRule
		invalid     []string
	}{
		{name: "none"},
		{name: "Config only (host bits masked)", config: config,
			allow: rules(translate.SourceConfigAllow, "127.0.0.0/8", "10.0.0.0/8"), deny: rules(translate.SourceConfigDeny, "127.0.0.2/32")},
		{name: "Tenant allow replaces Config allow; Config deny stays", config: config,
			tenant: &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{Allow: []string{"fd00::/64"}}}},
			allow:  rules(translate.SourceTenantAllow, "fd00::/64"), deny: rules(translate.SourceConfigDeny, "127.0.0.2/32")},
		{name: "an empty Tenant deny list clears the Config's", config: config,
			tenant: &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{Deny: []string{}}}},
			allow:  rules(translate.SourceConfigAllow, "127.0.0.0/8", "10.0.0.0/8")},
		{name: "invalid entries are left out and listed",
			tenant: &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{Deny: []string{"10.0.0.1", "10.0.0.0/8"}}}},
			deny:   rules(translate.SourceTenantDeny, "10.0.0.0/8"), invalid: []string{"Tenant deny: 10.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Resolve(tc.config, tc.tenant)
			opt := cmpopts.EquateComparable(netip.Prefix{})
			if diff := cmp.Diff(translate.EndpointPolicy{Allow: tc.allow, Deny: tc.deny}, got.EndpointPolicy, opt); diff != "" {
				t.Errorf("EndpointPolicy -want +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.invalid, got.InvalidEndpointPolicy); diff != "" {
				t.Errorf("InvalidEndpointPolicy -want +got:\n%s", diff)
			}
		})
	}
}

func TestResolveDNSAndCertificates(t *testing.T) {
	t.Parallel()
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{
		DNS: kubelbv1alpha1.DNSSettings{WildcardDomain: ptr.To("*.hub.example.com"), AllowExplicitHostnames: ptr.To(true),
			UseDNSAnnotations: ptr.To(true)},
		Certificates: kubelbv1alpha1.CertificatesSettings{DefaultClusterIssuer: ptr.To("letsencrypt")},
	}}
	cases := []struct {
		name       string
		config     *kubelbv1alpha1.Config
		tenant     *kubelbv1alpha1.Tenant
		dns        translate.DNS
		annotation bool
		issuer     string
	}{
		{name: "nothing set"},
		{name: "Config alone", config: config,
			dns: translate.DNS{WildcardDomain: "*.hub.example.com", AllowExplicitHostnames: true}, annotation: true, issuer: "letsencrypt"},
		{name: "a Tenant without settings keeps the Config's", config: config, tenant: &kubelbv1alpha1.Tenant{},
			dns: translate.DNS{WildcardDomain: "*.hub.example.com", AllowExplicitHostnames: true}, annotation: true, issuer: "letsencrypt"},
		{name: "the Tenant overrides each field", config: config, tenant: &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
			DNS: kubelbv1alpha1.DNSSettings{WildcardDomain: ptr.To("apps.tenant.example"), AllowExplicitHostnames: ptr.To(false),
				UseDNSAnnotations: ptr.To(false)},
			Certificates: kubelbv1alpha1.CertificatesSettings{DefaultClusterIssuer: ptr.To(" staging ")},
		}}, dns: translate.DNS{WildcardDomain: "apps.tenant.example"}, issuer: "staging"},
		{name: "the Tenant turns the wildcard domain and the issuer off", config: config, tenant: &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
			DNS:          kubelbv1alpha1.DNSSettings{WildcardDomain: ptr.To("")},
			Certificates: kubelbv1alpha1.CertificatesSettings{DefaultClusterIssuer: ptr.To("")},
		}}, dns: translate.DNS{AllowExplicitHostnames: true}, annotation: true},
		{name: "Tenant alone", tenant: &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
			DNS: kubelbv1alpha1.DNSSettings{AllowExplicitHostnames: ptr.To(true), UseDNSAnnotations: ptr.To(true)},
		}}, dns: translate.DNS{AllowExplicitHostnames: true}, annotation: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Resolve(tc.config, tc.tenant)
			if got.DNS.WildcardDomain != tc.dns.WildcardDomain || got.DNS.AllowExplicitHostnames != tc.dns.AllowExplicitHostnames || got.UseDNSAnnotations != tc.annotation || got.DefaultClusterIssuer != tc.issuer {
				t.Fatalf("got DNS %+v, useDNSAnnotations %v, issuer %q; want %+v, %v, %q",
					got.DNS, got.UseDNSAnnotations, got.DefaultClusterIssuer, tc.dns, tc.annotation, tc.issuer)
			}
		})
	}
}

func TestResolveLimits(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	i64 := func(v int64) *int64 { return &v }
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{Limits: kubelbv1alpha1.Limits{
		LoadBalancers: i32(50), Routes: i32(60), HealthCheckProbesPerSecond: i32(300), SyncSecrets: i32(9), SyncSecretBytes: i64(1 << 20),
	}, TotalHealthCheckProbesPerSecond: i32(9000)}}
	tenant := &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{Limits: kubelbv1alpha1.Limits{
		Routes: i32(0), EndpointsPerCluster: i32(7), NodePorts: i32(12), HealthCheckProbesPerSecond: i32(10),
		SyncSecretBytes: i64(0), Addresses: i32(1), ObjectBytes: i64(4096),
	}}}
	for _, tc := range []struct {
		name   string
		config *kubelbv1alpha1.Config
		tenant *kubelbv1alpha1.Tenant
		want   Limits
	}{
		{"defaults", nil, nil, Limits{10000, 1000, 5000, 2048, 1000, 500000, 2000, 20000, 8 << 20, 250, 4 << 20, 4}},
		{"config", config, nil, Limits{50, 60, 5000, 2048, 1000, 500000, 300, 9000, 8 << 20, 9, 1 << 20, 4}},
		{"tenant overrides config field by field, zero included", config, tenant, Limits{50, 0, 5000, 12, 7, 500000, 10, 9000, 4096, 9, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Resolve(tc.config, tc.tenant).Limits; got != tc.want {
				t.Errorf("Limits = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestResolveTrafficPolicies: each bound of spec.trafficPolicies comes from the Tenant, else
// the Config, named by where it is set; an empty features list of the Tenant (none) overrides
// the Config's; unset everywhere is no bounds, and translate gets the same bounds.
func TestResolveTrafficPolicies(t *testing.T) {
	config := &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: kubelbv1alpha1.ConfigSpec{
		TrafficPolicies: &kubelbv1alpha1.TrafficPolicyBounds{
			Features:             &[]kubelbv1alpha1.TrafficPolicyFeature{"Retry", "RateLimit"},
			MaxRequestsPerSecond: ptr.To[int64](1000), MaxRetries: ptr.To[int32](3),
		}}}
	tenant := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: kubelbv1alpha1.TenantSpec{
		TrafficPolicies: &kubelbv1alpha1.TrafficPolicyBounds{
			Features:             &[]kubelbv1alpha1.TrafficPolicyFeature{},
			MaxRequestsPerSecond: ptr.To[int64](100), MaxRequestTimeout: &metav1.Duration{Duration: time.Minute},
		}}}
	if got := Resolve(nil, nil); got.TrafficPolicies != nil || got.Upstream.TrafficPolicies != nil {
		t.Errorf("no Config, no Tenant: %+v", got.TrafficPolicies)
	}
	if got := Resolve(&kubelbv1alpha1.Config{}, &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{TrafficPolicies: &kubelbv1alpha1.TrafficPolicyBounds{}}}); got.TrafficPolicies != nil {
		t.Errorf("nothing set: %+v", got.TrafficPolicies)
	}
	got := Resolve(config, nil).TrafficPolicies
	want := &kubelbv1alpha1.TenantTrafficPolicyBounds{TrafficPolicyBounds: *config.Spec.TrafficPolicies,
		SetBy: map[string]string{"features": "Config default", "maxRequestsPerSecond": "Config default", "maxRetries": "Config default"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Config only (-want +got):\n%s", diff)
	}
	eff := Resolve(config, tenant)
	want = &kubelbv1alpha1.TenantTrafficPolicyBounds{
		TrafficPolicyBounds: kubelbv1alpha1.TrafficPolicyBounds{
			Features:             &[]kubelbv1alpha1.TrafficPolicyFeature{},
			MaxRequestsPerSecond: ptr.To[int64](100), MaxRetries: ptr.To[int32](3), MaxRequestTimeout: &metav1.Duration{Duration: time.Minute},
		},
		SetBy: map[string]string{"features": "Tenant t", "maxRequestsPerSecond": "Tenant t", "maxRetries": "Config default", "maxRequestTimeout": "Tenant t"},
	}
	if diff := cmp.Diff(want, eff.TrafficPolicies); diff != "" {
		t.Errorf("Tenant over Config (-want +got):\n%s", diff)
	}
	b := eff.Upstream.TrafficPolicies
	if b == nil || b.Features == nil || len(b.Features) != 0 || b.MaxRequestsPerSecond != 100 || *b.MaxRetries != 3 || b.MaxRequestTimeout != time.Minute || b.SetBy["maxRetries"] != "Config default" {
		t.Errorf("translate's bounds: %+v", b)
	}
	if o := (translate.Options{}).WithUpstream(eff.Upstream); o.TrafficPolicies != b {
		t.Error("WithUpstream does not carry the bounds to translate")
	}
}

// TestResolveAllocateNodePorts: hub NodePorts are allocated unless the Config or the Tenant
// says otherwise; the Tenant's value, when set, replaces the Config's either way.
func TestResolveAllocateNodePorts(t *testing.T) {
	config := func(v *bool) *kubelbv1alpha1.Config {
		return &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AllocateNodePorts: v}}}
	}
	tenant := func(v *bool) *kubelbv1alpha1.Tenant {
		return &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AllocateNodePorts: v}}}
	}
	for _, tc := range []struct {
		name   string
		config *kubelbv1alpha1.Config
		tenant *kubelbv1alpha1.Tenant
		want   bool
	}{
		{"neither: allocated, as Kubernetes does", nil, nil, true},
		{"unset in both", config(nil), tenant(nil), true},
		{"the Config turns them off", config(ptr.To(false)), nil, false},
		{"a Tenant without the field keeps the Config's", config(ptr.To(false)), tenant(nil), false},
		{"the Tenant turns them back on", config(ptr.To(false)), tenant(ptr.To(true)), true},
		{"the Tenant turns them off", config(nil), tenant(ptr.To(false)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Resolve(tc.config, tc.tenant).AllocateNodePorts; got != tc.want {
				t.Errorf("AllocateNodePorts = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestResolveProxyProtocol: spec.loadBalancer.proxyProtocol of the Tenant overrides the
// Config's field by field (enabled, optional); off unless enabled, and WithUpstream carries it
// to translate whatever the manager's own options say.
func TestResolveProxyProtocol(t *testing.T) {
	pp := func(enabled, optional *bool) kubelbv1alpha1.LoadBalancerSettings {
		return kubelbv1alpha1.LoadBalancerSettings{ProxyProtocol: &kubelbv1alpha1.LoadBalancerProxyProtocol{Enabled: enabled, Optional: optional}}
	}
	config := func(lb kubelbv1alpha1.LoadBalancerSettings) *kubelbv1alpha1.Config {
		return &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{LoadBalancer: lb}}
	}
	tenant := func(lb kubelbv1alpha1.LoadBalancerSettings) *kubelbv1alpha1.Tenant {
		return &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{LoadBalancer: lb}}
	}
	on, off := ptr.To(true), ptr.To(false)
	none := translate.HubProxyProtocol{}
	required, optional := translate.HubProxyProtocol{Enabled: true}, translate.HubProxyProtocol{Enabled: true, Optional: true}
	for _, tc := range []struct {
		name   string
		config *kubelbv1alpha1.Config
		tenant *kubelbv1alpha1.Tenant
		want   translate.HubProxyProtocol
	}{
		{"neither: off", nil, nil, none},
		{"unset in both", config(kubelbv1alpha1.LoadBalancerSettings{}), tenant(kubelbv1alpha1.LoadBalancerSettings{}), none},
		{"the Config turns it on for every tenant", config(pp(on, nil)), tenant(kubelbv1alpha1.LoadBalancerSettings{}), required},
		{"the Config's optional header", config(pp(on, on)), nil, optional},
		{"optional alone is not on", config(pp(nil, on)), nil, translate.HubProxyProtocol{Optional: true}},
		{"the Tenant turns it off", config(pp(on, on)), tenant(pp(off, nil)), translate.HubProxyProtocol{Optional: true}},
		{"the Tenant turns it on, the Config's optional stays", config(pp(nil, on)), tenant(pp(on, nil)), optional},
		{"the Tenant requires the header", config(pp(on, on)), tenant(pp(nil, off)), required},
		{"the Tenant alone", nil, tenant(pp(on, nil)), required},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Resolve(tc.config, tc.tenant).Upstream.LoadBalancerProxyProtocol
			if got != tc.want {
				t.Errorf("LoadBalancerProxyProtocol = %+v, want %+v", got, tc.want)
			}
			manager := translate.Options{LoadBalancerProxyProtocol: translate.HubProxyProtocol{Enabled: true}}
			if o := manager.WithUpstream(Resolve(tc.config, tc.tenant).Upstream); o.LoadBalancerProxyProtocol != tc.want {
				t.Errorf("WithUpstream: %+v, want %+v", o.LoadBalancerProxyProtocol, tc.want)
			}
		})
	}
}

// TestResolveAddressPool: the Tenant's spec.loadBalancer.addressPool overrides the Config's;
// neither set is "" (the default pool).
func TestResolveAddressPool(t *testing.T) {
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{
		LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AddressPool: ptr.To("shared")}}}
	tenant := &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
		LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AddressPool: ptr.To("gold")}}}
	for _, tc := range []struct {
		name   string
		config *kubelbv1alpha1.Config
		tenant *kubelbv1alpha1.Tenant
		want   string
	}{
		{"neither", nil, nil, ""},
		{"config only", config, &kubelbv1alpha1.Tenant{}, "shared"},
		{"tenant overrides config", config, tenant, "gold"},
		{"tenant only", nil, tenant, "gold"},
		{"tenant sets the default pool explicitly", config, &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
			LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AddressPool: ptr.To("")}}}, ""},
	} {
		if got := Resolve(tc.config, tc.tenant).AddressPool; got != tc.want {
			t.Errorf("%s: address pool %q, want %q", tc.name, got, tc.want)
		}
		// spec.loadBalancer.nodeSet resolves the same way.
		if got := Resolve(withNodeSet(tc.config), withNodeSet(tc.tenant)).NodeSet; got != tc.want {
			t.Errorf("%s: node set %q, want %q", tc.name, got, tc.want)
		}
	}
}

// withNodeSet copies the address pool of the settings into spec.loadBalancer.nodeSet alone.
func withNodeSet[T *kubelbv1alpha1.Config | *kubelbv1alpha1.Tenant](o T) T {
	switch v := any(o).(type) {
	case *kubelbv1alpha1.Config:
		if v == nil {
			return o
		}
		c := v.DeepCopy()
		c.Spec.LoadBalancer.NodeSet, c.Spec.LoadBalancer.AddressPool = c.Spec.LoadBalancer.AddressPool, nil
		return any(c).(T)
	case *kubelbv1alpha1.Tenant:
		if v == nil {
			return o
		}
		c := v.DeepCopy()
		c.Spec.LoadBalancer.NodeSet, c.Spec.LoadBalancer.AddressPool = c.Spec.LoadBalancer.AddressPool, nil
		return any(c).(T)
	}
	return o
}

// TestResolveReservedDomainsAndSteering: reserved domains add up (the Config's and the
// Tenant's lists and both wildcard domains); a Tenant's allowedSteeringAnnotations replace
// the Config's.
func TestResolveReservedDomainsAndSteering(t *testing.T) {
	t.Parallel()
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{
		DNS:                kubelbv1alpha1.DNSSettings{WildcardDomain: ptr.To("*.apps.example.com"), ReservedDomains: []string{"hub.example.net"}},
		AnnotationSettings: kubelbv1alpha1.AnnotationSettings{AllowedSteeringAnnotations: []string{"metallb.universe.tf/"}},
	}}
	tenant := &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
		DNS:                kubelbv1alpha1.DNSSettings{WildcardDomain: ptr.To("b.example.com"), ReservedDomains: []string{"b-internal.example.com"}},
		AnnotationSettings: kubelbv1alpha1.AnnotationSettings{AllowedSteeringAnnotations: []string{"kube-vip.io/"}},
	}}
	got := Resolve(config, tenant)
	if diff := cmp.Diff([]string{"hub.example.net", "*.apps.example.com", "b-internal.example.com", "b.example.com"}, got.DNS.ReservedDomains); diff != "" {
		t.Errorf("reserved domains (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"kube-vip.io/"}, got.AnnotationSettings.AllowedSteeringAnnotations); diff != "" {
		t.Errorf("allowed steering annotations (-want +got):\n%s", diff)
	}
	if got := Resolve(config, nil); !cmp.Equal(got.AnnotationSettings.AllowedSteeringAnnotations, []string{"metallb.universe.tf/"}) {
		t.Errorf("Config alone: %v", got.AnnotationSettings.AllowedSteeringAnnotations)
	}
}

// TestDroppedAnnotationsNote: every key while they fit, then how many more, within an
// Event's note.
func TestDroppedAnnotationsNote(t *testing.T) {
	t.Parallel()
	if got := DroppedAnnotationsNote([]string{"kube-vip.io/a", "metallb.io/b"}); !strings.HasSuffix(got, "Config): kube-vip.io/a, metallb.io/b") {
		t.Errorf("note %q", got)
	}
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("metallb.universe.tf/%s-%d", strings.Repeat("k", 60), i))
	}
	got := DroppedAnnotationsNote(many)
	if len(got) > 1000 || !strings.HasPrefix(got, "40 annotation(s)") || !strings.Contains(got, many[0]) || !regexp.MustCompile(` and \d+ more$`).MatchString(got) {
		t.Errorf("note of %d bytes: %q", len(got), got)
	}
}

// TestLargestTenantAtDefaultLimits: the largest tenant of the translation benchmarks and
// tests (translatetest, below this package, so it writes the numbers out) is made at the
// default endpointsPerCluster, and its listener ports alone, at that many endpoints each, reach
// the default tenant-wide endpoints limit: with no default listener-port limit (the shared
// range bounds them), more listeners add listeners and clusters but no endpoints.
func TestLargestTenantAtDefaultLimits(t *testing.T) {
	t.Parallel()
	if translatetest.LargestEndpointsPerCluster != int(DefaultLimitEndpointsPerCluster) ||
		translatetest.LargestListenerPorts*translatetest.LargestEndpointsPerCluster < int(DefaultLimitEndpoints) {
		t.Fatalf("translatetest's largest tenant (%d listener ports, %d endpoints per cluster) is not at the default limits (%d endpoints per cluster, %d endpoints)",
			translatetest.LargestListenerPorts, translatetest.LargestEndpointsPerCluster, DefaultLimitEndpointsPerCluster, DefaultLimitEndpoints)
	}
}

// TestStaticAddressGrant: a Tenant's grant reads IP addresses and CIDRs (masked), leaves out
// what is neither, and reads at most MaxStaticAddresses entries however many are stored.
func TestStaticAddressGrant(t *testing.T) {
	got := StaticAddressGrant([]string{"192.0.2.7", " 10.1.2.3/24 ", "2001:db8::1", "fe80::1%eth0", "10.0.0.0/33", "nope", "::ffff:10.0.0.0/104"})
	want := []string{"192.0.2.7/32", "10.1.2.0/24", "2001:db8::1/128"}
	if len(got) != len(want) {
		t.Fatalf("grant %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d: %s, want %s", i, got[i], want[i])
		}
	}
	many := make([]string, 5000)
	for i := range many {
		many[i] = "192.0.2.1"
	}
	if n := len(StaticAddressGrant(many)); n != MaxStaticAddresses {
		t.Errorf("5000 entries gave %d, want %d", n, MaxStaticAddresses)
	}
	tn := &kubelbv1alpha1.Tenant{}
	tn.Spec.GatewayAPI.StaticAddresses = []string{"192.0.2.0/30"}
	if g := Resolve(nil, tn).StaticAddresses; len(g) != 1 || g[0].String() != "192.0.2.0/30" {
		t.Errorf("resolved grant %v", g)
	}
}
