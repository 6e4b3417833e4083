package tenantside

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/routekind"
)

// Condition types the hub writes (internal/manager: loadbalancer, route, status), and the
// reachability condition when the hub reports one.
const (
	condReady      = "Ready"
	condApplied    = "ResourceAppliedSuccessfully"
	condProgrammed = "Programmed"
	condReachable  = "BackendsReachable"
)

// Target is the tenant object status follows.
type Target struct {
	// Kind is routekind.Unsupported for a Service, else the route kind.
	Kind            routekind.Kind
	Namespace, Name string
}

// kindNames are the names status accepts for each kind (lower case).
var kindNames = map[string]routekind.Kind{
	"service": routekind.Unsupported, "services": routekind.Unsupported, "svc": routekind.Unsupported,
	"ingress": routekind.Ingress, "ingresses": routekind.Ingress, "ing": routekind.Ingress,
	"gateway": routekind.Gateway, "gateways": routekind.Gateway, "gtw": routekind.Gateway,
	"httproute": routekind.HTTPRoute, "httproutes": routekind.HTTPRoute,
	"grpcroute": routekind.GRPCRoute, "grpcroutes": routekind.GRPCRoute,
	"tlsroute": routekind.TLSRoute, "tlsroutes": routekind.TLSRoute,
	"tcproute": routekind.TCPRoute, "tcproutes": routekind.TCPRoute,
	"udproute": routekind.UDPRoute, "udproutes": routekind.UDPRoute,
	"listenerset": routekind.ListenerSet, "listenersets": routekind.ListenerSet, "lset": routekind.ListenerSet,
}

// KindChoices lists the kinds status accepts, for help and errors.
const KindChoices = "service (svc), ingress (ing), gateway (gtw), httproute, grpcroute, tlsroute, tcproute, udproute, listenerset (lset)"

// ParseTarget reads "<kind>/<name>" in namespace.
func ParseTarget(arg, namespace string) (Target, error) {
	kind, name, found := strings.Cut(arg, "/")
	k, known := kindNames[strings.ToLower(kind)]
	if !found || name == "" || !known {
		return Target{}, fmt.Errorf("%q is not <kind>/<name>; kinds: %s", arg, KindChoices)
	}
	return Target{Kind: k, Namespace: namespace, Name: name}, nil
}

// kindName is the Kubernetes kind of the target.
func (t Target) kindName() string {
	if t.Kind == routekind.Unsupported {
		return "Service"
	}
	return t.Kind.String()
}

// String is "Kind namespace/name".
func (t Target) String() string { return fmt.Sprintf("%s %s/%s", t.kindName(), t.Namespace, t.Name) }

// Conditions are one object's conditions under a heading.
type Conditions struct {
	Heading    string
	Conditions []metav1.Condition
}

// StatusReport is what status found: the steps in order, and every condition on the way.
type StatusReport struct {
	Steps      []Step
	Conditions []Conditions
	// Rejections are the Envoy rejections the hub holds that name the object (all of the
	// tenant's when the hub says the object was rejected and none names it).
	Rejections []v1alpha1.ConfigRejection
	// OtherRejections counts the tenant's other Envoy rejections.
	OtherRejections int
}

// HubAccess is the hub as status reaches it: a client for the tenant's namespace there, or
// the error that kept it from being made.
type HubAccess struct {
	Client client.Reader
	Hub    *Hub
	Err    error
}

// Status follows the target from the tenant cluster to its hub object and reports each step.
func Status(ctx context.Context, tenant client.Reader, hub HubAccess, t Target) StatusReport {
	if t.Kind == routekind.Unsupported {
		return serviceStatus(ctx, tenant, hub, t)
	}
	return routeStatus(ctx, tenant, hub, t)
}

