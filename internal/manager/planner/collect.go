package planner

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/hostnames"
	"kubelb.dev/kubelb/internal/settings"
)

// collect reads the tenant's Input from the caches.
func (c *Controller) collect(ctx context.Context, namespace string, tenant settings.Tenant) (Input, error) {
	in := Input{Namespace: namespace, Tenant: tenant, Services: map[string]*corev1.Service{}}
	lbs := &kubelbv1alpha1.LoadBalancerList{}
	if err := c.client.List(ctx, lbs, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("listing the LoadBalancers of %s: %w", namespace, err)
	}
	routes := &kubelbv1alpha1.RouteList{}
	if err := c.client.List(ctx, routes, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("listing the Routes of %s: %w", namespace, err)
	}
	svcs := &corev1.ServiceList{}
	if err := c.client.List(ctx, svcs, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("listing the Services of %s: %w", namespace, err)
	}
	in.LoadBalancers = make([]*kubelbv1alpha1.LoadBalancer, 0, len(lbs.Items))
	for i := range lbs.Items {
		in.LoadBalancers = append(in.LoadBalancers, &lbs.Items[i])
	}
	in.Routes = make([]*kubelbv1alpha1.Route, 0, len(routes.Items))
	for i := range routes.Items {
		in.Routes = append(in.Routes, &routes.Items[i])
	}
	c.deleted.prune(namespace, svcs.Items)
	for i := range svcs.Items {
		if s := &svcs.Items[i]; planned(s.Name) && !c.deleted.done(s) {
			in.Services[s.Name] = s
		}
	}
	if c.opts.Verdicts != nil { // read after the lists: at least as fresh as they are
		v, err := c.opts.Verdicts.LoadAdmission(ctx, namespace, tenant)
		if err != nil {
			return in, err
		}
		in.Verdict = &v
	}
	if !tenant.DisableLoadBalancer && !tenant.DNS.IsZero() {
		// A hostname another tenant holds gets no DNS record (nor, from the LoadBalancer
		// controller, a certificate).
		held, err := hostnames.HostnamesHeldElsewhere(ctx, c.client, c.opts.Namespace, in.LoadBalancers)
		if err != nil {
			return in, err
		}
		in.HeldElsewhere = held
	}
	return in, nil
}
