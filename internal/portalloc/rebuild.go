package portalloc

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
)

// Owner names of the allocations that do not belong to a LoadBalancer. A LoadBalancer's
// name is a Kubernetes object name, which never contains ':', so these never collide with
// one.
const (
	// routeOwnerPrefix prefixes a Gateway Route's name: "route:<route name>".
	routeOwnerPrefix = "route:"
	// ingressOwner owns the two ports of a tenant's shared Ingress Service.
	ingressOwner = "ingress:" + kubelbv1alpha1.IngressServiceName
)

// RouteOwner is the owner of the listener ports of a Gateway Route's hub Service.
func RouteOwner(namespace, route string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: routeOwnerPrefix + route}
}

// RouteKey is the key of one port of a Gateway Route's hub Service:
// "<namespace>/route:<route>/<protocol>/<port number>".
func RouteKey(namespace, route string, protocol corev1.Protocol, port int32) Key {
	return KeyFor(namespace, routeOwnerPrefix+route, protocol, "", port)
}

// IngressOwner is the owner of the listener ports of a tenant's shared Ingress Service.
func IngressOwner(namespace string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: ingressOwner}
}

// IngressKey is the key of one port of a tenant's shared Ingress Service:
// "<namespace>/ingress:kubelb-ingress/TCP/<port number>".
func IngressKey(namespace string, port int32) Key {
	return KeyFor(namespace, ingressOwner, corev1.ProtocolTCP, "", port)
}

// GeneratedPortName is the name a hub Service gives a port that has no name of its own:
// "<protocol>-<port>" in lower case, e.g. "tcp-80", "udp-53".
func GeneratedPortName(protocol corev1.Protocol, port int32) string {
	if protocol == "" {
		protocol = corev1.ProtocolTCP
	}
	return strings.ToLower(string(protocol)) + "-" + strconv.Itoa(int(port))
}

// Conflict is an allocation recorded in a hub Service that Rebuild did not restore; its
// owner gets a new port on its next reconcile.
type Conflict struct {
	// Key is the port whose recorded allocation was dropped.
	Key Key
	// Port is the listener port the hub Service recorded (its targetPort).
	Port int32
	// Err says why: ErrConflict (another, older hub Service holds the port) or
	// ErrOutOfRange (the range no longer contains the port).
	Err error
}

// RecordedKeys returns the allocations a hub Service records, by key: every port's
// targetPort, keyed by what the Service was made for. Only Services a kubelb manager makes
// are read, recognised by its labels:
//
//   - kubelb.k8c.io/lb-namespace (the Service's own namespace) with kubelb.k8c.io/lb-name
//     or a LoadBalancer controller reference: a LoadBalancer's "envoy-<lb>" Service (with or
//     without kubelb.k8c.io/managed-by: a KubeLB CE manager's lack it until the
//     LoadBalancer controller adopts them). A port
//     is keyed by its name, or by its number when it is unnamed or has the generated name
//     (GeneratedPortName); a LoadBalancer port named like a generated name gets its port
//     back from the hub Service on its next reconcile (the Service's targetPort is a hint).
//   - kubelb.k8c.io/managed-by=kubelb and kubelb.k8c.io/route-name: a Gateway Route's
//     Service (RouteKey).
//   - kubelb.k8c.io/managed-by=kubelb and kubelb.k8c.io/ingress=true: the tenant's shared
//     Ingress Service (IngressKey).
//
// Services being deleted record nothing. Nothing of LoadBalancer or Route status is read:
// only hub Services, which no tenant can write, are the record (tenants cannot write hub
// status either, but a status is a copy made for them, not a record).
func RecordedKeys(svc *corev1.Service) map[Key]int32 {
	if svc.DeletionTimestamp != nil {
		return nil
	}
	ns := svc.Namespace
	ours := hubnames.IsManaged(svc)
	var keyOf func(p corev1.ServicePort) Key
	switch {
	case ours && svc.Labels[kubelbv1alpha1.LabelRouteName] != "":
		route := svc.Labels[kubelbv1alpha1.LabelRouteName]
		keyOf = func(p corev1.ServicePort) Key { return RouteKey(ns, route, p.Protocol, p.Port) }
	case ours && svc.Labels[kubelbv1alpha1.LabelIngressService] == "true":
		keyOf = func(p corev1.ServicePort) Key { return IngressKey(ns, p.Port) }
	case svc.Labels[kubelbv1alpha1.LabelLoadBalancerNS] == ns:
		lb := svc.Labels[kubelbv1alpha1.LabelLoadBalancerName]
		if lb == "" {
			for _, ref := range svc.OwnerReferences {
				if ref.Controller != nil && *ref.Controller && ref.Kind == "LoadBalancer" {
					lb = ref.Name
				}
			}
		}
		if lb == "" {
			return nil
		}
		keyOf = func(p corev1.ServicePort) Key {
			name := p.Name
			if name == GeneratedPortName(p.Protocol, p.Port) {
				name = ""
			}
			return KeyFor(ns, lb, p.Protocol, name, p.Port)
		}
	default:
		return nil
	}
	out := map[Key]int32{}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.Type != intstr.Int || p.TargetPort.IntVal == 0 {
			continue
		}
		out[keyOf(p)] = p.TargetPort.IntVal
	}
	return out
}

