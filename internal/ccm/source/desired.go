package source

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/nginxurl"
)

// TwinSuffix is appended to a ClusterIP Service's name to name its NodePort twin.
const TwinSuffix = "-nodeport"

// Limits of SourceContext (the Route CRD refuses more).
const (
	maxNamespaceLabels = 64
	maxGrantedRefs     = 128
)

// list returns the list at path in u (nil when absent or not a list).
func list(u map[string]any, path ...string) []any {
	l, _, _ := unstructured.NestedSlice(u, path...)
	return l
}

// str returns the string at path in u, or def when absent or empty.
func str(u map[string]any, def string, path ...string) string {
	if s, ok, _ := unstructured.NestedString(u, path...); ok && s != "" {
		return s
	}
	return def
}

// group returns the string at path in u: def when absent, "" when set to "" (the core group).
func group(u map[string]any, def string, path ...string) string {
	if s, ok, _ := unstructured.NestedString(u, path...); ok {
		return s
	}
	return def
}

// ObjectRefs lists the references of a tenant object of kind k (its unstructured content) in
// namespace ns, without duplicates: an Ingress's backend Services (same namespace, with the
// Service its ingress-nginx mirror-target names: nginxurl.Services), a Gateway's listeners'
// certificateRefs (and its spec.tls: the CA certificates
// of client certificate validation, the client certificate for backends), a route's backendRefs and the backends
// of its RequestMirror filters (any kind; only Services become backends).
func ObjectRefs(k Kind, u map[string]any, ns string) []Ref {
	var out []Ref
	switch {
	case k.Name == Ingress.Name:
		if n := str(u, "", "spec", "defaultBackend", "service", "name"); n != "" {
			out = append(out, Ref{Kind: kindService, Namespace: ns, Name: n})
		}
		for _, r := range list(u, "spec", "rules") {
			rule, _ := r.(map[string]any)
			for _, p := range list(rule, "http", "paths") {
				path, _ := p.(map[string]any)
				if n := str(path, "", "backend", "service", "name"); n != "" {
					out = append(out, Ref{Kind: kindService, Namespace: ns, Name: n})
				}
			}
		}
		annotations, _, _ := unstructured.NestedStringMap(u, "metadata", "annotations")
		for _, n := range nginxurl.Services(annotations, ns) {
			out = append(out, Ref{Kind: kindService, Namespace: ns, Name: n})
		}
	case k.Name == Gateway.Name || k.Name == ListenerSet.Name:
		for _, l := range list(u, "spec", "listeners") {
			listener, _ := l.(map[string]any)
			for _, c := range list(listener, "tls", "certificateRefs") {
				ref, _ := c.(map[string]any)
				out = append(out, Ref{Group: group(ref, "", "group"), Kind: str(ref, kindSecret, "kind"),
					Namespace: str(ref, ns, "namespace"), Name: str(ref, "", "name")})
			}
		}
		// A Gateway's client certificate validation (CA certificates) and the client
		// certificate it presents to backends.
		caRefs := func(validation map[string]any) {
			for _, c := range list(validation, "caCertificateRefs") {
				ref, _ := c.(map[string]any)
				out = append(out, Ref{Group: group(ref, "", "group"), Kind: str(ref, "", "kind"),
					Namespace: str(ref, ns, "namespace"), Name: str(ref, "", "name")})
			}
		}
		eachFrontendValidation(u, caRefs)
		if ref, ok := nestedMap(u, "spec", "tls", "backend", "clientCertificateRef"); ok {
			out = append(out, Ref{Group: group(ref, "", "group"), Kind: str(ref, kindSecret, "kind"),
				Namespace: str(ref, ns, "namespace"), Name: str(ref, "", "name")})
		}
	case k.AttachesToGateway():
		backend := func(ref map[string]any) {
			out = append(out, Ref{Group: group(ref, "", "group"), Kind: str(ref, kindService, "kind"),
				Namespace: str(ref, ns, "namespace"), Name: str(ref, "", "name")})
		}
		eachBackendRef(u, backend)
	}
	// In the order of first appearance (the embedded Services keep it, as KubeLB CE's do).
	seen := map[Ref]bool{}
	return slices.DeleteFunc(out, func(r Ref) bool {
		drop := r.Name == "" || seen[r]
		seen[r] = true
		return drop
	})
}

