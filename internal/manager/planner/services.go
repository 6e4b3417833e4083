package planner

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubservice"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/settings"
)

// The apply step of the LoadBalancers' and Gateways' hub Services ("envoy-<lb>",
// "gateway-<route>"): after the listener ports, each holder's hub Service is applied
// (server-side apply) with the ports that got a listener port, or deleted when the plan
// wants none; the hub Services of objects gone are deleted before their ports are freed.
// What was applied is remembered per object (its resourceVersion, its hub Service's as the
// cache shows it, its ports, the tenant's settings), so a plan after a change of one object
// applies that object's Service only.

// ServiceOutcome is what the plan's apply step did with an object's hub Service.
type ServiceOutcome struct {
	// Type is the type the hub Service was applied with ("" when none is applied: refused,
	// disabled, no port with a listener port, rejected).
	Type corev1.ServiceType
	// Ports are the ports of a Gateway's hub Service (those with a listener port).
	Ports []Port
	// Err is why the hub Service is not there: the API server rejected it, or a Service
	// kubelb did not make for this object stands in its place.
	Err error
	// FamilyErr: the hub's API server refused the IP families a LoadBalancer asks for.
	FamilyErr error
	// StaticTaken: the Gateway's granted static address is held or asked for by another hub
	// Service; the tenant is planned again after StaticAddressRetry.
	StaticTaken bool
}

func (s ServiceOutcome) equal(o ServiceOutcome) bool {
	return s.Type == o.Type && slices.Equal(s.Ports, o.Ports) && errString(s.Err) == errString(o.Err) &&
		errString(s.FamilyErr) == errString(o.FamilyErr) && s.StaticTaken == o.StaticTaken
}

// DefaultStaticAddressRetry is how often a tenant with a Gateway whose granted static
// address another hub Service holds or asks for is planned again: the address may have been
// freed.
const DefaultStaticAddressRetry = 30 * time.Second

// familyRecheck is how long a LoadBalancer whose IP families the hub refused waits before
// its Service is applied again (the hub's Service range may have been extended).
const familyRecheck = 5 * time.Minute

// madeWait is how long a hub Service the plan made, which the cache does not show yet, is
// not applied again: its create event plans the tenant again (and, should it never show, the
// plan after madeWait applies it again).
const madeWait = 5 * time.Second

// applyWorkers bounds the hub Services one plan applies at once.
const applyWorkers = 8

// appliedKey is what an applied hub Service was made from.
type appliedKey struct {
	resourceVersion string // the object's
	service         string // the hub Service's as the cache showed it (serviceKey)
	alloc           string // the listener ports
	settings        [sha256.Size]byte
	static          netip.Addr
	keepClients     bool // the Gateways keep the clients' addresses (Plan.GatewaysKeepClientAddresses)
}

// applied is what the apply step remembers of one object's hub Service.
type applied struct {
	key     appliedKey
	at      time.Time
	outcome ServiceOutcome
}

// serviceJob is the hub Service work of one holder.
type serviceJob struct {
	h        Holder
	lb       *kubelbv1alpha1.LoadBalancer
	route    *kubelbv1alpha1.Route
	svc      *corev1.Service // as the cache shows it (nil: none)
	alloc    map[portalloc.Key]int32
	key      appliedKey
	outcome  ServiceOutcome
	err      error
	remember bool
}

