package translatecmd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/envoycp"
	"kubelb.dev/kubelb/internal/manager/syncsecret"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// Hub is the hub the manifests describe: what the manager would find in its caches.
type Hub struct {
	// Tenant is the tenant's hub namespace; ManagerNamespace the manager's (Config "default").
	Tenant, ManagerNamespace string
	// Reader holds the objects as the manager's caches would.
	Reader client.Reader
	// Notes say what was assumed of what the manifests leave out (listener ports, names).
	Notes []string
}

// BuildHub makes the hub of the manifests, with what the manager's other controllers would
// have made of them: the LoadBalancers the ccm mirrors from tenant Services, the hub
// Secrets of SyncSecrets, and for LoadBalancers without a hub Service one with the
// listener ports their status records (none recorded: none, PortNotAllocated) or, for those
// mirrored from tenant Services, the lowest free ones of the default range.
// tenant is the tenant's hub namespace; empty: the namespace of the first namespaced kubelb
// object, else "tenant-default". Objects without a namespace are put in it; those of other
// namespaces are left there, out of the translation (as the manager's gather of one tenant).
func BuildHub(m Manifests, scheme *runtime.Scheme, tenant string) (*Hub, error) {
	h := &Hub{Tenant: tenant, ManagerNamespace: "kubelb"}
	if h.Tenant == "" {
		for _, o := range m.Objects {
			if isTenantKind(o) && o.GetNamespace() != "" {
				h.Tenant = o.GetNamespace()
				break
			}
		}
	}
	if h.Tenant == "" {
		h.Tenant = hubnames.TenantNamespace("default")
	}
	var objs []client.Object
	for _, o := range m.Objects {
		o = o.DeepCopyObject().(client.Object)
		// Translation never reads them, and the in-memory reader refuses partial ones.
		o.SetManagedFields(nil)
		switch x := o.(type) {
		case *v1alpha1.Config:
			if x.Namespace != "" {
				h.ManagerNamespace = x.Namespace
			}
		case *v1alpha1.SyncSecret:
			if x.Namespace == "" {
				x.Namespace = h.Tenant
			}
			s, err := syncedSecret(x)
			if err != nil {
				return nil, err
			}
			objs = append(objs, s)
		}
		if (isTenantKind(o) || isHubService(o)) && o.GetNamespace() == "" {
			o.SetNamespace(h.Tenant)
		}
		objs = append(objs, o)
	}
	mirrored := map[string]bool{}
	for _, svc := range m.TenantServices {
		svc = svc.DeepCopy()
		if svc.UID == "" {
			svc.UID = types.UID(svc.Name)
			h.Notes = append(h.Notes, fmt.Sprintf("Service %s/%s has no UID: its LoadBalancer is named %q", svc.Namespace, svc.Name, svc.Name))
		}
		lb, problems := ccm.DesiredLoadBalancer(svc, h.Tenant)
		for _, p := range problems {
			h.Notes = append(h.Notes, fmt.Sprintf("Service %s/%s port %s is not mirrored: %s", svc.Namespace, svc.Name, p.Port, p.Message))
		}
		objs = append(objs, lb)
		mirrored[lb.Name] = true
	}
	ts, err := newTenantSide(m)
	if err != nil {
		return nil, err
	}
	l7, notes, err := ts.mirror(m.TenantObjects, h.Tenant)
	if err != nil {
		return nil, err
	}
	h.Notes = append(h.Notes, notes...)
	for _, o := range l7 {
		if rt, ok := o.(*v1alpha1.Route); ok {
			mirrored[rt.Name] = true
		}
		if ss, ok := o.(*v1alpha1.SyncSecret); ok {
			s, err := syncedSecret(ss)
			if err != nil {
				return nil, err
			}
			objs = append(objs, s)
		}
		objs = append(objs, o)
	}
	for _, svc := range m.tenantBackends {
		if !ts.used[client.ObjectKeyFromObject(svc)] {
			h.Notes = append(h.Notes, fmt.Sprintf("ignored Service %s/%s (a tenant Service not of type LoadBalancer, and no mirrored object's backend)", svc.Namespace, svc.Name))
		}
	}
	objs = append(objs, h.hubServices(objs, mirrored)...)
	// The manager's Config is read from its namespace; a Config given without one is it.
	for _, o := range objs {
		if c, ok := o.(*v1alpha1.Config); ok && c.Namespace == "" {
			c.Namespace = h.ManagerNamespace
		}
	}
	seen := map[string]bool{}
	for _, o := range objs {
		kind := fmt.Sprintf("%T", o)
		kind = kind[strings.LastIndex(kind, ".")+1:]
		key := fmt.Sprintf("%s %s/%s", kind, o.GetNamespace(), o.GetName())
		if seen[key] {
			return nil, fmt.Errorf("%s appears twice in the manifests", key)
		}
		seen[key] = true
	}
	reader, err := newReader(scheme, objs)
	if err != nil {
		return nil, err
	}
	h.Reader = reader
	return h, nil
}