// tenantStep reads the target; a failed step when it cannot.
func tenantStep(ctx context.Context, c client.Reader, t Target, obj client.Object) (Step, bool) {
	name := "tenant " + t.kindName()
	if err := c.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, obj); err != nil {
		hint := "check the name and the namespace (-n)"
		if meta.IsNoMatchError(err) {
			hint = "the tenant cluster does not serve this kind: install its CRDs (kubectl kubelb check tenant)"
		} else if !apierrors.IsNotFound(err) {
			hint = "the tenant kubeconfig cannot read it: check --kubeconfig/--context and your rights"
		}
		return failed(name, hint, "%s: %v", t, err), false
	}
	return ok(name, "%s exists (uid %s)", t, obj.GetUID()), true
}

// hubStep reads the hub object named uid; a failed step when it cannot.
func hubStep(ctx context.Context, hub HubAccess, kind, uid string, obj client.Object, missingHint string) (Step, bool) {
	name := "hub " + kind
	if hub.Err != nil {
		return failed(name, "pass the ccm's hub kubeconfig with --hub-kubeconfig FILE, or ask your tenant admin to run `kubectl kubelb check tenant`", "%v", hub.Err), false
	}
	err := hub.Client.Get(ctx, client.ObjectKey{Namespace: hub.Hub.Namespace, Name: uid}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return failed(name, missingHint, "no %s %s/%s on the hub", kind, hub.Hub.Namespace, uid), false
	case err != nil:
		return failed(name, hubErrorHint(err, hub.Hub), "reading %s %s/%s: %v", kind, hub.Hub.Namespace, uid, err), false
	}
	return ok(name, "%s %s/%s (made by the ccm)", kind, hub.Hub.Namespace, uid), true
}

// notMirroredHint is what to do when the ccm has not mirrored an object.
const notMirroredHint = "the ccm has not mirrored it: is the ccm running (`kubectl kubelb check tenant`), is the object of class kubelb, and what do its Events say (`kubectl describe`)?"

// serviceStatus follows a LoadBalancer Service.
func serviceStatus(ctx context.Context, tenant client.Reader, hub HubAccess, t Target) StatusReport {
	var r StatusReport
	svc := &corev1.Service{}
	step, found := tenantStep(ctx, tenant, t, svc)
	r.Steps = append(r.Steps, step)
	if !found {
		return r
	}
	r.Conditions = append(r.Conditions, Conditions{Heading: t.String(), Conditions: svc.Status.Conditions})
	switch {
	case svc.Spec.Type != corev1.ServiceTypeLoadBalancer:
		r.Steps = append(r.Steps, failed("load balancer class", "kubelb serves Services of type LoadBalancer: set spec.type: LoadBalancer", "the Service is of type %s", svc.Spec.Type))
		return r
	case svc.Spec.LoadBalancerClass != nil && *svc.Spec.LoadBalancerClass != v1alpha1.DefaultClass:
		r.Steps = append(r.Steps, failed("load balancer class", "set spec.loadBalancerClass: kubelb (it cannot be changed: re-create the Service), or leave it out",
			"spec.loadBalancerClass %s belongs to another load balancer implementation", *svc.Spec.LoadBalancerClass))
		return r
	}
	hint := notMirroredHint
	if svc.Spec.LoadBalancerClass == nil {
		hint += " A ccm run with --use-loadbalancer-class mirrors only Services of spec.loadBalancerClass kubelb."
	}
	lb := &v1alpha1.LoadBalancer{}
	step, found = hubStep(ctx, hub, "LoadBalancer", string(svc.UID), lb, hint)
	r.Steps = append(r.Steps, step)
	if !found {
		return r
	}
	r.Conditions = append(r.Conditions, Conditions{Heading: "hub LoadBalancer " + lb.Namespace + "/" + lb.Name, Conditions: lb.Status.Conditions})
	r.Rejections, r.OtherRejections = rejections(ctx, hub, lb.Name, lb.Status.Conditions)
	r.Steps = append(r.Steps,
		readyStep(lb.Status.Conditions),
		listenerStep(lb),
		addressStep(lb.Status.LoadBalancer.Ingress, meta.FindStatusCondition(lb.Status.Conditions, condReady), "the hub LoadBalancer's status"),
		programmedStep(lb.Status.Conditions),
		endpointsStep(lb),
		copiedStep(svc, lb))
	return r
}

