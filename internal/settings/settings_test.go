package settings

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

func TestResolveTenantOverridesConfig(t *testing.T) {
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{
		LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{Class: ptr.To("metallb")},
		EnvoyProxy:   kubelbv1alpha1.EnvoyProxy{Replicas: 3, NodeSelector: map[string]string{"role": "lb"}},
	}}
	tenant := &kubelbv1alpha1.Tenant{Spec: kubelbv1alpha1.TenantSpec{
		LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{Class: ptr.To("cilium"), Disable: true},
		EnvoyProxy:   kubelbv1alpha1.TenantEnvoyProxy{Replicas: ptr.To[int32](5)},
	}}
	tenant.Name = "a"
	got := Resolve(config, tenant)
	if *got.LoadBalancerClass != "cilium" || !got.DisableLoadBalancer || got.Envoy.Replicas != 5 ||
		got.Envoy.NodeSelector["role"] != "lb" || got.Name != "a" {
		t.Fatalf("unexpected %+v", got)
	}
	// The Config is not modified by the merge.
	if *config.Spec.LoadBalancer.Class != "metallb" || config.Spec.EnvoyProxy.Replicas != 3 {
		t.Fatal("Resolve modified the Config")
	}
	onlyConfig := Resolve(config, nil)
	if *onlyConfig.LoadBalancerClass != "metallb" || onlyConfig.Envoy.Replicas != 3 || onlyConfig.DisableLoadBalancer {
		t.Fatalf("config only: %+v", onlyConfig)
	}
	if none := Resolve(nil, nil); none.Envoy.Replicas != DefaultEnvoyReplicas || none.LoadBalancerClass != nil {
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
		"all but denied, over defaults": {
			settings: kubelbv1alpha1.AnnotationSettings{
				PropagateAllAnnotations: ptr.To(true),
				DeniedAnnotations:       []string{"secret"},
				DefaultAnnotations: map[kubelbv1alpha1.AnnotatedResource]kubelbv1alpha1.Annotations{
					"all": {"owner": "platform", "team": "default"}, "service": {"svc": "yes"}, "ingress": {"ing": "no"},
				},
			},
			want: map[string]string{
				"external-dns.alpha.kubernetes.io/hostname": "a.example.com", "team": "x",
				"metallb.universe.tf/address-pool": "public", "owner": "platform", "svc": "yes",
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

func TestNamespaceNames(t *testing.T) {
	if Namespace("a") != "tenant-a" || TenantName("tenant-a") != "a" {
		t.Fatal("tenant namespace naming")
	}
}