// ParentRefs lists the Gateways a route names in spec.parentRefs (group and kind default to
// Gateway API's Gateway, the namespace to the route's), sorted and without duplicates; parents
// of other kinds are left out. sectionName and port stay in the embedded route.
func ParentRefs(u map[string]any, ns string) []ParentRef { return parentsOfKind(u, ns, kindGateway) }

// ListenerSetParents lists the ListenerSets a route names in spec.parentRefs (group Gateway
// API's, kind ListenerSet; the namespace defaults to the route's), sorted and without
// duplicates.
func ListenerSetParents(u map[string]any, ns string) []ParentRef {
	return parentsOfKind(u, ns, kindListenerSet)
}

// parentsOfKind lists the parents of Gateway API's group and of kind a route names in
// spec.parentRefs (the kind defaults to Gateway, the namespace to ns), sorted and without
// duplicates.
func parentsOfKind(u map[string]any, ns, kind string) []ParentRef {
	var out []ParentRef
	for _, p := range list(u, "spec", "parentRefs") {
		ref, _ := p.(map[string]any)
		if group(ref, gatewayGroup, "group") != gatewayGroup || str(ref, kindGateway, "kind") != kind {
			continue
		}
		if n := str(ref, "", "name"); n != "" {
			out = append(out, ParentRef{Namespace: str(ref, ns, "namespace"), Name: n})
		}
	}
	slices.SortFunc(out, func(a, b ParentRef) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return slices.Compact(out)
}

// ListenerSetGateway is the Gateway a ListenerSet (its unstructured content, in namespace ns)
// names in spec.parentRef; false when it names none.
func ListenerSetGateway(u map[string]any, ns string) (ParentRef, bool) {
	ref, ok, _ := unstructured.NestedMap(u, "spec", "parentRef")
	if !ok || group(ref, gatewayGroup, "group") != gatewayGroup || str(ref, kindGateway, "kind") != kindGateway {
		return ParentRef{}, false
	}
	n := str(ref, "", "name")
	return ParentRef{Namespace: str(ref, ns, "namespace"), Name: n}, n != ""
}

// ServiceBackends are the Services among refs (made by an object of kind fromKind in
// namespace fromNS) that the object may use as backends: those Permitted by the grants.
func ServiceBackends(refs []Ref, fromKind, fromNS string, grants []gwapiv1beta1.ReferenceGrant) []types.NamespacedName {
	var out []types.NamespacedName
	for _, ref := range refs {
		if ref.isService() && Permitted(ref, fromKind, fromNS, grants) {
			out = append(out, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name})
		}
	}
	return out
}

// Permitted tells whether ref, made by an object of kind fromKind in namespace fromNS, may
// point into another namespace: a ReferenceGrant in ref's namespace allows it. References
// within the namespace are always permitted.
func Permitted(ref Ref, fromKind, fromNS string, grants []gwapiv1beta1.ReferenceGrant) bool {
	if ref.Namespace == fromNS {
		return true
	}
	for _, g := range grants {
		if g.Namespace != ref.Namespace {
			continue
		}
		from := slices.ContainsFunc(g.Spec.From, func(f gwapiv1beta1.ReferenceGrantFrom) bool {
			return string(f.Group) == gatewayGroup && string(f.Kind) == fromKind && string(f.Namespace) == fromNS
		})
		to := slices.ContainsFunc(g.Spec.To, func(t gwapiv1beta1.ReferenceGrantTo) bool {
			return string(t.Group) == ref.Group && string(t.Kind) == ref.Kind && (t.Name == nil || string(*t.Name) == ref.Name)
		})
		if from && to {
			return true
		}
	}
	return false
}

