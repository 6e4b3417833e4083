package hubnames

import (
	"strings"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// TenantNamespace returns the hub namespace of a tenant ("x" → "tenant-x").
func TenantNamespace(tenant string) string { return kubelbv1alpha1.TenantNamespacePrefix + tenant }

// TenantName returns the tenant's name for its hub namespace ("tenant-x" → "x"); a namespace
// without the prefix is returned as it is.
func TenantName(namespace string) string {
	return strings.TrimPrefix(namespace, kubelbv1alpha1.TenantNamespacePrefix)
}

// IsTenantNamespace reports whether a hub namespace is named as a tenant's (tenant-<name>).
// The name alone proves nothing: the manager acts only in those that are also managed
// (IsManaged).
func IsTenantNamespace(namespace string) bool {
	return strings.HasPrefix(namespace, kubelbv1alpha1.TenantNamespacePrefix)
}