// readyStep is the hub's Ready condition of a LoadBalancer.
func readyStep(conds []metav1.Condition) Step {
	const name = "hub accepted"
	c := meta.FindStatusCondition(conds, condReady)
	switch {
	case c == nil:
		return failed(name, "the manager has not judged it yet: wait a little; if it stays, the platform team runs `kubectl kubelb check hub`", "no Ready condition yet")
	case c.Status == metav1.ConditionTrue:
		return ok(name, "Ready (%s)", c.Reason)
	}
	hint := readyHint(c.Reason)
	if c.Reason == reasonWaitingForAddress {
		hint = waitingHint(c.Message)
	}
	return failed(name, hint, "Ready=%s %s: %s", c.Status, c.Reason, c.Message)
}

// reasonWaitingForAddress is the hub's Ready reason of a LoadBalancer whose hub Service has
// no address yet (internal/manager/loadbalancer).
const reasonWaitingForAddress = "WaitingForAddress"

// waitingClass reads the load-balancer class the hub Service waits for from the manager's
// WaitingForAddress message (`... asks for load-balancer class "X" ...`); named is false
// when the message names none (the hub's default implementation should serve it).
func waitingClass(message string) (class string, named bool) {
	_, rest, found := strings.Cut(message, `load-balancer class "`)
	if !found {
		return "", false
	}
	class, _, found = strings.Cut(rest, `"`)
	return class, found && class != ""
}

// waitingHint says which load-balancer class the hub Service waits for and who should serve
// it: the tenant's credentials cannot read hub Services, so it comes from the manager's
// message.
func waitingHint(message string) string {
	if class, named := waitingClass(message); named {
		return fmt.Sprintf("the hub Service asks for load-balancer class %q and nothing on the hub serves it: the hub's platform team runs an implementation of that class "+
			"(MetalLB, a cloud's, or the manager's --address-provider with --address-provider-class=%s), or sets spec.loadBalancer.class of your Tenant to a class the hub serves; "+
			"`kubectl kubelb check hub` names who serves each class", class, class)
	}
	return "the hub Service names no load-balancer class, and the hub's default implementation (MetalLB, a cloud's) has not given it an address: " +
		"the hub's platform team installs one, or starts the manager with --address-provider=node-ip or ipam; `kubectl kubelb check hub` names who serves each class"
}

// reasonHints say what to do about a reason of the hub's Ready, ResourceAppliedSuccessfully
// or Programmed condition.
var reasonHints = map[string]string{
	"QuotaExceeded":         "the Tenant's limits refuse it (the message names the limit): delete objects you no longer need, or ask the platform team to raise spec.limits of your Tenant",
	"PortsExhausted":        "the hub has no listener port left: the platform team widens the manager's listener port range",
	"LoadBalancingDisabled": "the platform team disabled this for your tenant (Tenant or Config spec): ask them to enable it",
	"Disabled":              "the platform team disabled this for your tenant (Tenant or Config spec): ask them to enable it",
	"NodePortsNotAllowed":   "use type LoadBalancer, or ask the platform team to allow NodePorts (spec.loadBalancer.allocateNodePorts)",
	"UnsupportedType":       "use type LoadBalancer, ClusterIP or NodePort",
	"IPFamilyUnavailable":   "the hub does not serve the IP family asked for: drop spec.ipFamilyPolicy RequireDualStack or the family from spec.ipFamilies",
	"InvalidPorts":          "give every port a distinct name and number (the message names the ones left out)",
	"InvalidListeners":      "give every listener a distinct port and protocol (the message names the ones left out)",
	"CertificateNotFound":   "create the TLS Secret the message names in your object's namespace (kubectl create secret tls NAME --cert=FILE --key=FILE), or fix the Secret's name in your object: the ccm copies it to the hub, and its hosts are then served over HTTPS",
	"BackendNotFound":       "create the Service the message names, or fix the backend's name and port in your object",
}