// DesiredContext is the SourceContext of a Gateway API object of kind fromKind in namespace
// fromNS with references refs: the namespace's labels (at most 64, by key) and the
// cross-namespace references the grants permit (at most 128).
func DesiredContext(fromKind, fromNS string, nsLabels map[string]string, refs []Ref, grants []gwapiv1beta1.ReferenceGrant) *v1alpha1.SourceContext {
	sc := &v1alpha1.SourceContext{}
	for _, k := range slices.Sorted(maps.Keys(nsLabels)) {
		if len(sc.NamespaceLabels) == maxNamespaceLabels {
			break
		}
		if sc.NamespaceLabels == nil {
			sc.NamespaceLabels = map[string]string{}
		}
		sc.NamespaceLabels[k] = nsLabels[k]
	}
	for _, r := range refs {
		if r.Namespace != fromNS && Permitted(r, fromKind, fromNS, grants) && len(sc.GrantedRefs) < maxGrantedRefs {
			sc.GrantedRefs = append(sc.GrantedRefs, v1alpha1.GrantedRef{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
		}
	}
	return sc
}

// TrimResource is the tenant object as a Route embeds it: apiVersion, kind,
// metadata.{name,namespace,uid,generation}, its kubelb.k8c.io/ annotations (KeptAnnotations)
// and spec.
func TrimResource(k Kind, u map[string]any) unstructured.Unstructured {
	out := unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(k.GroupVersionKind().GroupVersion().String())
	out.SetKind(k.String())
	meta := map[string]any{}
	fields := []string{"name", "namespace", "uid", "generation"}
	if k.Name == ListenerSet.Name {
		// The hub ranks a Gateway's ListenerSets by age (Gateway API's listener precedence).
		fields = append(fields, "creationTimestamp")
	}
	for _, f := range fields {
		if v, ok, _ := unstructured.NestedFieldNoCopy(u, "metadata", f); ok {
			meta[f] = v
		}
	}
	if a, ok, _ := unstructured.NestedStringMap(u, "metadata", "annotations"); ok {
		kept := KeptAnnotations(a)
		if k.Name == Ingress.Name {
			kept = withNginxAnnotations(kept, a)
		}
		if len(kept) > 0 {
			m := make(map[string]any, len(kept))
			for k, v := range kept {
				m[k] = v
			}
			meta["annotations"] = m
		}
	}
	out.Object["metadata"] = meta
	if spec, ok, _ := unstructured.NestedFieldCopy(u, "spec"); ok {
		out.Object["spec"] = spec
	}
	return out
}

// Bounds of the annotations a Route embeds: the hub reads only kubelb.k8c.io/ ones (e.g.
// kubelb.k8c.io/request-timeout), and checks every value it reads again.
const (
	maxKeptAnnotations     = 16
	maxKeptAnnotationValue = 256
)

// KeptAnnotations are the annotations of a tenant Ingress or Gateway API object that its
// Route carries to the hub: those of prefix kubelb.k8c.io/ with a value of at most 256 bytes,
// at most 16 of them (by key); nil when none.
func KeptAnnotations(a map[string]string) map[string]string {
	var out map[string]string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if !strings.HasPrefix(k, v1alpha1.AnnotationPrefix) || len(a[k]) > maxKeptAnnotationValue {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = a[k]
		if len(out) == maxKeptAnnotations {
			break
		}
	}
	return out
}

// Bounds of the ingress-nginx annotations an Ingress's Route carries (the hub honours those
// docs/ingress-nginx.md lists and names the others in one Warning).
const (
	nginxAnnotationPrefix   = "nginx.ingress.kubernetes.io/"
	maxNginxAnnotations     = 64
	maxNginxAnnotationValue = 1024
)

// withNginxAnnotations adds to kept the ingress-nginx annotations (prefix
// nginx.ingress.kubernetes.io/) of a, at most 64 (by key). A value longer than 1024 bytes is
// carried empty: the hub still names the annotation (snippets, the longest, are never
// honoured) and reports an empty value it reads as not understood.
func withNginxAnnotations(kept, a map[string]string) map[string]string {
	n := 0
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if !strings.HasPrefix(k, nginxAnnotationPrefix) {
			continue
		}
		if kept == nil {
			kept = map[string]string{}
		}
		v := a[k]
		if len(v) > maxNginxAnnotationValue {
			v = ""
		}
		kept[k] = v
		if n++; n == maxNginxAnnotations {
			break
		}
	}
	return kept
}

// TrimService is a tenant Service as a Route embeds it: name, namespace, uid, labels, and
// spec.{type,selector,ports} (with the NodePorts).
func TrimService(svc *corev1.Service) v1alpha1.UpstreamService {
	return v1alpha1.UpstreamService{Service: corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, UID: svc.UID,
			Labels: maps.Clone(svc.Labels)},
		Spec: corev1.ServiceSpec{Type: svc.Spec.Type, Selector: maps.Clone(svc.Spec.Selector),
			Ports: slices.Clone(svc.Spec.Ports)},
	}}
}

