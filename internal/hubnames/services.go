package hubnames

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// loadBalancerServicePrefix prefixes the LoadBalancer name to form its hub Service name, as
// KubeLB Community Edition does, so hub Services made by either manager have the same names.
const loadBalancerServicePrefix = "envoy-"

// LoadBalancerServiceName is the name of the hub Service of a LoadBalancer, in the
// LoadBalancer's namespace: "envoy-<lb name>". A LoadBalancer is named by a tenant Service
// UID, which may start with a digit and so is not a valid Service name by itself; the prefix
// makes it one. Names that would still be invalid (too long, other characters) become
// "envoy-" plus a hash of the name, which is as deterministic.
func LoadBalancerServiceName(lbName string) string {
	return prefixedName(loadBalancerServicePrefix, lbName)
}

// GatewayServiceName is the name of the hub Service of a Gateway's Route, in the Route's
// namespace: "gateway-<route name>", by the rule of LoadBalancerServiceName.
func GatewayServiceName(routeName string) string {
	return prefixedName(kubelbv1alpha1.GatewayServicePrefix, routeName)
}

// prefixedName is prefix+name when that is a valid Service name (a DNS-1035 label), else
// prefix plus the first 32 hex digits of the sha256 of name.
func prefixedName(prefix, name string) string {
	if full := prefix + name; len(validation.IsDNS1035Label(full)) == 0 {
		return full
	}
	sum := sha256.Sum256([]byte(name))
	return prefix + hex.EncodeToString(sum[:])[:32]
}

// LoadBalancerOf returns the name of the LoadBalancer whose hub Service svc is, or "" when
// kubelb's labels do not prove it: a Service labelled managed-by: kubelb and
// kubelb.k8c.io/lb-namespace (its own namespace), named LoadBalancerServiceName of the
// LoadBalancer that kubelb.k8c.io/lb-name or its controller reference (kind LoadBalancer)
// names. Only the manager makes such Services; no other Service of a tenant namespace is
// read for a LoadBalancer. LooksLikeLoadBalancerService is the loose check of a watch.
func LoadBalancerOf(svc client.Object) string {
	l := svc.GetLabels()
	if !IsManaged(svc) || l[kubelbv1alpha1.LabelLoadBalancerNS] != svc.GetNamespace() {
		return ""
	}
	lb := l[kubelbv1alpha1.LabelLoadBalancerName]
	if lb == "" {
		if ref := metav1.GetControllerOfNoCopy(svc); ref != nil && ref.Kind == "LoadBalancer" && ref.APIVersion == kubelbv1alpha1.GroupVersion.String() {
			lb = ref.Name
		}
	}
	// A Service named "envoy-<lb>" exists, so that is a valid Service name and
	// LoadBalancerServiceName gives it without the check (a regular expression, for every
	// Service of the tenant).
	if name := svc.GetName(); lb == "" || (name != loadBalancerServicePrefix+lb && name != LoadBalancerServiceName(lb)) {
		return ""
	}
	return lb
}

// LoadBalancerMadeFor names the LoadBalancer a hub Service was made for, and the UID of its
// controller reference ("" for a Service adopted by labels): a LoadBalancer controller
// reference, else the lb-name and lb-namespace labels (a KubeLB CE manager's Service).
// Route and Ingress Services, and others, are not a LoadBalancer's (ok false). It is the
// LoadBalancer controller's test before it deletes a Service (one whose LoadBalancer is gone,
// or at start-up an orphan); LoadBalancerOf is what envoycp serves, LoadBalancerNamedBy and
// LooksLikeLoadBalancerService only route events.
func LoadBalancerMadeFor(svc *corev1.Service) (lb types.NamespacedName, uid types.UID, ok bool) {
	if svc.Labels[kubelbv1alpha1.LabelRouteName] != "" || svc.Labels[kubelbv1alpha1.LabelIngressService] == "true" {
		return lb, "", false
	}
	if ref := metav1.GetControllerOfNoCopy(svc); ref != nil {
		if ref.Kind != "LoadBalancer" {
			return lb, "", false
		}
		return types.NamespacedName{Namespace: svc.Namespace, Name: ref.Name}, ref.UID, true
	}
	name := svc.Labels[kubelbv1alpha1.LabelLoadBalancerName]
	if name == "" || svc.Labels[kubelbv1alpha1.LabelLoadBalancerNS] != svc.Namespace {
		return lb, "", false
	}
	return types.NamespacedName{Namespace: svc.Namespace, Name: name}, "", true
}

