package planner

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/requeue"
	"kubelb.dev/kubelb/internal/portalloc"
)

// newController is a Controller without a manager: what applyPorts and publish need.
func newController() *Controller {
	return &Controller{opts: Options{Waiters: requeue.NewWaiters()}, planners: map[string]*Planner{}, ingress: map[string]IngressOutcome{},
		outcomes: map[string]map[objectKey]Outcome{}}
}

// plan plans in with c's memo, applies its ports to a and publishes the outcomes.
func (c *Controller) planAndApply(t *testing.T, a *portalloc.Allocator, in Input) map[objectKey]Outcome {
	t.Helper()
	in.Namespace = ns
	in.Allocated = a.Owners(ns)
	p := c.planner(ns).Plan(in)
	out, _, err := c.applyPorts(a, p, tenantKeyOf(in.Tenant))
	if err != nil {
		t.Fatal(err)
	}
	c.publish(ns, &IngressOutcome{}, out, in.Routes)
	return out
}

// TestApplyPorts: the plan's listener ports reach the allocator, holder after holder in
// name order; a LoadBalancer that waits for ports gets those another frees; a refused one and
// a gone one hold none; an Outcome is current only for the object's generation and the
// tenant's settings.
func TestApplyPorts(t *testing.T) {
	t.Parallel()
	a, err := portalloc.New(portalloc.Range{Min: 20000, Max: 20002})
	if err != nil {
		t.Fatal(err)
	}
	c := newController()
	ten := tenant()
	alpha, beta := lb("alpha", 1, 80, 443), lb("beta", 0, 1, 2)
	in := Input{Tenant: ten, LoadBalancers: []*kubelbv1alpha1.LoadBalancer{alpha, beta}}
	alphaKey, betaKey := objectKey{loadBalancer: true, name: "alpha"}, objectKey{loadBalancer: true, name: "beta"}

	out := c.planAndApply(t, a, in)
	if o := out[alphaKey]; len(o.Alloc) != 2 || o.Exhausted != nil {
		t.Fatalf("alpha: %v %v, want two ports", o.Alloc, o.Exhausted)
	}
	if o := out[betaKey]; len(o.Alloc) != 0 || !errors.Is(o.Exhausted, portalloc.ErrExhausted) {
		t.Fatalf("beta: %v %v, want none: one port is left for two", o.Alloc, o.Exhausted)
	}
	first := out[alphaKey]
	if !first.For(alpha, ten) {
		t.Error("alpha's outcome is not current for alpha as planned")
	}
	newer := alpha.DeepCopy()
	newer.Generation++
	if first.For(newer, ten) {
		t.Error("alpha's outcome is current for a newer generation")
	}
	limited := ten
	limited.Limits.LoadBalancers = 1
	if first.For(alpha, limited) {
		t.Error("alpha's outcome is current under other limits")
	}

	// The same plan again: nothing moves.
	if again := c.planAndApply(t, a, in)[alphaKey]; !again.equal(first) {
		t.Errorf("alpha's outcome moved: %+v, was %+v", again, first)
	}

	// One LoadBalancer only: alpha, the newer, is refused; its ports go to beta at once.
	in.Tenant = limited
	out = c.planAndApply(t, a, in)
	if o := out[alphaKey]; o.Refused == "" || len(o.Alloc) != 0 {
		t.Fatalf("alpha: refused %q, ports %v; want refused, none", o.Refused, o.Alloc)
	}
	if o := out[betaKey]; len(o.Alloc) != 2 || o.Exhausted != nil {
		t.Fatalf("beta after alpha's free: %v %v, want two ports", o.Alloc, o.Exhausted)
	}

	// Gone: its ports are freed by the plan.
	in.LoadBalancers = nil
	c.planAndApply(t, a, in)
	if owners := a.Owners(ns); len(owners) != 0 {
		t.Errorf("ports still held by %v after every LoadBalancer went", owners)
	}
	if _, ok := c.OutcomeOf(true, types.NamespacedName{Namespace: ns, Name: "beta"}); ok {
		t.Error("beta still has an outcome once gone")
	}
}
