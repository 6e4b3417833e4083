package manager

import (
	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
)

// HasAll reports whether have contains every key/value of want.
func HasAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// LabelAppName is the well-known app name label. With EnvoyAppName it marks a tenant's Envoy
// fleet; the tenant controller uses it for the ccm access objects.
const LabelAppName = "app.kubernetes.io/name"

// EnvoyAppName is the value of LabelAppName on a tenant's Envoy pods and fleet objects.
const EnvoyAppName = "envoy"

// EnvoyPodLabels are the labels of the Envoy pods of the tenant whose hub namespace is
// tenantNamespace ("tenant-x"): app.kubernetes.io/name=envoy and kubelb.k8c.io/tenant=x. The
// Envoy fleet controller puts them on its pods and the hub Services select pods by them; this
// is the one place they are defined.
func EnvoyPodLabels(tenantNamespace string) map[string]string {
	return map[string]string{
		LabelAppName:                   EnvoyAppName,
		kubelbv1alpha1.LabelTenantName: settings.TenantName(tenantNamespace),
	}
}
