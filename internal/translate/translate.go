package translate

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// Translate turns one tenant's LoadBalancers and Addresses into Envoy listeners, clusters and
// cluster load assignments. For every port of a LoadBalancer that has a listener port
// allocated it emits one listener and one cluster (plus a ClusterLoadAssignment when the
// cluster uses EDS), all named "<lb name>-<tcp|udp>-<port>". See docs/translate.md.
//
// It returns an error only when the Options themselves are invalid (which would break every
// LoadBalancer of the tenant); everything wrong with a single LoadBalancer is reported in
// Output.Problems instead.
func Translate(in Input) (Output, error) {
	opts := in.Options.withDefaults()
	listenAddr, err := netip.ParseAddr(opts.ListenerAddress)
	if err != nil {
		return Output{}, fmt.Errorf("invalid listener address %q: %w", opts.ListenerAddress, err)
	}
	if listenAddr.Zone() != "" {
		return Output{}, fmt.Errorf("invalid listener address %q: zones are not supported", opts.ListenerAddress)
	}
	opts.ListenerAddress = listenAddr.String()

	t := &translator{
		in:        in,
		opts:      opts,
		out:       Output{Problems: map[string][]Problem{}},
		listeners: map[listenerKey]string{},
	}

	// Older LoadBalancers first, so that when two ask for the same listener port the one that
	// had it first keeps it. Ties (and zero timestamps) fall back to the name.
	lbs := make([]*v1alpha1.LoadBalancer, 0, len(in.LoadBalancers))
	for i := range in.LoadBalancers {
		lbs = append(lbs, &in.LoadBalancers[i])
	}
	slices.SortStableFunc(lbs, func(a, b *v1alpha1.LoadBalancer) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	seen := make(map[string]bool, len(lbs))
	for _, lb := range lbs {
		if seen[lb.Name] {
			t.problem(lb.Name, "", ReasonInvalidName, "another LoadBalancer of the same name was translated already")
			continue
		}
		seen[lb.Name] = true
		t.loadBalancer(lb)
	}

	sortByName(t.out.Listeners)
	sortByName(t.out.Clusters)
	sortByName(t.out.Endpoints)
	if len(t.out.Problems) == 0 {
		t.out.Problems = nil
	}
	return t.out, nil
}

type listenerKey struct {
	protocol corev1.Protocol
	port     int32
}

type translator struct {
	in        Input
	opts      Options
	out       Output
	listeners map[listenerKey]string // listener port → name of the listener that has it
}

// problem records a problem once per LoadBalancer (identical ones are folded).
func (t *translator) problem(lb, port, reason, format string, args ...any) {
	p := Problem{Port: port, Reason: reason, Message: fmt.Sprintf(format, args...)}
	if slices.Contains(t.out.Problems[lb], p) {
		return
	}
	t.out.Problems[lb] = append(t.out.Problems[lb], p)
}

// portSpec is one LoadBalancer port, resolved.
type portSpec struct {
	index        int
	name         string
	protocol     corev1.Protocol
	port         int32
	listenerPort int32
	label        string // for problems: "TCP/80 (http)"
	resource     string // Envoy resource name
	statName     string // readable stat prefix
}

// lbSettings are the per-LoadBalancer knobs read from annotations and spec.
type lbSettings struct {
	proxyProtocol bool
	sourceIP      bool
}

func (t *translator) loadBalancer(lb *v1alpha1.LoadBalancer) {
	if errs := validation.IsDNS1123Subdomain(lb.Name); len(errs) > 0 {
		t.problem(lb.Name, "", ReasonInvalidName, "name %q cannot be used in Envoy resource names: %s", lb.Name, strings.Join(errs, "; "))
		return
	}
	settings := t.settings(lb)

	used := map[listenerKey]bool{}
	for i, p := range lb.Spec.Ports {
		ps := portSpec{index: i, name: p.Name, protocol: p.Protocol, port: p.Port}
		if ps.protocol == "" {
			ps.protocol = corev1.ProtocolTCP
		}
		ps.label = fmt.Sprintf("%s/%d", ps.protocol, ps.port)
		if ps.name != "" {
			ps.label += " (" + ps.name + ")"
		}
		if ps.protocol != corev1.ProtocolTCP && ps.protocol != corev1.ProtocolUDP {
			t.problem(lb.Name, ps.label, ReasonUnsupportedProtocol, "protocol %q is not supported; only TCP and UDP are", ps.protocol)
			continue
		}
		if ps.port < 1 || ps.port > 65535 {
			t.problem(lb.Name, ps.label, ReasonInvalidPort, "port %d is out of range 1-65535", ps.port)
			continue
		}
		if used[listenerKey{ps.protocol, ps.port}] {
			t.problem(lb.Name, ps.label, ReasonInvalidPort, "port %s is listed more than once", ps.label)
			continue
		}
		used[listenerKey{ps.protocol, ps.port}] = true

		ps.listenerPort = listenerPort(lb, ps)
		if ps.listenerPort == 0 {
			t.problem(lb.Name, ps.label, ReasonPortNotAllocated, "no listener port is allocated yet (status.service.ports)")
			continue
		}
		if ps.listenerPort < 0 || ps.listenerPort > 65535 {
			t.problem(lb.Name, ps.label, ReasonInvalidPort, "allocated listener port %d is out of range 1-65535", ps.listenerPort)
			continue
		}
		ps.resource = fmt.Sprintf("%s-%s-%d", lb.Name, strings.ToLower(string(ps.protocol)), ps.port)
		ps.statName = statName(lb, ps)

		key := listenerKey{ps.protocol, ps.listenerPort}
		if other, ok := t.listeners[key]; ok {
			t.problem(lb.Name, ps.label, ReasonListenerPortConflict, "listener port %s/%d is already used by %s", ps.protocol, ps.listenerPort, other)
			continue
		}

		if ps.protocol == corev1.ProtocolUDP && settings.proxyProtocol {
			t.problem(lb.Name, ps.label, ReasonProxyProtocolUnsupported, "PROXY protocol is not supported for UDP; the port is served without it")
		}
		eps := t.endpoints(lb, ps)
		if len(eps) == 0 {
			t.problem(lb.Name, ps.label, ReasonNoEndpoints, "the cluster has no endpoints; connections will fail until the tenant has Ready nodes")
		}
		res, err := t.resources(ps, settings, eps)
		if err != nil {
			t.problem(lb.Name, ps.label, ReasonInvalidConfig, "generated Envoy configuration is invalid: %v", err)
			continue
		}
		t.listeners[key] = ps.resource
		t.out.Listeners = append(t.out.Listeners, res.listener)
		t.out.Clusters = append(t.out.Clusters, res.cluster)
		if res.endpoints != nil {
			t.out.Endpoints = append(t.out.Endpoints, res.endpoints)
		}
	}
}

// settings reads the per-LoadBalancer annotations and spec knobs.
func (t *translator) settings(lb *v1alpha1.LoadBalancer) lbSettings {
	var s lbSettings
	if v, ok := lb.Annotations[v1alpha1.AnnotationProxyProtocol]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "v2", "true":
			s.proxyProtocol = true
		case "", "false":
		default:
			t.problem(lb.Name, "", ReasonInvalidAnnotation, "annotation %s=%q is not understood (use \"v2\"); PROXY protocol is off",
				v1alpha1.AnnotationProxyProtocol, v)
		}
	}
	if p := lb.Spec.Persistence; p != nil {
		switch p.Type {
		case v1alpha1.PersistenceSourceIP:
			s.sourceIP = true
		case "":
		default:
			t.problem(lb.Name, "", ReasonUnsupportedPersistence, "persistence type %q is not supported (use %q); persistence is off",
				p.Type, v1alpha1.PersistenceSourceIP)
		}
	}
	return s
}

