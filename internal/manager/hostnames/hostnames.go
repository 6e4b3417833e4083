// Package hostnames holds the hub-wide ownership of LoadBalancer hostnames: the oldest claim a
// tenant may make holds a hostname, found through a field index over every namespace.
package hostnames

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
)

// ExplicitHostname is spec.hostname of lb as LoadBalancerHostname compares it (lower case,
// no trailing dot); "" when it has none.
func ExplicitHostname(lb *kubelbv1alpha1.LoadBalancer) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(lb.Spec.Hostname)), ".")
}

// IndexLoadBalancerHostname is the field index of LoadBalancers by ExplicitHostname (those
// without one are not indexed).
const IndexLoadBalancerHostname = "kubelb.hostname"

// IndexHostnames registers IndexLoadBalancerHostname with idx (a manager's field indexer),
// once per indexer: the LoadBalancer and Route controllers both need it, on one manager's cache.
func IndexHostnames(ctx context.Context, idx client.FieldIndexer) error {
	return hubcache.IndexOnce(ctx, idx, &kubelbv1alpha1.LoadBalancer{}, IndexLoadBalancerHostname, "LoadBalancers by hostname", HostnameIndex)
}

// HostnameIndex is the index function of IndexLoadBalancerHostname.
func HostnameIndex(o client.Object) []string {
	lb, ok := o.(*kubelbv1alpha1.LoadBalancer)
	if !ok {
		return nil
	}
	if h := ExplicitHostname(lb); h != "" {
		return []string{h}
	}
	return nil
}

// withHostname lists the LoadBalancers of every namespace whose explicit hostname is host
// (c must have IndexLoadBalancerHostname).
func withHostname(ctx context.Context, c client.Reader, host string) ([]kubelbv1alpha1.LoadBalancer, error) {
	list := &kubelbv1alpha1.LoadBalancerList{}
	if err := c.List(ctx, list, client.MatchingFields{IndexLoadBalancerHostname: host}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing LoadBalancers of hostname %s: %w", host, err)
	}
	return list.Items, nil
}

// HostnameHeldElsewhere reports whether host, the explicit hostname (spec.hostname) of lb,
// is held by a LoadBalancer of another tenant (HostnamesHeldElsewhere).
func HostnameHeldElsewhere(ctx context.Context, c client.Reader, managerNamespace string, lb *kubelbv1alpha1.LoadBalancer, host string) (bool, error) {
	if host == "" || host != ExplicitHostname(lb) {
		return false, nil
	}
	held, err := HostnamesHeldElsewhere(ctx, c, managerNamespace, []*kubelbv1alpha1.LoadBalancer{lb})
	return held[lb.Name], err
}

// HostnamesHeldElsewhere returns the names of the LoadBalancers of mine (all of one tenant
// namespace) whose explicit hostname is held by a LoadBalancer of another tenant: one owner
// per hostname hub-wide, the oldest claim (creation time, then namespace, then name) whose
// own tenant lets it have the hostname (translate.LoadBalancerHostname under that tenant's
// settings). Claims of tenants that may not have the hostname never hold it, so a tenant
// without explicit hostnames cannot block one. It is derived from the hub's objects alone
// (c, a cache of every namespace's LoadBalancers with IndexLoadBalancerHostname: one look-up
// per hostname; managerNamespace holds the Config), so every replica and every restart agree.
// Conflicts within a tenant are the caller's.
func HostnamesHeldElsewhere(ctx context.Context, c client.Reader, managerNamespace string, mine []*kubelbv1alpha1.LoadBalancer) (map[string]bool, error) {
	wanted := map[string][]*kubelbv1alpha1.LoadBalancer{}
	for _, lb := range mine {
		if h := ExplicitHostname(lb); h != "" {
			wanted[h] = append(wanted[h], lb)
		}
	}
	if len(wanted) == 0 {
		return nil, nil
	}
	older := func(a, b *kubelbv1alpha1.LoadBalancer) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
	claims := map[string][]*kubelbv1alpha1.LoadBalancer{} // by hostname: other tenants' claims
	for host := range wanted {
		items, err := withHostname(ctx, c, host)
		if err != nil {
			return nil, err
		}
		for i := range items {
			o := &items[i]
			if o.Namespace == mine[0].Namespace || !o.DeletionTimestamp.IsZero() || ExplicitHostname(o) != host ||
				!hubnames.IsTenantNamespace(o.Namespace) {
				continue
			}
			claims[host] = append(claims[host], o)
		}
	}
	dns := map[string]translate.DNS{} // by tenant, loaded once
	valid := func(o *kubelbv1alpha1.LoadBalancer, host string) (bool, error) {
		tenantName := hubnames.TenantName(o.Namespace)
		d, ok := dns[tenantName]
		if !ok {
			t, err := settings.Load(ctx, c, managerNamespace, tenantName)
			if err != nil {
				return false, err
			}
			d, dns[tenantName] = t.DNS, t.DNS
		}
		h, err := translate.LoadBalancerHostname(o, tenantName, d)
		return err == nil && h == host, nil
	}
	held := map[string]bool{}
	for host, cs := range claims {
		slices.SortFunc(cs, older)
		// The oldest valid claim of the other tenants; each of mine younger than it loses.
		for _, o := range cs {
			ok, err := valid(o, host)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			for _, lb := range wanted[host] {
				if older(o, lb) < 0 {
					held[lb.Name] = true
				}
			}
			break
		}
	}
	return held, nil
}

// LoadBalancersWithHostname returns the LoadBalancers (all namespaces but except's) whose
// explicit hostname is host: those to look at again when a claim on host changes.
func LoadBalancersWithHostname(ctx context.Context, c client.Reader, host, except string) ([]client.ObjectKey, error) {
	if host == "" {
		return nil, nil
	}
	items, err := withHostname(ctx, c, host)
	if err != nil {
		return nil, err
	}
	var out []client.ObjectKey
	for i := range items {
		o := &items[i]
		if o.Namespace != except && ExplicitHostname(o) == host {
			out = append(out, client.ObjectKeyFromObject(o))
		}
	}
	return out, nil
}

// HasExplicitHostname selects LoadBalancers that ask for a hostname of their own
// (spec.hostname): only those can claim a hostname another object holds.
func HasExplicitHostname(o client.Object) bool {
	lb, ok := o.(*kubelbv1alpha1.LoadBalancer)
	return ok && lb.Spec.Hostname != ""
}

// SameHostnameElsewhere returns, for a LoadBalancer with an explicit hostname (created,
// changed or deleted: a watch's old and new objects both come here), the LoadBalancers of
// other tenants asking for the same hostname: one of them may now hold it, or lose it. An
// error is logged (a watch's map function cannot return it) and gives none.
func SameHostnameElsewhere(ctx context.Context, c client.Reader, o client.Object) []client.ObjectKey {
	lb, ok := o.(*kubelbv1alpha1.LoadBalancer)
	if !ok {
		return nil
	}
	keys, err := LoadBalancersWithHostname(ctx, c, ExplicitHostname(lb), lb.Namespace)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "finding LoadBalancers of the same hostname")
		return nil
	}
	return keys
}