// DesiredRoute is the hub Route mirroring a tenant object of kind k (u: its unstructured
// content) into hub namespace hubNS: named by the object's UID, labelled with its origin,
// one endpoint group using Addresses/default, the trimmed object, its backend Services as the
// tenant has them (NodePort twins for ClusterIP backends) and, for Gateway API kinds, the
// source context.
func DesiredRoute(k Kind, u map[string]any, hubNS string, services []corev1.Service, sc *v1alpha1.SourceContext) *v1alpha1.Route {
	obj := unstructured.Unstructured{Object: u}
	r := &v1alpha1.Route{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Route"},
		ObjectMeta: metav1.ObjectMeta{Name: string(obj.GetUID()), Namespace: hubNS, Labels: hubnames.OriginLabels(hubNS, k.OriginKind(), obj.GetNamespace(), obj.GetName())},
		Spec: v1alpha1.RouteSpec{
			Endpoints: []v1alpha1.LoadBalancerEndpoints{{
				Name:               "default",
				AddressesReference: &corev1.ObjectReference{Name: v1alpha1.DefaultAddressesName},
			}},
			Source: v1alpha1.RouteSource{Kubernetes: &v1alpha1.KubernetesSource{
				Route:   TrimResource(k, u),
				Context: sc,
			}},
		},
	}
	for i := range services {
		r.Spec.Source.Kubernetes.Services = append(r.Spec.Source.Kubernetes.Services, TrimService(&services[i]))
	}
	return r
}

// TwinName is the name of the NodePort twin of Service name, and whether it is a valid
// Service name.
func TwinName(name string) (string, bool) {
	n := name + TwinSuffix
	return n, len(validation.IsDNS1035Label(n)) == 0
}

// DesiredTwin is the NodePort twin of a ClusterIP Service, as KubeLB CE makes it: same
// namespace, selector and ports (NodePorts left to the API server), type NodePort, labelled
// with the origin and managed-by, owned by the original so that it goes with it.
func DesiredTwin(svc *corev1.Service) *corev1.Service {
	name, _ := TwinName(svc.Name)
	twin := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: svc.Namespace, Labels: map[string]string{
			v1alpha1.LabelOriginName:      svc.Name,
			v1alpha1.LabelOriginNamespace: svc.Namespace,
			v1alpha1.LabelManagedBy:       v1alpha1.LabelManagedByValue,
		}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: maps.Clone(svc.Spec.Selector)},
	}
	for _, p := range svc.Spec.Ports {
		twin.Spec.Ports = append(twin.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port,
			TargetPort: p.TargetPort, AppProtocol: p.AppProtocol})
	}
	return twin
}

// twinDrifted tells whether the twin as it is differs from the desired one in what the ccm
// sets (labels, owner, type, selector, ports without their NodePorts).
func twinDrifted(cur, desired *corev1.Service) bool {
	for k, v := range desired.Labels {
		if cur.Labels[k] != v {
			return true
		}
	}
	if !slices.ContainsFunc(cur.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == desired.OwnerReferences[0].UID }) ||
		cur.Spec.Type != desired.Spec.Type || !maps.Equal(cur.Spec.Selector, desired.Spec.Selector) ||
		len(cur.Spec.Ports) != len(desired.Spec.Ports) {
		return true
	}
	for i, p := range cur.Spec.Ports {
		d := desired.Spec.Ports[i]
		p.NodePort = 0
		if d.Protocol == "" {
			d.Protocol = corev1.ProtocolTCP
		}
		if d.TargetPort.IntVal == 0 && d.TargetPort.StrVal == "" {
			d.TargetPort = p.TargetPort // defaulted to the port by the API server
		}
		if p.Name != d.Name || p.Protocol != d.Protocol || p.Port != d.Port || p.TargetPort != d.TargetPort ||
			!equalPtr(p.AppProtocol, d.AppProtocol) {
			return true
		}
	}
	return false
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// isTwin tells whether a tenant Service is a twin the ccm made.
func isTwin(svc *corev1.Service) bool {
	return hubnames.IsManaged(svc) && svc.Labels[v1alpha1.LabelOriginName] != "" &&
		svc.Name == svc.Labels[v1alpha1.LabelOriginName]+TwinSuffix
}

// eachBackendRef calls fn with each backend reference of a Gateway API route (unstructured
// content u), in order: every rule's backendRefs, then the backends its RequestMirror filters
// copy requests to.
func eachBackendRef(u map[string]any, fn func(ref map[string]any)) {
	for _, r := range list(u, "spec", "rules") {
		rule, _ := r.(map[string]any)
		for _, b := range list(rule, "backendRefs") {
			ref, _ := b.(map[string]any)
			fn(ref)
		}
		for _, f := range list(rule, "filters") {
			filter, _ := f.(map[string]any)
			if ref, ok, _ := unstructured.NestedMap(filter, "requestMirror", "backendRef"); ok {
				fn(ref)
			}
		}
	}
}
