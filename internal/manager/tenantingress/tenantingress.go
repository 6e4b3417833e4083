// Package tenantingress publishes, per tenant, why its Ingress Service (kubelb-ingress)
// cannot be made. That Service serves the tenant's Ingress Routes and its LoadBalancer
// hostnames (port 443, and the DNS record annotation): the tenants' planner
// (internal/manager/planner) decides it and reports here, and the LoadBalancer controller
// reads it to tell a LoadBalancer whose hostname is not served, and why, instead of
// claiming a hostname nothing serves.
package tenantingress

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubelb.dev/kubelb/internal/manager/requeue"
)

// Problems holds the tenants' Ingress Service problems, by tenant namespace. The manager
// has one, shared by the Route and LoadBalancer controllers.
type Problems struct {
	mu       sync.Mutex
	problems map[string]string
	lbs      requeue.Queue
	lbsIn    func(ctx context.Context, namespace string) []types.NamespacedName
}

// New returns an empty Problems.
func New() *Problems {
	return &Problems{problems: map[string]string{}}
}

// Of is why the Ingress Service of the tenant namespace cannot be made ("" when it can, or
// is not needed, or was not decided yet).
func (p *Problems) Of(namespace string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.problems[namespace]
}

// Set records the problem of the tenant namespace ("": none) and, when it changed,
// requeues the tenant's LoadBalancers.
func (p *Problems) Set(ctx context.Context, namespace, problem string) {
	p.mu.Lock()
	if p.problems[namespace] == problem {
		p.mu.Unlock()
		return
	}
	if problem == "" {
		delete(p.problems, namespace)
	} else {
		p.problems[namespace] = problem
	}
	lbsIn := p.lbsIn
	p.mu.Unlock()
	if lbsIn != nil {
		p.lbs.Add(lbsIn(ctx, namespace)...)
	}
}

// LoadBalancers captures the LoadBalancer controller's queue (register it with that
// controller); lbsIn lists the LoadBalancers of a namespace.
func (p *Problems) LoadBalancers(lbsIn func(ctx context.Context, namespace string) []types.NamespacedName) source.Source {
	p.mu.Lock()
	p.lbsIn = lbsIn
	p.mu.Unlock()
	return p.lbs.Source()
}