// newReader holds the objects in memory as a client.Reader; it refuses objects it cannot
// hold (e.g. two of the same name) with an error, not a panic.
func newReader(scheme *runtime.Scheme, objs []client.Object) (r client.Reader, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("reading the manifests: %v", p)
		}
	}()
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(), nil
}

// isTenantKind reports whether o is a kubelb object of a tenant namespace.
func isTenantKind(o client.Object) bool {
	switch o.(type) {
	case *v1alpha1.LoadBalancer, *v1alpha1.Route, *v1alpha1.Addresses, *v1alpha1.SyncSecret:
		return true
	}
	return false
}

// isHubService reports whether o is a Service or Secret kubelb made in a tenant namespace.
func isHubService(o client.Object) bool {
	switch o.(type) {
	case *corev1.Service, *corev1.Secret:
		return o.GetLabels()[v1alpha1.LabelManagedBy] == v1alpha1.LabelManagedByValue
	}
	return false
}

// syncedSecret is the hub Secret the manager makes of a SyncSecret.
func syncedSecret(ss *v1alpha1.SyncSecret) (*corev1.Secret, error) {
	if ss.UID == "" {
		ss.UID = types.UID(ss.Name)
	}
	raw, err := json.Marshal(syncsecret.DesiredSecret(ss))
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("SyncSecret %s: %w", ss.Name, err)
	}
	return s, nil
}

// hubServices are the hub Services of the LoadBalancers that have none among objs, as the
// LoadBalancer controller makes them: each port with the listener port the status records,
// else, for the LoadBalancers mirrored from tenant Services, the lowest free one of the
// default range; a LoadBalancer with no port left gets none.
func (h *Hub) hubServices(objs []client.Object, mirrored map[string]bool) []client.Object {
	has, used := map[string]bool{}, map[int32]bool{}
	for _, o := range objs {
		if svc, ok := o.(*corev1.Service); ok {
			if lb := hubnames.LoadBalancerOf(svc); lb != "" && svc.Namespace == h.Tenant {
				has[lb] = true
			}
			if svc.Namespace == h.Tenant && hubnames.IsRouteService(svc) {
				has[svc.Labels[v1alpha1.LabelRouteName]] = true // "": the Ingress Service
			}
			for _, p := range svc.Spec.Ports {
				used[p.TargetPort.IntVal] = true
			}
		}
		if lb, ok := o.(*v1alpha1.LoadBalancer); ok {
			for _, p := range lb.Status.Service.Ports {
				used[p.UpstreamTargetPort] = true
			}
		}
	}
	next := portalloc.DefaultRange.Min
	free := func() int32 {
		for used[int32(next)] {
			next++
		}
		used[int32(next)] = true
		return int32(next)
	}
	var out []client.Object
	for _, o := range objs {
		if rt, ok := o.(*v1alpha1.Route); ok && mirrored[rt.Name] && !has[rt.Name] {
			if svc := h.routeService(rt, has, free); svc != nil {
				out = append(out, svc)
			}
			continue
		}
		lb, ok := o.(*v1alpha1.LoadBalancer)
		if !ok || lb.Namespace != h.Tenant || has[lb.Name] {
			continue
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "envoy-" + lb.Name, Namespace: h.Tenant,
				Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue,
					v1alpha1.LabelLoadBalancerNS: h.Tenant, v1alpha1.LabelLoadBalancerName: lb.Name}},
			Spec: corev1.ServiceSpec{IPFamilies: slices.Clone(lb.Status.Service.IPFamilies)},
		}
		for _, p := range lb.Spec.Ports {
			target := int32(0)
			if sp, ok := lb.Status.StatusPortFor(p); ok {
				target = sp.UpstreamTargetPort
			}
			if target == 0 && !mirrored[lb.Name] {
				continue
			}
			if target == 0 {
				target = free()
				h.Notes = append(h.Notes, fmt.Sprintf("LoadBalancer %s port %d/%s: listener port %d assumed (no hub Service or status in the manifests)",
					lb.Name, p.Port, v1alpha1.ProtocolOrTCP(p.Protocol), target))
			}
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: v1alpha1.ProtocolOrTCP(p.Protocol),
				Port: p.Port, TargetPort: intstr.FromInt32(target)})
		}
		if len(svc.Spec.Ports) > 0 {
			out = append(out, svc)
		}
	}
	return out
}