// readyHint is the hint for a reason the hub refuses an object with.
func readyHint(reason string) string {
	if h, known := reasonHints[reason]; known {
		return h
	}
	return "read the message; if it is about the hub, the platform team runs `kubectl kubelb check hub`"
}

// listenerStep is the Envoy listener port of every LoadBalancer port.
func listenerStep(lb *v1alpha1.LoadBalancer) Step {
	const name = "listener ports"
	var ports []string
	missing := 0
	for _, p := range lb.Status.Service.Ports {
		if p.UpstreamTargetPort == 0 {
			missing++
			continue
		}
		ports = append(ports, fmt.Sprintf("%d/%s→%d", p.Port, v1alpha1.ProtocolOrTCP(p.Protocol), p.UpstreamTargetPort))
	}
	if len(ports) == 0 || missing > 0 || len(lb.Status.Service.Ports) < len(lb.Spec.Ports) {
		return failed(name, "no listener port is allocated while the hub refuses the LoadBalancer: see \"hub accepted\"",
			"%d of %d ports have an Envoy listener port", len(ports), len(lb.Spec.Ports))
	}
	return ok(name, "%s", strings.Join(ports, ", "))
}

// addressStep is the hub's address of an object.
// source names where the address was read.
func addressStep(ingress []corev1.LoadBalancerIngress, ready *metav1.Condition, source string) Step {
	const name = "hub address"
	if len(ingress) == 0 {
		hint := "the hub Service has no address yet: the platform team checks which load-balancer class it waits for (`kubectl kubelb check hub`)"
		switch {
		case ready != nil && ready.Reason == reasonWaitingForAddress:
			hint = "see \"hub accepted\": the hub Service waits for a load balancer"
			if class, named := waitingClass(ready.Message); named {
				hint += fmt.Sprintf(" of class %q", class)
			}
		case ready != nil && ready.Status == metav1.ConditionFalse:
			hint = "no address while the hub refuses it: see \"hub accepted\""
		}
		return failed(name, hint, "no address")
	}
	return ok(name, "%s (%s)", strings.Join(ingressAddresses(ingress), ", "), source)
}

func ingressAddresses(ingress []corev1.LoadBalancerIngress) []string {
	out := make([]string, 0, len(ingress))
	for _, in := range ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		} else if in.Hostname != "" {
			out = append(out, in.Hostname)
		}
	}
	return out
}

// programmedStep is whether the tenant's Envoy proxies carry the object.
func programmedStep(conds []metav1.Condition) Step {
	const name = "Envoy accepted"
	c := meta.FindStatusCondition(conds, condProgrammed)
	switch {
	case c == nil:
		return failed(name, "the hub has not translated it yet: wait a little; if it stays, the platform team runs `kubectl kubelb check hub`", "no Programmed condition yet")
	case c.Status == metav1.ConditionTrue:
		return ok(name, "Programmed (%s)", c.Reason)
	}
	hint, known := reasonHints[c.Reason]
	switch {
	case c.Reason == reasonRejected:
		hint = "an Envoy proxy rejected the configuration (rejections below): tell the platform team, with this output"
	case !known:
		hint = "fix what the message names in your object; the rest of your configuration is still served"
	}
	return failed(name, hint, "Programmed=%s %s: %s", c.Status, c.Reason, c.Message)
}

