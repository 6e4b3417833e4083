package manager

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
)

// ExplicitHostname is spec.hostname of lb as LoadBalancerHostname compares it (lower case,
// no trailing dot); "" when it has none.
func ExplicitHostname(lb *kubelbv1alpha1.LoadBalancer) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(lb.Spec.Hostname)), ".")
}

// HostnameHeldElsewhere reports whether host, the explicit hostname (spec.hostname) of lb,
// is held by a LoadBalancer of another tenant: one hub-wide owner per hostname, the oldest
// claim (creation time, then namespace, then name) whose own tenant lets it have the
// hostname (translate.LoadBalancerHostname under that tenant's settings). Claims of tenants
// that may not have the hostname never hold it, so a tenant without explicit hostnames
// cannot block one. It is derived from the hub's objects alone (c, a cache of every tenant
// namespace's LoadBalancers; managerNamespace holds the Config), so every replica and every
// restart agree. Conflicts within a tenant are the caller's.
func HostnameHeldElsewhere(ctx context.Context, c client.Reader, managerNamespace string, lb *kubelbv1alpha1.LoadBalancer, host string) (bool, error) {
	if host == "" {
		return false, nil
	}
	all := &kubelbv1alpha1.LoadBalancerList{}
	if err := c.List(ctx, all, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("listing LoadBalancers: %w", err)
	}
	older := func(a, b *kubelbv1alpha1.LoadBalancer) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
	var claims []*kubelbv1alpha1.LoadBalancer
	for i := range all.Items {
		o := &all.Items[i]
		if o.Namespace == lb.Namespace || !o.DeletionTimestamp.IsZero() || !strings.HasPrefix(o.Namespace, kubelbv1alpha1.TenantNamespacePrefix) ||
			ExplicitHostname(o) != host || older(o, lb) >= 0 {
			continue
		}
		claims = append(claims, o)
	}
	slices.SortFunc(claims, older)
	for _, o := range claims {
		tenantName := settings.TenantName(o.Namespace)
		t, err := settings.Load(ctx, c, managerNamespace, tenantName)
		if err != nil {
			return false, err
		}
		if h, err := translate.LoadBalancerHostname(o, tenantName, t.DNS); err == nil && h == host {
			return true, nil
		}
	}
	return false, nil
}

// LoadBalancersWithHostname returns the LoadBalancers (all namespaces but except's) whose
// explicit hostname is host: those to look at again when a claim on host changes.
func LoadBalancersWithHostname(ctx context.Context, c client.Reader, host, except string) ([]client.ObjectKey, error) {
	if host == "" {
		return nil, nil
	}
	all := &kubelbv1alpha1.LoadBalancerList{}
	if err := c.List(ctx, all, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing LoadBalancers: %w", err)
	}
	var out []client.ObjectKey
	for i := range all.Items {
		o := &all.Items[i]
		if o.Namespace != except && ExplicitHostname(o) == host {
			out = append(out, client.ObjectKeyFromObject(o))
		}
	}
	return out, nil
}
