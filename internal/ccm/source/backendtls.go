package source

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/textcut"
)

// BackendTLSPolicies (gateway.networking.k8s.io/v1) in the ccm: which policy applies to a
// backend Service port of a route, what the Route carries of it to the hub
// (DesiredBackendTLS), and the policy's status (DesiredPolicyStatus). All pure.

// Bounds of what a Route carries of BackendTLSPolicies (the Route CRD's).
const (
	maxBackendTLS            = 512
	maxBackendCACertificates = 8
	// maxCABundle bounds the PEM of one policy's CA certificates (all its ConfigMaps').
	maxCABundle = 64 << 10
	// caCertKey is the ConfigMap key of the CA certificates.
	caCertKey = "ca.crt"
	// maxPolicyAncestors is the API's bound of status.ancestors.
	maxPolicyAncestors = 16
	wellKnownSystem    = "System"
)

// PortRef is a backend Service port a route names: the Service's namespace and name (not
// its twin's) and the port.
type PortRef struct {
	Namespace, Name string
	Port            int32
}

// BackendPorts are the Service ports the backendRefs and RequestMirror filters of a route
// (unstructured content u, namespace ns) name, without duplicates, in the order of first
// appearance.
func BackendPorts(u map[string]any, ns string) []PortRef {
	var out []PortRef
	add := func(ref map[string]any) {
		if group(ref, "", "group") != "" || str(ref, kindService, "kind") != kindService {
			return
		}
		port, ok, _ := unstructured.NestedInt64(ref, "port")
		name := str(ref, "", "name")
		if !ok || port < 1 || port > 65535 || name == "" {
			return
		}
		p := PortRef{Namespace: str(ref, ns, "namespace"), Name: name, Port: int32(port)}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	eachBackendRef(u, add)
	return out
}

// PolicyVerdict is what a BackendTLSPolicy's references give: the CA certificates (PEM) of
// its valid ConfigMaps, or the well-known set; the ResolvedRefs and Accepted verdicts.
type PolicyVerdict struct {
	CA        string
	WellKnown string
	// Resolved is false when a caCertificateRef cannot be used (ResolvedReason says why,
	// ResolvedMessage which and why).
	Resolved                        bool
	ResolvedReason, ResolvedMessage string
	// Usable is false when the policy has no usable CA certificate (InvalidReason,
	// InvalidMessage): NoValidCACertificate, or Invalid for unsupported well-known
	// certificates. Its backends then fail, never go unencrypted.
	Usable                        bool
	InvalidReason, InvalidMessage string
}

// ResolvePolicy checks a policy's CA certificates: each caCertificateRef must be a core
// ConfigMap of its namespace (configMaps, by name; missing: absent) with a key ca.crt of PEM
// certificates; wellKnownCACertificates may be System only. kubelb knows no option
// (spec.options): a policy with options is not usable (Accepted False, Invalid), since the
// TLS handshake they ask for cannot be made as written; its backends then fail.
func ResolvePolicy(p *gwapiv1.BackendTLSPolicy, configMaps map[string]*corev1.ConfigMap) PolicyVerdict {
	v := resolveCACertificates(p, configMaps)
	if len(p.Spec.Options) > 0 {
		keys := make([]string, 0, len(p.Spec.Options))
		for k := range p.Spec.Options {
			keys = append(keys, fmt.Sprintf("%q", truncateName(string(k))))
		}
		slices.Sort(keys)
		v.CA, v.WellKnown, v.Usable = "", "", false
		v.InvalidReason = string(gwapiv1.PolicyReasonInvalid)
		v.InvalidMessage = fmt.Sprintf("options %s are not supported: kubelb knows no BackendTLSPolicy option, and does not make a TLS connection other than the one asked for; remove them. Requests to its backends fail until then", strings.Join(keys, ", "))
	}
	return v
}

// truncateName bounds a name quoted in a message (an option key: at most 253 bytes).
func truncateName(s string) string { return textcut.Cut(s, 64+len(textcut.Ellipsis), textcut.Ellipsis) }

func resolveCACertificates(p *gwapiv1.BackendTLSPolicy, configMaps map[string]*corev1.ConfigMap) PolicyVerdict {
	v := PolicyVerdict{Resolved: true, ResolvedReason: string(gwapiv1.BackendTLSPolicyReasonResolvedRefs)}
	val := p.Spec.Validation
	if wk := val.WellKnownCACertificates; wk != nil && *wk != "" && len(val.CACertificateRefs) == 0 {
		if *wk != wellKnownSystem {
			v.InvalidReason, v.InvalidMessage = string(gwapiv1.PolicyReasonInvalid),
				fmt.Sprintf("wellKnownCACertificates %q is not supported; kubelb knows %q (the system CA bundle of Envoy)", *wk, wellKnownSystem)
			return v
		}
		v.WellKnown, v.Usable = wellKnownSystem, true
		return v
	}
	var problems []string
	var bundle strings.Builder
	for _, ref := range val.CACertificateRefs {
		what := fmt.Sprintf("%s %s", refKind(string(ref.Group), string(ref.Kind)), ref.Name)
		if ref.Group != "" || ref.Kind != "ConfigMap" {
			if v.Resolved {
				v.ResolvedReason = string(gwapiv1.BackendTLSPolicyReasonInvalidKind)
			}
			v.Resolved = false
			problems = append(problems, fmt.Sprintf("%s: only ConfigMaps (core group) can hold CA certificates", what))
			continue
		}
		msg := ""
		cm := configMaps[string(ref.Name)]
		switch {
		case cm == nil:
			msg = "does not exist"
		case cm.Data[caCertKey] == "":
			msg = "has no key " + caCertKey
		default:
			msg = caProblem(cm.Data[caCertKey])
		}
		if msg == "" && bundle.Len()+len(cm.Data[caCertKey])+1 > maxCABundle {
			msg = fmt.Sprintf("makes the policy's CA certificates larger than %d bytes", maxCABundle)
		}
		if msg != "" {
			if v.Resolved {
				v.ResolvedReason = string(gwapiv1.BackendTLSPolicyReasonInvalidCACertificateRef)
			}
			v.Resolved = false
			problems = append(problems, fmt.Sprintf("%s %s", what, msg))
			continue
		}
		s := cm.Data[caCertKey]
		bundle.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			bundle.WriteString("\n")
		}
	}
	v.ResolvedMessage = "every CA certificate reference is resolved"
	if !v.Resolved {
		v.ResolvedMessage = strings.Join(problems, "; ")
	}
	v.CA = bundle.String()
	if v.CA == "" {
		v.InvalidReason = string(gwapiv1.BackendTLSPolicyReasonNoValidCACertificate)
		v.InvalidMessage = "no CA certificate reference can be used: " + v.ResolvedMessage + "; requests to its backends fail"
		if len(val.CACertificateRefs) == 0 {
			v.InvalidMessage = "neither caCertificateRefs nor wellKnownCACertificates is set; requests to its backends fail"
		}
		return v
	}
	v.Usable = true
	return v
}

func refKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// caProblem says why a PEM text cannot serve as CA certificates ("" when it can): only
// CERTIFICATE blocks, at least one, each an X.509 certificate, at most 64 KiB.
func caProblem(s string) string {
	if err := pki.CheckCABundle(s, maxCABundle); err != nil {
		return fmt.Sprintf("holds in %s %s", caCertKey, err)
	}
	return ""
}

// policyBefore orders policies by precedence: the older first, then by namespace/name.
func policyBefore(a, b *gwapiv1.BackendTLSPolicy) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// targets tells whether policy p targets Service svc (its namespace) with sectionName
// section ("" : the whole Service).
func targets(p *gwapiv1.BackendTLSPolicy, namespace, svc, section string) bool {
	if p.Namespace != namespace {
		return false
	}
	return slices.ContainsFunc(p.Spec.TargetRefs, func(t gwapiv1.LocalPolicyTargetReferenceWithSectionName) bool {
		return t.Group == "" && t.Kind == kindService && string(t.Name) == svc && optSection(t.SectionName) == section
	})
}

func optSection(s *gwapiv1.SectionName) string {
	if s == nil {
		return ""
	}
	return string(*s)
}

// winner is the policy that applies to a (Service, sectionName) target: the first by
// precedence among policies (in any order) targeting it; nil when none does.
func winner(policies []*gwapiv1.BackendTLSPolicy, namespace, svc, section string) *gwapiv1.BackendTLSPolicy {
	var best *gwapiv1.BackendTLSPolicy
	for _, p := range policies {
		if targets(p, namespace, svc, section) && (best == nil || policyBefore(p, best) < 0) {
			best = p
		}
	}
	return best
}