// endpointsStep is what the hub knows of the LoadBalancer's endpoints.
func endpointsStep(lb *v1alpha1.LoadBalancer) Step {
	const name = "endpoints"
	addrs, ports := 0, 0
	for _, e := range lb.Spec.Endpoints {
		addrs += len(e.Addresses)
		ports += len(e.Ports)
		if e.AddressesReference != nil {
			addrs++ // the Addresses object: the tenant's node addresses
		}
	}
	if addrs == 0 || ports == 0 {
		return failed(name, "the ccm found no Ready node with the address type it is set to (--node-address-type): run `kubectl get nodes -o wide` and `kubectl kubelb check tenant`",
			"the hub LoadBalancer has no endpoint addresses")
	}
	if c := meta.FindStatusCondition(lb.Status.Conditions, condReachable); c != nil {
		return reachableStep(c, "the hub's Envoy cannot reach your nodes' NodePorts named above: check firewalls between the hub and your nodes, and that the pods behind the Service are Ready")
	}
	src := "node addresses"
	if lb.Spec.Endpoints[0].AddressesReference != nil {
		src = "the tenant's node addresses (Addresses " + lb.Spec.Endpoints[0].AddressesReference.Name + ")"
	}
	return ok(name, "%s, %d port(s); the hub reports no health of them", src, ports)
}

// reachableStep is the endpoints step of the hub's BackendsReachable condition: False fails
// with hint; Unknown (NotYetChecked, TooManyEndpoints: the hub has no verdict) is pending,
// with the hub's message as its hint.
func reachableStep(c *metav1.Condition, hint string) Step {
	const name = "endpoints"
	switch c.Status {
	case metav1.ConditionFalse:
		return failed(name, hint, "%s=%s %s: %s", condReachable, c.Status, c.Reason, c.Message)
	case metav1.ConditionTrue:
		return ok(name, "%s (%s)", condReachable, c.Reason)
	}
	return pending(name, cmp.Or(c.Message, "the hub has not judged the endpoints yet"), "%s=%s %s", condReachable, c.Status, c.Reason)
}

// copiedStep is whether the ccm copied the hub's address back onto the tenant Service.
func copiedStep(svc *corev1.Service, lb *v1alpha1.LoadBalancer) Step {
	const name = "tenant address"
	got := ingressAddresses(svc.Status.LoadBalancer.Ingress)
	want := ingressAddresses(lb.Status.LoadBalancer.Ingress)
	sort.Strings(got)
	sort.Strings(want)
	switch {
	case len(want) == 0 && len(got) == 0:
		return skipped(name, "no address to copy back")
	case strings.Join(got, ",") != strings.Join(want, ","):
		return failed(name, "the ccm copies the hub's address back: is it running (`kubectl kubelb check tenant`)? Its Events on the Service say more",
			"the Service shows [%s], the hub [%s]", strings.Join(got, ", "), strings.Join(want, ", "))
	}
	return ok(name, "status.loadBalancer shows %s", strings.Join(got, ", "))
}

// reasonRejected is the hub's Programmed reason when an Envoy proxy rejected the object's
// resources (internal/manager/status).
const reasonRejected = "Rejected"

// rejections are the Envoy rejections in the tenant's TenantState that name the hub object
// (Envoy's messages name the resources, which carry its name), and how many others there
// are; when the object's Programmed condition says Rejected and none names it, all of them.
// None when the TenantState is unreadable.
func rejections(ctx context.Context, hub HubAccess, name string, conds []metav1.Condition) (mine []v1alpha1.ConfigRejection, others int) {
	ts := &v1alpha1.TenantState{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: hub.Hub.Namespace, Name: hubnames.TenantStateName}, ts); err != nil {
		return nil, 0
	}
	all := ts.Status.Rejections
	for _, rej := range all {
		if strings.Contains(rej.Message, name) {
			mine = append(mine, rej)
		}
	}
	if c := meta.FindStatusCondition(conds, condProgrammed); len(mine) == 0 && c != nil && c.Reason == reasonRejected {
		return all, 0
	}
	return mine, len(all) - len(mine)
}