// LooksLikeLoadBalancerService reports whether o may be a LoadBalancer's hub Service or stand
// in the place of one, by a label or its name alone: labelled kubelb.k8c.io/lb-namespace or
// named "envoy-…". It admits Services kubelb did not make (a foreign Service in the way of a
// hub Service), which the LoadBalancer controller must see; LoadBalancerOf is the check that
// proves a Service is kubelb's.
func LooksLikeLoadBalancerService(o client.Object) bool {
	return o.GetLabels()[kubelbv1alpha1.LabelLoadBalancerNS] != "" || strings.HasPrefix(o.GetName(), loadBalancerServicePrefix)
}

// LoadBalancerNamedBy maps a hub Service to the LoadBalancer it is (or would be) for, by its
// labels (lb-namespace and lb-name), else its controller reference (kind LoadBalancer), else
// its name (the inverse of LoadBalancerServiceName, when the name was not hashed); the zero
// value when none names one. Like LooksLikeLoadBalancerService it trusts names and labels:
// it routes events to the LoadBalancer controller, which checks what it finds.
func LoadBalancerNamedBy(o client.Object) (namespace, name string) {
	namespace, name = o.GetLabels()[kubelbv1alpha1.LabelLoadBalancerNS], o.GetLabels()[kubelbv1alpha1.LabelLoadBalancerName]
	if namespace != "" && name != "" {
		return namespace, name
	}
	namespace, name = o.GetNamespace(), ""
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil && ref.Kind == "LoadBalancer" {
		name = ref.Name
	} else if n, ok := strings.CutPrefix(o.GetName(), loadBalancerServicePrefix); ok && LoadBalancerServiceName(n) == o.GetName() {
		name = n
	}
	if name == "" {
		return "", ""
	}
	return namespace, name
}

// IsRouteService reports whether a hub Service is one kubelb made for Routes, as its labels
// prove: managed-by: kubelb and either kubelb.k8c.io/route-name (a Gateway's) or
// kubelb.k8c.io/ingress=true (the tenant's Ingress Service). No other Service of a tenant
// namespace is read: a tenant could have written it. LooksLikeRouteService is the loose check
// of a watch.
func IsRouteService(o client.Object) bool {
	l := o.GetLabels()
	return IsManaged(o) && (l[kubelbv1alpha1.LabelRouteName] != "" || l[kubelbv1alpha1.LabelIngressService] == "true")
}

// LooksLikeRouteService reports whether o may be a hub Service of Routes or stand in the
// place of one, by a label or its name alone: labelled kubelb.k8c.io/route-name or
// kubelb.k8c.io/ingress (any value, managed or not), or named kubelb-ingress or "gateway-…".
// It admits Services kubelb did not make (a foreign Service in the way), which the Route
// controller must see; IsRouteService is the check that proves a Service is kubelb's.
func LooksLikeRouteService(o client.Object) bool {
	l := o.GetLabels()
	return l[kubelbv1alpha1.LabelRouteName] != "" || l[kubelbv1alpha1.LabelIngressService] != "" ||
		o.GetName() == kubelbv1alpha1.IngressServiceName || strings.HasPrefix(o.GetName(), kubelbv1alpha1.GatewayServicePrefix)
}

// RouteNamedBy maps a Gateway's hub Service to the Route it is (or would be) for, by its
// kubelb.k8c.io/route-name label, else its controller reference (kind Route); "" when
// neither names one (the Ingress Service serves every Ingress Route of its namespace). Like
// LooksLikeRouteService it trusts names and labels: it routes events to the Route
// controller, which checks what it finds.
func RouteNamedBy(o client.Object) string {
	if name := o.GetLabels()[kubelbv1alpha1.LabelRouteName]; name != "" {
		return name
	}
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil && ref.Kind == "Route" {
		return ref.Name
	}
	return ""
}

// IsIngressService reports whether svc is the tenant's Ingress Service as kubelb made it:
// managed-by: kubelb and kubelb.k8c.io/ingress=true (the caller looked it up by its name,
// kubelb-ingress). Any other Service of that name is a foreign one in the way.
func IsIngressService(svc client.Object) bool {
	return IsManaged(svc) && svc.GetLabels()[kubelbv1alpha1.LabelIngressService] == "true"
}

