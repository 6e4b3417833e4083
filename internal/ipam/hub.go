package ipam

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/metrics"
)

// HubOptions are the manager's Options (--address-provider=ipam): the pools serve the hub
// Services kubelb made in tenant namespaces (labelled kubelb.k8c.io/managed-by=kubelb) of
// type LoadBalancer whose loadBalancerClass is class ("": those without one); each takes from
// its tenant's spec.loadBalancer.addressPool (else the Config's, else the default pool), which
// poolOf returns for the tenant's name (settings.Reader.AddressPool, from the manager's
// cache). Nothing a tenant wrote chooses a pool or an address.
func HubOptions(poolOf func(ctx context.Context, tenant string) (string, error), class string) Options {
	return Options{
		Name: "ipam-hub",
		Hub:  true,
		Owns: func(svc *corev1.Service) bool {
			return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
				hubnames.IsManaged(svc) &&
				hubnames.IsTenantNamespace(svc.Namespace) &&
				ptr.Deref(svc.Spec.LoadBalancerClass, "") == class
		},
		Pool: func(ctx context.Context, svc *corev1.Service) (string, error) {
			return poolOf(ctx, hubnames.TenantName(svc.Namespace))
		},
		PoolByNamespace: true,
		Metrics:         metrics.ManagerIPAM,
	}
}