// settingsSum is what the memo keys of the tenant's settings (once per plan).
func settingsSum(t settings.Tenant) [sha256.Size]byte {
	b, err := json.Marshal(t)
	if err != nil { // never: the settings are plain data; then nothing is remembered
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(b)
}

// allocKey is what the memo keys of a holder's listener ports.
func allocKey(alloc map[portalloc.Key]int32) string {
	keys := slices.SortedFunc(maps.Keys(alloc), func(a, b portalloc.Key) int {
		return compareKeys(a, b)
	})
	b := make([]byte, 0, 16*len(keys))
	for _, k := range keys {
		b = fmt.Appendf(b, "%v=%d,", k, alloc[k])
	}
	return string(b)
}

func compareKeys(a, b portalloc.Key) int {
	x, y := fmt.Sprint(a), fmt.Sprint(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// applyServices applies (or deletes) the hub Service of every LoadBalancer and Gateway of
// the plan, given their listener ports (outcomes, updated with what was done). It returns how soon the tenant must be planned
// again (0: when an event says so) and the errors to retry with backoff.
func (c *Controller) applyServices(ctx context.Context, p Plan, in Input, tenant settings.Tenant, outcomes map[objectKey]Outcome) (time.Duration, error) {
	c.mu.Lock()
	memo := c.applied[p.Namespace]
	if memo == nil {
		memo = map[types.UID]applied{}
		c.applied[p.Namespace] = memo
	}
	c.mu.Unlock()
	sum := settingsSum(tenant)
	lbs := make(map[string]*kubelbv1alpha1.LoadBalancer, len(in.LoadBalancers))
	for _, lb := range in.LoadBalancers {
		lbs[lb.Name] = lb
	}
	routes := make(map[string]*kubelbv1alpha1.Route, len(in.Routes))
	for _, rt := range in.Routes {
		routes[rt.Name] = rt
	}

	var jobs []*serviceJob
	var requeue time.Duration
	keep := map[types.UID]bool{}
	for _, h := range p.Holders {
		if h.Kind == Route && h.DeleteService {
			// What the Route had as a Gateway (its embedded object was replaced) goes.
			if err := c.deleteService(ctx, in.Services[h.Service]); err != nil {
				return 0, err
			}
		}
		if h.Kind != LoadBalancer && h.Kind != Gateway {
			continue
		}
		key := objectKey{loadBalancer: h.Kind == LoadBalancer, name: h.Name}
		o := outcomes[key]
		j := &serviceJob{h: h, lb: lbs[h.Name], svc: in.Services[h.Service], alloc: o.Alloc}
		if h.Kind == Gateway {
			j.lb, j.route = nil, routes[h.Name]
		}
		keep[h.UID] = true
		j.key = appliedKey{service: serviceKey(j.svc), alloc: allocKey(o.Alloc), settings: sum, keepClients: h.Kind == Gateway && p.GatewaysKeepClientAddresses}
		if j.lb != nil {
			j.key.resourceVersion = j.lb.ResourceVersion
		} else if j.route != nil {
			j.key.resourceVersion = j.route.ResourceVersion
		}
		if h.Wanted && h.Kind == Gateway && j.route != nil && len(tenant.StaticAddresses) > 0 {
			// Another tenant's Service may take or free the address: looked up every plan.
			ip, taken, err := c.staticAddress(ctx, j.route, tenant.StaticAddresses, j.svc)
			if err != nil {
				return 0, err
			}
			j.key.static = ip
			j.outcome.StaticTaken = taken
		}
		if m, ok := memo[h.UID]; ok && m.key == j.key && (j.svc != nil || time.Since(m.at) < madeWait) {
			o.Service = m.outcome // nothing it reads changed since it was applied
			outcomes[key] = o
			if j.svc == nil && m.outcome.Type != "" { // made, not in the cache yet: look again
				requeue = minRequeue(requeue, madeWait)
			}
			requeue = minRequeue(requeue, retryOf(m.outcome, c.opts.StaticAddressRetry))
			continue
		}
		jobs = append(jobs, j)
	}

	// Apply, a few at a time.
	work := make(chan *serviceJob)
	var wg sync.WaitGroup
	for range min(applyWorkers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				if j.h.Kind == LoadBalancer {
					j.err = c.applyLoadBalancerService(ctx, tenant, j)
				} else {
					j.err = c.applyGatewayService(ctx, tenant, j)
				}
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()

	var errs []error
	c.mu.Lock()
	for _, j := range jobs {
		key := objectKey{loadBalancer: j.h.Kind == LoadBalancer, name: j.h.Name}
		o := outcomes[key]
		o.Service = j.outcome
		outcomes[key] = o
		requeue = minRequeue(requeue, retryOf(j.outcome, c.opts.StaticAddressRetry))
		switch {
		case j.err != nil:
			errs = append(errs, j.err)
			delete(memo, j.h.UID)
		case j.outcome.Err != nil && !errors.As(j.outcome.Err, new(foreignError)):
			// Retried with backoff: some rejections are transient.
			errs = append(errs, fmt.Errorf("applying hub Service %s/%s: %w", p.Namespace, j.h.Service, j.outcome.Err))
			delete(memo, j.h.UID)
		case j.remember:
			memo[j.h.UID] = applied{key: j.key, at: time.Now(), outcome: j.outcome}
		default:
			delete(memo, j.h.UID)
		}
	}
	for uid := range memo {
		if !keep[uid] {
			delete(memo, uid)
		}
	}
	c.mu.Unlock()

	return requeue, errors.Join(errs...)
}

// retryOf is how soon a hub Service's outcome asks for the tenant to be planned again.
func retryOf(o ServiceOutcome, static time.Duration) time.Duration {
	var d time.Duration
	if o.FamilyErr != nil {
		d = familyRecheck
	}
	if o.StaticTaken {
		d = minRequeue(d, static)
	}
	return d
}

// minRequeue is the sooner of two requeue delays, 0 meaning none.
func minRequeue(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// deleteService deletes a hub Service kubelb made, unless it is already being deleted or
// the planner deleted it already (its cache may still show it; see deletions).
func (c *Controller) deleteService(ctx context.Context, svc *corev1.Service) error {
	if svc == nil || !svc.DeletionTimestamp.IsZero() || c.deleted.done(svc) {
		return nil
	}
	if err := hubservice.Delete(ctx, c.client, svc); err != nil {
		return err
	}
	c.deleted.record(svc)
	return nil
}

// foreignError is the problem of a Service kubelb did not make for the object, standing
// where its hub Service should be: it is never touched, and retrying does not help (its
// deletion or change plans the tenant again).
type foreignError struct{ msg string }

func (e foreignError) Error() string { return e.msg }

// foreignService is the problem of a Service in the place of an object's hub Service.
func foreignService(svc *corev1.Service, what string) error {
	return foreignError{fmt.Sprintf("service %s/%s exists and %s; rename or delete it", svc.Namespace, svc.Name, what)}
}

// applyLoadBalancerService applies or deletes the hub Service of the LoadBalancer of job j.
func (c *Controller) applyLoadBalancerService(ctx context.Context, t settings.Tenant, j *serviceJob) error {
	h, lb, svc := j.h, j.lb, j.svc
	switch {
	case lb == nil:
		return nil
	case h.Stale:
		// An earlier LoadBalancer's of this name: it goes; this one's is made once its
		// deletion is seen (its delete event plans the tenant again).
		return c.deleteService(ctx, svc)
	case h.Foreign:
		j.outcome.Err = foreignService(svc, "is not controlled by the LoadBalancer")
		return nil
	}
	ports := AllocatedLoadBalancerPorts(h.LoadBalancerPorts, j.alloc)
	if h.Disabled || h.Refused != "" || len(ports) == 0 {
		j.remember = true
		return c.deleteService(ctx, svc)
	}
	typ, _ := HubServiceType(lb, t.AllocateNodePorts)
	desired := LoadBalancerService(lb, t, ports, j.alloc, svc)
	markLoadBalancerExhausted(desired, h.LoadBalancerPorts, j.alloc)
	_, rejected, err := hubservice.Apply(ctx, c.client, LoadBalancerFieldOwner, svc, desired)
	if err != nil {
		return err
	}
	c.droppedLB.Warn(c.recorder, lb, t.DroppedSteeringAnnotations(lb.Annotations))
	switch {
	case IsIPFamilyRefusal(rejected):
		// Not retried with backoff: nothing changes until the LoadBalancer or the hub's
		// Service range does; looked at again after familyRecheck.
		j.outcome.FamilyErr, j.remember = rejected, true
	case rejected != nil:
		j.outcome.Err = rejected
	default:
		j.outcome.Type, j.remember = typ, true
	}
	return nil
}

// applyGatewayService applies or deletes the hub Service of the Gateway Route of job j.
func (c *Controller) applyGatewayService(ctx context.Context, t settings.Tenant, j *serviceJob) error {
	h, rt, svc := j.h, j.route, j.svc
	if rt == nil || h.InvalidName {
		return nil
	}
	if h.Stale {
		// An earlier Route's of this name: it goes, and this Route's is applied in its place.
		if err := c.deleteService(ctx, svc); err != nil {
			return err
		}
		svc = nil
	}
	switch {
	case h.Foreign:
		j.outcome.Err = foreignService(svc, "was not made by kubelb for this Route")
		return nil
	case h.Disabled || h.Refused != "" || !h.Wanted:
		j.remember = true
		return c.deleteService(ctx, svc)
	}
	ports := AllocatedGatewayPorts(rt, h.GatewayPorts, j.alloc)
	j.outcome.Ports = ports
	if len(ports) == 0 {
		j.remember = true
		return c.deleteService(ctx, svc)
	}
	if svc != nil && !svc.DeletionTimestamp.IsZero() {
		return fmt.Errorf("hub Service %s/%s is being deleted; waiting to make it again", svc.Namespace, svc.Name)
	}
	desired := GatewayService(rt, t, ports, svc, j.key.static, j.key.keepClients)
	hubservice.MarkExhausted(desired, missingGatewayPorts(rt, h.GatewayPorts, j.alloc))
	_, rejected, err := hubservice.Apply(ctx, c.client, RouteFieldOwner, svc, desired)
	if err != nil {
		return err
	}
	if rejected != nil {
		j.outcome.Err, j.outcome.Ports = rejected, nil
		return nil
	}
	c.droppedRoute.Warn(c.recorder, rt, t.DroppedSteeringAnnotations(gatewayAnnotations(rt)))
	j.outcome.Type, j.remember = corev1.ServiceTypeLoadBalancer, true
	return nil
}

// goneServices are the hub Services of in that were made for a LoadBalancer or a Route of
// the tenant that is gone (none of its name, or one being deleted), sorted: the apply step
// deletes them before their ports are freed.
func goneServices(in Input, present func(loadBalancer bool, name string) bool) []string {
	var out []string
	for name, svc := range in.Services {
		if !svc.DeletionTimestamp.IsZero() {
			continue
		}
		if made, _, ok := hubnames.LoadBalancerMadeFor(svc); ok && made.Namespace == in.Namespace && name == hubnames.LoadBalancerServiceName(made.Name) {
			if !present(true, made.Name) {
				out = append(out, name)
			}
			continue
		}
		if rt := hubnames.RouteNamedBy(svc); rt != "" && name == hubnames.GatewayServiceName(rt) && hubnames.RouteControlled(svc, rt) {
			if !present(false, rt) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}
