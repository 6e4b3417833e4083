package hubnames

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// LabelAppName is the well-known app name label. With EnvoyAppName it marks a tenant's Envoy
// fleet; the tenant controller uses it for the ccm access objects.
const LabelAppName = "app.kubernetes.io/name"

// EnvoyAppName is the value of LabelAppName on a tenant's Envoy pods and fleet objects.
const EnvoyAppName = "envoy"

// IsManaged reports whether an object carries kubelb.k8c.io/managed-by=kubelb: a namespace the
// manager acts in, or an object kubelb made. Only the label is read; which object kubelb made
// it for is LoadBalancerOf, IsRouteService and IsSyncedSecret.
func IsManaged(o client.Object) bool {
	return o != nil && o.GetLabels()[kubelbv1alpha1.LabelManagedBy] == kubelbv1alpha1.LabelManagedByValue
}

// TenantLabels are the labels of an object kubelb makes for tenant (its name, not its
// namespace): managed-by: kubelb and kubelb.k8c.io/tenant=<tenant>.
func TenantLabels(tenant string) map[string]string {
	return map[string]string{
		kubelbv1alpha1.LabelManagedBy:  kubelbv1alpha1.LabelManagedByValue,
		kubelbv1alpha1.LabelTenantName: tenant,
	}
}

// OriginLabels are the labels of a hub object the ccm mirrors from tenant object
// namespace/name into the hub namespace tenantNamespace: TenantLabels and the origin's name,
// namespace and, when kind is not "", kind. The tenant label holds the tenant's name, as on
// every other hub object made for the tenant.
func OriginLabels(tenantNamespace, kind, namespace, name string) map[string]string {
	l := TenantLabels(TenantName(tenantNamespace))
	l[kubelbv1alpha1.LabelOriginName] = name
	l[kubelbv1alpha1.LabelOriginNamespace] = namespace
	if kind != "" {
		l[kubelbv1alpha1.LabelOriginResourceKind] = kind
	}
	return l
}

// EnvoyPodLabels are the labels of the Envoy pods of the tenant whose hub namespace is
// tenantNamespace ("tenant-x"): app.kubernetes.io/name=envoy and kubelb.k8c.io/tenant=x. The
// Envoy fleet controller puts them on its pods and the hub Services select pods by them; this
// is the one place they are defined.
func EnvoyPodLabels(tenantNamespace string) map[string]string {
	return map[string]string{
		LabelAppName:                   EnvoyAppName,
		kubelbv1alpha1.LabelTenantName: TenantName(tenantNamespace),
	}
}

// HasAll reports whether have contains every key/value of want: the labels (or annotations)
// kubelb sets on an object it made are all still there, whatever others added.
func HasAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// AdmissionWebhookName is the name of the manager's admission webhook for tenant objects
// (in ValidatingWebhookConfiguration kubelb-tenant-objects); the API server names it in
// each refusal, which is how the ccm tells a tenant-limit refusal from others.
const AdmissionWebhookName = "tenant-objects.kubelb.k8c.io"
