package loadbalancer

import (
	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
)

// Labels of a tenant's Envoy pods. The hub Services of a tenant select its Envoy pods with
// exactly these labels, so the Envoy fleet controller must put them on its pod template;
// EnvoySelector is the one place they are defined.
const (
	// LabelAppName is the well-known app name label.
	LabelAppName = "app.kubernetes.io/name"
	// EnvoyAppName is the value of LabelAppName on Envoy pods.
	EnvoyAppName = "envoy"
)

// EnvoySelector returns the labels of the Envoy pods of the tenant whose hub namespace is
// tenantNamespace ("tenant-x"): app.kubernetes.io/name=envoy and kubelb.k8c.io/tenant=x. The
// pods run in tenantNamespace, next to the hub Services that select them.
func EnvoySelector(tenantNamespace string) map[string]string {
	return map[string]string{
		LabelAppName:                   EnvoyAppName,
		kubelbv1alpha1.LabelTenantName: settings.TenantName(tenantNamespace),
	}
}
