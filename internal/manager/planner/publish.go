package planner

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/routekind"
)

// publish records the tenant's outcomes (nil: none, the namespace is not managed) and
// requeues, in their controllers' queues, the objects whose Outcome changed, and the
// tenant's Ingress Routes (of routes) when its Ingress Service's did.
func (c *Controller) publish(namespace string, st *IngressOutcome, outcomes map[objectKey]Outcome, routes []*kubelbv1alpha1.Route) {
	c.mu.Lock()
	prev, had := c.ingress[namespace]
	before := c.outcomes[namespace]
	if st == nil {
		delete(c.ingress, namespace)
		delete(c.outcomes, namespace)
	} else {
		c.ingress[namespace] = *st
		c.outcomes[namespace] = outcomes
	}
	c.mu.Unlock()
	var lbs, rts []types.NamespacedName
	changed := func(k objectKey) {
		key := types.NamespacedName{Namespace: namespace, Name: k.name}
		if k.loadBalancer {
			lbs = append(lbs, key)
		} else {
			rts = append(rts, key)
		}
	}
	for k, o := range outcomes {
		if b, ok := before[k]; !ok || !b.equal(o) {
			changed(k)
		}
	}
	for k := range before {
		if _, ok := outcomes[k]; !ok {
			changed(k)
			gone := types.NamespacedName{Namespace: namespace, Name: k.name}
			if k.loadBalancer {
				c.droppedLB.Forget(gone)
			} else {
				c.droppedRoute.Forget(gone)
			}
		}
	}
	if !((st == nil && !had) || (st != nil && had && prev.equal(*st))) {
		for _, rt := range routes {
			key := client.ObjectKeyFromObject(rt)
			if k, _ := routekind.Of(rt); k.HubService() == routekind.SharedIngressService && !slices.Contains(rts, key) {
				rts = append(rts, key)
			}
		}
	}
	c.loadBalancers.Add(lbs...)
	c.routes.Add(rts...)
}

// OutcomeOf is the last Outcome of the LoadBalancer (loadBalancer true) or Route key; false
// before its tenant's plan knows it.
func (c *Controller) OutcomeOf(loadBalancer bool, key types.NamespacedName) (Outcome, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.outcomes[key.Namespace][objectKey{loadBalancer: loadBalancer, name: key.Name}]
	return o, ok
}

// LoadBalancers captures the LoadBalancer controller's queue: LoadBalancers whose Outcome
// changed are added to it.
func (c *Controller) LoadBalancers() source.Source { return c.loadBalancers.Source() }

// Routes captures the Route controller's queue: Routes whose Outcome changed, and the
// Ingress Routes of a tenant whose Ingress Service's outcome changed, are added to it.
func (c *Controller) Routes() source.Source { return c.routes.Source() }

// IngressOf is the last outcome of the tenant's Ingress Service, false before the tenant's
// first plan.
func (c *Controller) IngressOf(namespace string) (IngressOutcome, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.ingress[namespace]
	return st, ok
}