// Rebuild returns an allocator over r holding every allocation recorded in the manager's
// hub Services (RecordedKeys): LoadBalancers', Gateway Routes' and the shared Ingress
// Services alike. The result depends only on the Services, not on their order in svcs: they
// are visited oldest first (creation time, then namespace, then name), so when two record
// the same port the older one keeps it and the other is reported as a Conflict.
func Rebuild(r Range, svcs []corev1.Service) (*Allocator, []Conflict, error) {
	a, err := New(r)
	if err != nil {
		return nil, nil, err
	}
	order := make([]*corev1.Service, 0, len(svcs))
	for i := range svcs {
		order = append(order, &svcs[i])
	}
	slices.SortFunc(order, func(x, y *corev1.Service) int {
		if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	var conflicts []Conflict
	a.mu.Lock()
	defer a.mu.Unlock()
	namespaces := map[string]struct{}{}
	for _, svc := range order {
		recorded := RecordedKeys(svc)
		keys := make([]Key, 0, len(recorded))
		for k := range recorded {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(x, y Key) int { return cmp.Compare(x.String(), y.String()) })
		for _, k := range keys {
			if err := a.claimLocked(k, recorded[k]); err != nil {
				conflicts = append(conflicts, Conflict{Key: k, Port: recorded[k], Err: err})
				continue
			}
			namespaces[k.Namespace] = struct{}{}
		}
	}
	for ns := range namespaces {
		a.reportLocked(ns)
	}
	return a, conflicts, nil
}

// Shared is the one hub-wide allocator of the manager, shared by the LoadBalancer and Route
// controllers. It is rebuilt lazily: the first Get (from a reconcile, i.e. after this
// replica won leader election and the caches synced) lists the manager's hub Services of
// the managed namespaces straight from the API server and rebuilds the allocations from
// them, before any port is handed out. The list is not read from a cache: this replica may
// just have become leader, and the previous leader's last writes must be seen.
type Shared struct {
	r      Range
	reader client.Reader
	log    func(msg string, kv ...any)

	mu    sync.Mutex
	a     *Allocator
	sweep Sweep
}

// Sweep looks at the hub Services listed for a rebuild before any allocation is restored
// from them, deletes those whose owner is gone (orphans: their owner was deleted while no
// manager ran) and returns the ones to rebuild from. An error fails the rebuild (retried on
// the next Get).
type Sweep func(ctx context.Context, svcs []corev1.Service) ([]corev1.Service, error)

// SetSweep sets the orphan sweep that runs on every rebuild, before the allocations are
// restored: the ports of the Services it deletes are free afterwards. Call it before the
// first Get.
func (s *Shared) SetSweep(sweep Sweep) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep = sweep
}

// NewShared returns a Shared allocator over r that rebuilds from what reader lists. log
// (may be nil) receives the rebuild summary and every conflict.
func NewShared(r Range, reader client.Reader, log func(msg string, kv ...any)) *Shared {
	if log == nil {
		log = func(string, ...any) {}
	}
	return &Shared{r: r, reader: reader, log: log}
}

// Range is the allocator's range.
func (s *Shared) Range() Range { return s.r }

// Allocator returns the allocator, nil until the first Get rebuilt it.
func (s *Shared) Allocator() *Allocator {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.a
}

// Get returns the allocator, rebuilding it from the hub Services on first use.
func (s *Shared) Get(ctx context.Context) (*Allocator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.a != nil {
		return s.a, nil
	}
	svcs, err := s.listHubServices(ctx)
	if err != nil {
		return nil, err
	}
	if s.sweep != nil {
		if svcs, err = s.sweep(ctx, svcs); err != nil {
			return nil, fmt.Errorf("sweeping orphaned hub Services: %w", err)
		}
	}
	a, conflicts, err := Rebuild(s.r, svcs)
	if err != nil {
		return nil, fmt.Errorf("rebuilding the port allocations: %w", err)
	}
	for _, c := range conflicts {
		s.log("dropped a recorded listener port; its owner gets a new one", "key", c.Key.String(), "port", c.Port, "reason", c.Err.Error())
	}
	s.log("rebuilt listener port allocations from the hub Services", "services", len(svcs), "allocated", a.Allocated(), "free", a.Free(), "range", s.r.String())
	s.a = a
	return a, nil
}

// listHubServices lists the Services of managed namespaces that carry one of the manager's
// owner labels (RecordedKeys decides which it reads).
func (s *Shared) listHubServices(ctx context.Context) ([]corev1.Service, error) {
	managed := map[string]bool{}
	namespaces, err := listAll(ctx, s.reader, &corev1.NamespaceList{}, func(l *corev1.NamespaceList) []corev1.Namespace { return l.Items },
		client.MatchingLabels{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue})
	if err != nil {
		return nil, fmt.Errorf("listing managed namespaces to rebuild the port allocations: %w", err)
	}
	for _, ns := range namespaces {
		managed[ns.Name] = true
	}
	seen := map[types.NamespacedName]bool{}
	var out []corev1.Service
	for _, ownerLabel := range []string{kubelbv1alpha1.LabelLoadBalancerNS, kubelbv1alpha1.LabelRouteName, kubelbv1alpha1.LabelIngressService} {
		sel := labels.NewSelector()
		r, err := labels.NewRequirement(ownerLabel, selection.Exists, nil)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*r)
		svcs, err := listAll(ctx, s.reader, &corev1.ServiceList{}, func(l *corev1.ServiceList) []corev1.Service { return l.Items },
			client.MatchingLabelsSelector{Selector: sel})
		if err != nil {
			return nil, fmt.Errorf("listing hub Services to rebuild the port allocations: %w", err)
		}
		for _, svc := range svcs {
			k := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
			if managed[svc.Namespace] && !seen[k] {
				seen[k] = true
				out = append(out, svc)
			}
		}
	}
	return out, nil
}

// listAll reads every page of a list of T into items.
func listAll[T any, L interface {
	client.ObjectList
	*corev1.ServiceList | *corev1.NamespaceList
}](ctx context.Context, reader client.Reader, list L, items func(L) []T, opts ...client.ListOption) ([]T, error) {
	var all []T
	for {
		if err := reader.List(ctx, list, append(opts, client.Limit(500), client.Continue(list.GetContinue()))...); err != nil {
			return nil, err
		}
		all = append(all, items(list)...)
		if list.GetContinue() == "" {
			return all, nil
		}
	}
}