// IsSyncedSecret reports whether a hub Secret is one made from a SyncSecret: labelled
// managed-by: kubelb and controlled (ownerReference) by a SyncSecret of its namespace. No
// other Secret is read.
func IsSyncedSecret(o client.Object) bool {
	if !IsManaged(o) {
		return false
	}
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "SyncSecret" && ref.APIVersion == kubelbv1alpha1.GroupVersion.String() {
			return true
		}
	}
	return false
}

// ServicePortRef is one port of a hub Service by protocol and number.
type ServicePortRef struct {
	Protocol corev1.Protocol
	Port     int32
}

// FormatExhausted is the value of kubelbv1alpha1.AnnotationPortsExhausted for the ports the hub's
// listener port range had none for: "<protocol>/<port>", comma-separated, sorted, without
// repeats; "" for none.
func FormatExhausted(ports []ServicePortRef) string {
	out := make([]string, 0, len(ports))
	for _, p := range ports {
		out = append(out, fmt.Sprintf("%s/%d", kubelbv1alpha1.ProtocolOrTCP(p.Protocol), p.Port))
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ",")
}

// Exhausted reads kubelbv1alpha1.AnnotationPortsExhausted of a hub Service (nil: none): the ports
// the manager found no listener port for. Entries it cannot read are left out.
func Exhausted(svc *corev1.Service) map[ServicePortRef]bool {
	if svc == nil || svc.Annotations[kubelbv1alpha1.AnnotationPortsExhausted] == "" {
		return nil
	}
	out := map[ServicePortRef]bool{}
	for _, p := range strings.Split(svc.Annotations[kubelbv1alpha1.AnnotationPortsExhausted], ",") {
		proto, num, ok := strings.Cut(p, "/")
		port, err := strconv.ParseInt(num, 10, 32)
		if ok && err == nil {
			out[ServicePortRef{Protocol: corev1.Protocol(proto), Port: int32(port)}] = true
		}
	}
	return out
}

// LoadBalancerServiceOf tells what the Service in the place of lb's hub Service is: lb's
// (returned), an earlier LoadBalancer's of this name (stale, returned), or another's
// (foreign: never touched, returned as nil). A Service is lb's when lb controls it, or (to
// adopt one another kubelb manager made) when it has no controller and carries lb's lb-name
// and lb-namespace labels.
func LoadBalancerServiceOf(lb *kubelbv1alpha1.LoadBalancer, svc *corev1.Service) (_ *corev1.Service, stale, foreign bool) {
	if svc == nil {
		return nil, false, false
	}
	ref := metav1.GetControllerOfNoCopy(svc)
	ours := ref != nil && ref.UID == lb.UID
	adoptable := ref == nil && svc.Labels[kubelbv1alpha1.LabelLoadBalancerName] == lb.Name &&
		svc.Labels[kubelbv1alpha1.LabelLoadBalancerNS] == lb.Namespace
	if ref != nil && !ours && ref.Kind == "LoadBalancer" && ref.Name == lb.Name {
		return svc, true, false
	}
	if !ours && !adoptable {
		return nil, false, true
	}
	return svc, false, false
}

// RouteControlled reports whether a Route named route controls svc (whichever its UID): the
// tenant's plan reads a Gateway's hub Service as its own only then.
func RouteControlled(svc *corev1.Service, route string) bool {
	ref := metav1.GetControllerOfNoCopy(svc)
	return ref != nil && ref.Kind == "Route" && ref.Name == route
}

// OIDCCookieKeysSecret is the Secret of a tenant namespace in which the manager keeps the keys
// that sign the session cookies of the tenant's OIDC logins (internal/manager/oidckeys). The
// tenant's ccm cannot read it: its Role grants no Secrets.
const OIDCCookieKeysSecret = "kubelb-oidc-keys"

// IsOIDCCookieKeys reports whether a hub Secret is the manager's OIDC cookie keys of its
// namespace: named OIDCCookieKeysSecret, labelled managed-by: kubelb, in a tenant namespace, and
// not made from a SyncSecret (those are named by the SyncSecret's UID, so a tenant cannot name
// one so; checked all the same).
func IsOIDCCookieKeys(o client.Object) bool {
	return o != nil && o.GetName() == OIDCCookieKeysSecret && IsTenantNamespace(o.GetNamespace()) && IsManaged(o) && !IsSyncedSecret(o)
}