// Translate runs on the hub what the manager runs for the tenant: the gather
// (envoycp.Build, with the manager's default options), what the tenant's settings and
// limits hold back (translate.Hold), the front ends (translate.Run) and the back end.
func Translate(ctx context.Context, h *Hub) (Result, error) {
	scope, err := envoycp.Build(ctx, h.Reader, h.Reader, h.ManagerNamespace, h.Tenant, translate.Options{}, nil)
	if err != nil {
		return Result{}, err
	}
	in, held := translate.Hold(scope.Input, scope.Holds)
	r, err := translate.Run(in)
	if err != nil {
		return Result{}, err
	}
	r = held.With(r)
	res, more, err := translator.Translate(r.Config)
	if err != nil {
		return Result{}, err
	}
	problems := slices.Concat(r.Problems, more)
	problems.Sort()
	return Result{Problems: problems, Resources: res, Routes: r.Routes}, nil
}

// assumedGatewayAddress is the address assumed for the hub Service of a Gateway mirrored from
// the manifests (TEST-NET-1): the hub's load balancer gives the real one.
const assumedGatewayAddress = "192.0.2.1"

// routeService is the hub Service the Route controller makes for a Route mirrored from the
// manifests, when there is none: the tenant's shared Ingress Service (http 80, https 443) for
// an Ingress, the Gateway's own Service (a port per listener port) with an assumed address;
// none for a route. has records the Services made; free gives listener ports.
func (h *Hub) routeService(rt *v1alpha1.Route, has map[string]bool, free func() int32) *corev1.Service {
	k, _ := routekind.Of(rt)
	labels := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}
	var svc *corev1.Service
	switch k.HubService() {
	case routekind.SharedIngressService:
		if has[""] {
			return nil
		}
		has[""] = true
		labels[v1alpha1.LabelIngressService] = "true"
		svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Namespace: h.Tenant, Labels: labels},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}, {Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}}
	case routekind.OwnHubService:
		has[rt.Name] = true
		labels[v1alpha1.LabelRouteName] = rt.Name
		svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: hubnames.GatewayServiceName(rt.Name), Namespace: h.Tenant, Labels: labels},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		// With the UDP ports of its HTTP/3 (the manager's default bounds allow
		// ClientTrafficPolicies).
		ports, _ := routekind.GatewayRoutePorts(rt, nil, true)
		for _, p := range ports {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: portalloc.GeneratedPortName(p.Protocol, p.Port), Port: p.Port, Protocol: p.Protocol})
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: assumedGatewayAddress}}
		h.Notes = append(h.Notes, fmt.Sprintf("hub Service %s: address %s assumed (the hub's load balancer gives the real one)", svc.Name, assumedGatewayAddress))
	default:
		return nil
	}
	var assumed []string
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		p.TargetPort = intstr.FromInt32(free())
		assumed = append(assumed, fmt.Sprintf("%d/%s→%d", p.Port, p.Protocol, p.TargetPort.IntVal))
	}
	h.Notes = append(h.Notes, fmt.Sprintf("hub Service %s: listener ports assumed %s (no hub Service in the manifests)", svc.Name, strings.Join(assumed, ", ")))
	return svc
}