// PolicyForPort is the policy that applies to a port of a Service: the one that takes
// precedence among those naming the port's name as sectionName, else among those targeting
// the whole Service; nil when none.
func PolicyForPort(policies []*gwapiv1.BackendTLSPolicy, svc *corev1.Service, port int32) *gwapiv1.BackendTLSPolicy {
	for _, sp := range svc.Spec.Ports {
		if sp.Port == port && sp.Name != "" {
			if p := winner(policies, svc.Namespace, svc.Name, sp.Name); p != nil {
				return p
			}
		}
	}
	return winner(policies, svc.Namespace, svc.Name, "")
}

// DesiredBackendTLS is what a route's Route carries of BackendTLSPolicies: for each of its
// backend ports (BackendPorts) whose Service (services, by namespace/name; as the tenant has
// it) a policy targets, the TLS the hub must use, and the CA bundles they refer to. policies
// are those of the Services' namespaces, verdicts their ResolvePolicy by namespace/name. A
// policy without a usable CA certificate gives an entry without one (the hub answers with an
// error); so does one whose CA bundle finds no room among the eight.
func DesiredBackendTLS(ports []PortRef, services map[types.NamespacedName]*corev1.Service, policies []*gwapiv1.BackendTLSPolicy, verdicts map[types.NamespacedName]PolicyVerdict) ([]v1alpha1.BackendTLS, []string) {
	var entries []v1alpha1.BackendTLS
	var bundles []string
	for _, pr := range ports {
		svc := services[types.NamespacedName{Namespace: pr.Namespace, Name: pr.Name}]
		if svc == nil || len(entries) == maxBackendTLS {
			continue
		}
		p := PolicyForPort(policies, svc, pr.Port)
		if p == nil {
			continue
		}
		e := v1alpha1.BackendTLS{Namespace: pr.Namespace, Name: pr.Name, Port: pr.Port, Policy: p.Name, Hostname: string(p.Spec.Validation.Hostname)}
		for _, n := range p.Spec.Validation.SubjectAltNames {
			e.SubjectAltNames = append(e.SubjectAltNames, v1alpha1.BackendTLSSubjectAltName{Type: string(n.Type), Hostname: string(n.Hostname), URI: string(n.URI)})
		}
		v := verdicts[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]
		switch {
		case !v.Usable:
		case v.WellKnown != "":
			e.WellKnownCACertificates = v.WellKnown
		default:
			i := slices.Index(bundles, v.CA)
			if i < 0 && len(bundles) < maxBackendCACertificates {
				bundles = append(bundles, v.CA)
				i = len(bundles) - 1
			}
			if i >= 0 {
				idx := int32(i)
				e.CACertificates = &idx
			}
		}
		entries = append(entries, e)
	}
	return entries, bundles
}

// PolicyConflicted tells whether every target of p is taken by a policy that precedes it
// (Accepted False, Conflicted), and names one that does.
func PolicyConflicted(p *gwapiv1.BackendTLSPolicy, policies []*gwapiv1.BackendTLSPolicy) (bool, string) {
	lost, by := 0, ""
	for _, t := range p.Spec.TargetRefs {
		w := winner(policies, p.Namespace, string(t.Name), optSection(t.SectionName))
		if w != nil && (w.Namespace != p.Namespace || w.Name != p.Name) && policyBefore(w, p) < 0 {
			lost++
			by = w.Name
		}
	}
	return lost > 0 && lost == len(p.Spec.TargetRefs), by
}