// listenerPort finds the listener port allocated to a spec port in status.service.ports:
// first by port name (when the spec port is named), then by port number; the protocol must
// match either way. 0 means "not allocated".
func listenerPort(lb *v1alpha1.LoadBalancer, ps portSpec) int32 {
	status := lb.Status.Service.Ports
	if ps.name != "" {
		for _, sp := range status {
			if sp.Name == ps.name && protocolOf(sp.Protocol) == ps.protocol {
				return sp.UpstreamTargetPort
			}
		}
	}
	for _, sp := range status {
		if sp.Port == ps.port && protocolOf(sp.Protocol) == ps.protocol {
			return sp.UpstreamTargetPort
		}
	}
	return 0
}

func protocolOf(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// statName is the readable stat prefix of a port: "<origin ns>/<origin name>/<proto>-<port>"
// when the origin labels are present, else "<lb name>/<proto>-<port>". Dots are Envoy's stat
// separator, so they are replaced.
func statName(lb *v1alpha1.LoadBalancer, ps portSpec) string {
	base := lb.Name
	ns, name := lb.Labels[v1alpha1.LabelOriginNamespace], lb.Labels[v1alpha1.LabelOriginName]
	if ns != "" && name != "" && len(validation.IsValidLabelValue(ns)) == 0 && len(validation.IsValidLabelValue(name)) == 0 {
		base = ns + "/" + name
	}
	s := fmt.Sprintf("%s/%s-%d", base, strings.ToLower(string(ps.protocol)), ps.port)
	return strings.ReplaceAll(s, ".", "_")
}

// endpoint is one upstream host: an IP or a DNS name, and a port.
type endpoint struct {
	address  string
	hostname bool
	port     int32
}

// endpoints collects every address × matching endpoint port over all endpoint groups of the
// LoadBalancer, sorted and deduplicated.
func (t *translator) endpoints(lb *v1alpha1.LoadBalancer, ps portSpec) []endpoint {
	var eps []endpoint
	for gi := range lb.Spec.Endpoints {
		g := &lb.Spec.Endpoints[gi]
		port, ok := endpointPort(g, ps)
		if !ok {
			t.problem(lb.Name, ps.label, ReasonEndpointPortNotFound, "endpoints[%d] has no port named %q nor a port at index %d", gi, ps.name, ps.index)
			continue
		}
		if port < 1 || port > 65535 {
			t.problem(lb.Name, ps.label, ReasonInvalidPort, "endpoints[%d] port %d is out of range 1-65535", gi, port)
			continue
		}
		addrs := g.Addresses
		if ref := g.AddressesReference; ref != nil {
			name := ref.Name
			if name == "" {
				name = v1alpha1.DefaultAddressesName
			}
			a, ok := t.in.Addresses[name]
			if !ok || (ref.Namespace != "" && ref.Namespace != t.in.Tenant) {
				t.problem(lb.Name, "", ReasonAddressesNotFound, "endpoints[%d] references Addresses %q, which does not exist in %s", gi, name, t.in.Tenant)
				continue
			}
			addrs = a.Spec.Addresses
		}
		for _, a := range addrs {
			ep, ok := parseAddress(a)
			if !ok {
				t.problem(lb.Name, "", ReasonInvalidAddress, "endpoint address (ip %q, hostname %q) is neither an IP address nor a DNS name; left out", a.IP, a.Hostname)
				continue
			}
			ep.port = port
			eps = append(eps, ep)
		}
	}
	slices.SortFunc(eps, func(a, b endpoint) int {
		return cmp.Or(cmp.Compare(a.address, b.address), cmp.Compare(a.port, b.port))
	})
	return slices.Compact(eps)
}

// endpointPort picks the port of an endpoint group matching a LoadBalancer port: by name when
// the LoadBalancer port is named and the group has a port of that name, else by index.
func endpointPort(g *v1alpha1.LoadBalancerEndpoints, ps portSpec) (int32, bool) {
	if ps.name != "" {
		for _, p := range g.Ports {
			if p.Name == ps.name {
				return p.Port, true
			}
		}
	}
	if ps.index < len(g.Ports) {
		return g.Ports[ps.index].Port, true
	}
	return 0, false
}

// parseAddress accepts an IP (v4 or v6, no zone) or, when no IP is given, a DNS name.
func parseAddress(a v1alpha1.EndpointAddress) (endpoint, bool) {
	if a.IP != "" {
		ip, err := netip.ParseAddr(strings.TrimSpace(a.IP))
		if err != nil || ip.Zone() != "" || ip.IsUnspecified() {
			return endpoint{}, false
		}
		return endpoint{address: ip.Unmap().String()}, true
	}
	if a.Hostname != "" {
		h := strings.TrimSuffix(strings.ToLower(a.Hostname), ".")
		if len(validation.IsDNS1123Subdomain(h)) > 0 {
			return endpoint{}, false
		}
		return endpoint{address: h, hostname: true}, true
	}
	return endpoint{}, false
}

type named interface{ GetName() string }

type namedCLA interface{ GetClusterName() string }

func resourceName(r types.Resource) string {
	switch v := r.(type) {
	case named:
		return v.GetName()
	case namedCLA:
		return v.GetClusterName()
	}
	return ""
}

func sortByName(rs []types.Resource) {
	slices.SortFunc(rs, func(a, b types.Resource) int { return cmp.Compare(resourceName(a), resourceName(b)) })
}
