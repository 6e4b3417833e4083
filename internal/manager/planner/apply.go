package planner

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/hubservice"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/settings"
)

// applyPorts makes every LoadBalancer's and Route's listener ports what the plan says, and
// frees those of the objects gone; it returns each object's Outcome and whether one waits
// for free ports. An object whose requests are those it had all of last time keeps its
// ports without asking the allocator again: a plan costs what changed.
func (c *Controller) applyPorts(ports *portalloc.Allocator, p Plan, tenant tenantKey) (map[objectKey]Outcome, bool, error) {
	c.mu.Lock()
	before := c.outcomes[p.Namespace]
	c.mu.Unlock()
	out := make(map[objectKey]Outcome, len(p.Holders))
	waiting := false
	for _, h := range p.Holders {
		if h.Kind == Ingress {
			continue // applyIngress
		}
		key := objectKey{loadBalancer: h.Kind == LoadBalancer, name: h.Name}
		o := Outcome{UID: h.UID, Generation: h.Generation, tenant: tenant, Refused: h.Refused, Problems: h.Problems,
			LoadBalancerPorts: h.LoadBalancerPorts, GatewayPorts: h.GatewayPorts, requests: h.Requests}
		prev, had := before[key]
		switch {
		case h.Action == Keep:
			o.Kept = true
		case had && prev.UID == h.UID && !prev.Kept && prev.Exhausted == nil && sameRequests(prev.requests, h.Requests):
			o.Alloc = prev.Alloc // unchanged: the allocator holds exactly these
		default:
			alloc, released, err := ports.Ensure(h.Owner, h.Requests)
			if err != nil && !errors.Is(err, portalloc.ErrExhausted) {
				return nil, false, fmt.Errorf("allocating listener ports for %s %s/%s: %w", h.Kind, p.Namespace, h.Name, err)
			}
			if released > 0 { // ports this object dropped may serve one that waits
				c.opts.Waiters.Wake()
			}
			o.Alloc, o.Exhausted = alloc, err
			waiting = waiting || err != nil
		}
		out[key] = o
	}
	for _, owner := range p.Release {
		c.release(ports, owner)
	}
	return out, waiting, nil
}

// planned reports whether a Service of this name stands where a plan's hub Service is.
func planned(name string) bool {
	return name == kubelbv1alpha1.IngressServiceName || strings.HasPrefix(name, "envoy-") ||
		strings.HasPrefix(name, kubelbv1alpha1.GatewayServicePrefix)
}

// applyIngress applies the plan's Ingress Service: while it is wanted, its two listener
// ports and the Service with the ports that got one (none: no Service); otherwise it is
// deleted (unless it is someone else's) and its ports freed.
func (c *Controller) applyIngress(ctx context.Context, ports *portalloc.Allocator, p Plan, tenant settings.Tenant, svc *corev1.Service) (IngressOutcome, error) {
	h, ok := p.Holder(Ingress, kubelbv1alpha1.IngressServiceName)
	switch {
	case !ok: // nothing wants it, nothing holds it
		c.release(ports, portalloc.IngressOwner(p.Namespace))
		return IngressOutcome{}, nil
	case h.Foreign && h.Action == Keep: // wanted, and someone else's Service is in the way
		return IngressOutcome{ServiceErr: errForeign(svc)}, nil
	case !h.Wanted:
		if h.DeleteService {
			if err := c.deleteService(ctx, svc); err != nil {
				return IngressOutcome{}, err
			}
		}
		c.release(ports, h.Owner)
		return IngressOutcome{}, nil
	}
	alloc, released, allocErr := ports.Ensure(h.Owner, h.Requests)
	if allocErr != nil && !errors.Is(allocErr, portalloc.ErrExhausted) {
		return IngressOutcome{}, fmt.Errorf("allocating listener ports for the Ingress Service of %s: %w", p.Namespace, allocErr)
	}
	if released > 0 {
		c.opts.Waiters.Wake()
	}
	st := IngressOutcome{Exhausted: allocErr}
	exposed := AllocatedIngressPorts(p.Namespace, alloc)
	if len(exposed) == 0 {
		return st, c.deleteService(ctx, svc)
	}
	if svc != nil && !svc.DeletionTimestamp.IsZero() {
		return st, fmt.Errorf("hub Service %s/%s is being deleted; waiting to make it again", svc.Namespace, svc.Name)
	}
	desired := IngressService(p.Namespace, tenant, exposed, p.Hostnames, p.KeepClientAddresses, svc)
	hubservice.MarkExhausted(desired, MissingIngressPorts(p.Namespace, alloc))
	applied, rejected, err := hubservice.Apply(ctx, c.client, RouteFieldOwner, svc, desired)
	st.ServiceErr = rejected
	if err != nil || rejected != nil {
		return st, err
	}
	st.Service = &ServiceState{Name: kubelbv1alpha1.IngressServiceName, Ports: exposed, Service: applied}
	return st, nil
}

// errForeign is the problem of a Service in the place of the tenant's Ingress Service that
// kubelb did not make.
func errForeign(svc *corev1.Service) error {
	return fmt.Errorf("service %s/%s exists and was not made by kubelb for this Route; rename or delete it", svc.Namespace, svc.Name)
}

// release frees an owner's ports and wakes those waiting for ports.
func (c *Controller) release(ports *portalloc.Allocator, owner types.NamespacedName) {
	if ports.ReleaseOwner(owner) > 0 {
		c.opts.Waiters.Wake()
	}
}