// DesiredPolicyStatus is a policy's status: one ancestor per Gateway (ancestors, sorted; at
// most 16 with the other controllers' entries, which stay) with the Accepted and
// ResolvedRefs conditions at the policy's generation; the transition times of unchanged
// conditions are kept. now stamps the changed ones.
func DesiredPolicyStatus(p *gwapiv1.BackendTLSPolicy, v PolicyVerdict, conflicted bool, conflictedBy string, ancestors []gwapiv1.ParentReference, now metav1.Time) gwapiv1.PolicyStatus {
	accepted := metav1.Condition{Type: string(gwapiv1.PolicyConditionAccepted), Status: metav1.ConditionTrue,
		Reason: string(gwapiv1.PolicyReasonAccepted), Message: "the policy applies to its targets' ports on the routes of kubelb's Gateways"}
	switch {
	case conflicted:
		accepted.Status, accepted.Reason = metav1.ConditionFalse, string(gwapiv1.PolicyReasonConflicted)
		accepted.Message = fmt.Sprintf("BackendTLSPolicy %s/%s takes precedence for the same targets (older, or first by name)", p.Namespace, conflictedBy)
	case !v.Usable:
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, v.InvalidReason, v.InvalidMessage
	}
	resolved := metav1.Condition{Type: string(gwapiv1.BackendTLSPolicyConditionResolvedRefs), Status: metav1.ConditionTrue,
		Reason: v.ResolvedReason, Message: v.ResolvedMessage}
	if !v.Resolved {
		resolved.Status = metav1.ConditionFalse
	}
	if resolved.Reason == "" {
		resolved.Reason, resolved.Message = string(gwapiv1.BackendTLSPolicyReasonResolvedRefs), "no CA certificate reference to resolve"
	}
	out := gwapiv1.PolicyStatus{Ancestors: []gwapiv1.PolicyAncestorStatus{}}
	for _, a := range p.Status.Ancestors {
		if a.ControllerName != ControllerName {
			out.Ancestors = append(out.Ancestors, a)
		}
	}
	for _, ref := range ancestors {
		if len(out.Ancestors) == maxPolicyAncestors {
			break
		}
		var conds []metav1.Condition
		for _, a := range p.Status.Ancestors {
			if a.ControllerName == ControllerName && equalParentRef(a.AncestorRef, ref) {
				conds = slices.Clone(a.Conditions)
			}
		}
		for _, c := range []metav1.Condition{accepted, resolved} {
			c.ObservedGeneration = p.Generation
			c.LastTransitionTime = now
			meta.SetStatusCondition(&conds, c)
		}
		conds = slices.DeleteFunc(conds, func(c metav1.Condition) bool {
			return c.Type != accepted.Type && c.Type != resolved.Type
		})
		out.Ancestors = append(out.Ancestors, gwapiv1.PolicyAncestorStatus{AncestorRef: ref, ControllerName: ControllerName, Conditions: conds})
	}
	return out
}

func equalParentRef(a, b gwapiv1.ParentReference) bool {
	s := func(p *gwapiv1.Namespace) string {
		if p == nil {
			return ""
		}
		return string(*p)
	}
	g := func(p *gwapiv1.Group) string {
		if p == nil {
			return gatewayGroup
		}
		return string(*p)
	}
	k := func(p *gwapiv1.Kind) string {
		if p == nil {
			return kindGateway
		}
		return string(*p)
	}
	return a.Name == b.Name && s(a.Namespace) == s(b.Namespace) && g(a.Group) == g(b.Group) && k(a.Kind) == k(b.Kind) &&
		optSection(a.SectionName) == optSection(b.SectionName)
}

// GatewayAncestor is the ancestorRef of a Gateway.
func GatewayAncestor(namespace, name string) gwapiv1.ParentReference {
	g, k, ns := gwapiv1.Group(gatewayGroup), gwapiv1.Kind(kindGateway), gwapiv1.Namespace(namespace)
	return gwapiv1.ParentReference{Group: &g, Kind: &k, Namespace: &ns, Name: gwapiv1.ObjectName(name)}
}

// WithoutTLSBackends leaves out of a Route the embedded Services (or NodePort twins) of the
// backends entries name: for a hub whose Route CRD cannot carry backendTLS, which then
// answers those backends with an error (BackendNotFound) instead of reaching them in plain
// text.
func WithoutTLSBackends(rt *v1alpha1.Route, entries []v1alpha1.BackendTLS) {
	src := rt.Spec.Source.Kubernetes
	if src == nil {
		return
	}
	src.Services = slices.DeleteFunc(src.Services, func(s v1alpha1.UpstreamService) bool {
		name := s.Name
		if origin := s.Labels[v1alpha1.LabelOriginName]; origin != "" && s.Name == origin+TwinSuffix {
			name = origin
		}
		return slices.ContainsFunc(entries, func(e v1alpha1.BackendTLS) bool {
			return e.Namespace == s.Namespace && e.Name == name
		})
	})
}
