package translate

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/sourcerange"
	"kubelb.dev/kubelb/internal/textcut"
)

// Translate is the Layer 4 front end: it turns one tenant's LoadBalancers and Addresses into
// IR. For every port of a LoadBalancer that has a listener port allocated it emits one
// listener and one cluster, both named "<lb name>-<tcp|udp>-<port>". See docs/translate.md.
//
// It returns an error only when the Options themselves are invalid (which would break every
// LoadBalancer of the tenant); everything wrong with a single LoadBalancer is a problem on
// that LoadBalancer (and port), and the Config is normalized and valid (ir.Config.Validate).
func Translate(in Input) (*ir.Config, ir.Problems, error) {
	t, err := translateL4(in)
	if err != nil {
		return nil, nil, err
	}
	return t.cfg, t.problems.List(), nil
}

// translateL4 is Translate, returning the front end's state (Run shares its endpoint
// expansions with the Layer 7 front end).
func translateL4(in Input) (*l4, error) {
	t, err := newL4(in)
	if err != nil {
		return nil, err
	}
	lbs := byAge(in.LoadBalancers)
	seen := make(map[string]bool, len(lbs))
	for _, lb := range lbs {
		if seen[lb.Name] {
			t.problem(t.ref(lb, ""), ir.SeverityError, ReasonInvalidName, "another LoadBalancer of the same name was translated already")
			continue
		}
		seen[lb.Name] = true
		t.loadBalancer(lb)
	}
	t.cfg.Normalize()
	return t, nil
}

// newL4 checks the options and returns an empty Layer 4 front end for in.
func newL4(in Input) (*l4, error) {
	opts := in.Options.withDefaults()
	listenAddr, err := netip.ParseAddr(opts.ListenerAddress)
	if err != nil {
		return nil, fmt.Errorf("invalid listener address %q: %w", opts.ListenerAddress, err)
	}
	if listenAddr.Zone() != "" {
		return nil, fmt.Errorf("invalid listener address %q: zones are not supported", opts.ListenerAddress)
	}
	opts.ListenerAddress = listenAddr.String()
	listenAddr6, err := netip.ParseAddr(opts.ListenerAddressIPv6)
	if err != nil || !listenAddr6.Is6() || listenAddr6.Is4In6() || listenAddr6.Zone() != "" {
		return nil, fmt.Errorf("invalid IPv6 listener address %q: an IPv6 address without a zone is needed", opts.ListenerAddressIPv6)
	}
	opts.ListenerAddressIPv6 = listenAddr6.String()

	t := &l4{
		in:        in,
		opts:      opts,
		cfg:       &ir.Config{},
		listeners: map[listenerKey]string{},
	}
	t.expander = newExpander(&t.in, compilePolicy(in.Policy))
	return t, nil
}

// byAge orders LoadBalancers older first, so that when two ask for the same listener port
// the one that had it first keeps it. Ties (and zero timestamps) fall back to the name.
func byAge(in []v1alpha1.LoadBalancer) []*v1alpha1.LoadBalancer {
	lbs := make([]*v1alpha1.LoadBalancer, 0, len(in))
	for i := range in {
		lbs = append(lbs, &in[i])
	}
	slices.SortStableFunc(lbs, func(a, b *v1alpha1.LoadBalancer) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return lbs
}

type listenerKey struct {
	protocol corev1.Protocol
	port     int32
}

type l4 struct {
	in        Input
	opts      Options
	cfg       *ir.Config
	problems  ir.ProblemSet
	listeners map[listenerKey]string // listener port → name of the listener that has it
	expander  *expander
	// portNames indexes the named ports of endpoint groups with many ports (endpointPort).
	portNames map[*v1alpha1.LoadBalancerEndpoints]map[string]int32
}

func (t *l4) ref(lb *v1alpha1.LoadBalancer, section string) ir.ObjectRef {
	return ir.ObjectRef{Kind: KindLoadBalancer, Namespace: t.in.Tenant, Name: lb.Name, Section: section}
}

func (t *l4) problem(obj ir.ObjectRef, sev ir.Severity, reason, format string, args ...any) {
	t.problems.Add(obj, sev, reason, format, args...)
}

// portSpec is one LoadBalancer port, resolved.
type portSpec struct {
	index        int
	name         string
	protocol     corev1.Protocol
	port         int32
	listenerPort int32
	label        string // the port's section: "TCP/80 (http)"
	resource     string // Envoy resource name
	statName     string // readable stat prefix
}

// lbSettings are the per-LoadBalancer knobs read from annotations and spec.
type lbSettings struct {
	proxyProtocol bool
	sourceIP      bool
	// healthCheckPort is spec.healthCheckNodePort (externalTrafficPolicy Local): every node
	// is checked with GET /healthz on it; 0 when unset.
	healthCheckPort uint32
	// opts are the tenant's options with the LoadBalancer's upstream annotations applied.
	opts Options
	// families are the IP families the hub Service got (its spec.ipFamilies).
	families []corev1.IPFamily
	// sourceRanges are spec.sourceRanges, canonical, sorted, unique: the only clients
	// served; none: every client.
	sourceRanges []string
	// rangesInvalid: spec.sourceRanges cannot be read; nothing of the LoadBalancer is served.
	rangesInvalid bool
}

// listenerAddresses are the addresses the listeners of a LoadBalancer bind: one per IP
// family its hub Service got (families: the hub Service's spec.ipFamilies; the manager
// makes the hub Service, the tenant cannot write it), the IPv4 one (Options.ListenerAddress) first; IPv4 alone
// when none is recorded (a hub Service made before the field, or none yet). An IPv4-only
// LoadBalancer never binds IPv6: the Envoy pods of an IPv4 hub may have IPv6 disabled.
func listenerAddresses(opts Options, families []corev1.IPFamily) (string, []string) {
	v4, v6 := slices.Contains(families, corev1.IPv4Protocol), slices.Contains(families, corev1.IPv6Protocol)
	switch {
	case v6 && !v4:
		return opts.ListenerAddressIPv6, nil
	case v6 && opts.ListenerAddressIPv6 != opts.ListenerAddress:
		return opts.ListenerAddress, []string{opts.ListenerAddressIPv6}
	}
	return opts.ListenerAddress, nil
}

// HealthCheckNodePath is what kube-proxy answers on a Service's healthCheckNodePort: 200
// while the node has a local endpoint of the Service, 503 otherwise.
const HealthCheckNodePath = "/healthz"

func (t *l4) loadBalancer(lb *v1alpha1.LoadBalancer) {
	if errs := validation.IsDNS1123Subdomain(lb.Name); len(errs) > 0 {
		t.problem(t.ref(lb, ""), ir.SeverityError, ReasonInvalidName, "name %q cannot be used in Envoy resource names: %s", lb.Name, strings.Join(errs, "; "))
		return
	}
	settings := t.settings(lb)
	if settings.rangesInvalid {
		return // fail closed: no port is served (settings reported why)
	}

	used := map[listenerKey]bool{}
	hub := indexHubPorts(t.in.HubServices[lb.Name])
	for i, p := range lb.Spec.Ports {
		ps := portSpec{index: i, name: p.Name, protocol: v1alpha1.ProtocolOrTCP(p.Protocol), port: p.Port}
		ps.label = fmt.Sprintf("%s/%d", ps.protocol, ps.port)
		if ps.name != "" {
			ps.label += " (" + ps.name + ")"
		}
		ref := t.ref(lb, ps.label)
		if ps.protocol != corev1.ProtocolTCP && ps.protocol != corev1.ProtocolUDP {
			t.problem(ref, ir.SeverityError, ReasonUnsupportedProtocol, "protocol %q is not supported; only TCP and UDP are", ps.protocol)
			continue
		}
		if ps.port < 1 || ps.port > 65535 {
			t.problem(ref, ir.SeverityError, ReasonInvalidPort, "port %d is out of range 1-65535", ps.port)
			continue
		}
		if used[listenerKey{ps.protocol, ps.port}] {
			t.problem(ref, ir.SeverityError, ReasonInvalidPort, "port %s is listed more than once", ps.label)
			continue
		}
		used[listenerKey{ps.protocol, ps.port}] = true

		ps.listenerPort = hub.listenerPort(ps.protocol, ps.port)
		if ps.listenerPort == 0 {
			if hub.exhausted[listenerKey{ps.protocol, ps.port}] {
				t.problem(ref, ir.SeverityError, ReasonPortNotAllocated, "no listener port is left for it in the hub's listener port range")
			} else {
				t.problem(ref, ir.SeverityWarning, ReasonPortPending, "no listener port yet: the manager has not allocated it (the hub Service has no port for it)")
			}
			continue
		}
		if ps.listenerPort < 0 || ps.listenerPort > 65535 {
			t.problem(ref, ir.SeverityError, ReasonInvalidPort, "allocated listener port %d is out of range 1-65535", ps.listenerPort)
			continue
		}
		ps.resource = fmt.Sprintf("%s-%s-%d", lb.Name, strings.ToLower(string(ps.protocol)), ps.port)
		ps.statName = statName(lb, ps)

		key := listenerKey{ps.protocol, ps.listenerPort}
		if other, ok := t.listeners[key]; ok {
			t.problem(ref, ir.SeverityError, ReasonListenerPortConflict, "listener port %s/%d is already used by %s", ps.protocol, ps.listenerPort, other)
			continue
		}

		if ps.protocol == corev1.ProtocolUDP && settings.proxyProtocol {
			t.problem(ref, ir.SeverityWarning, ReasonProxyProtocolUnsupported, "PROXY protocol is not supported for UDP; the port is served without it")
		}
		if ps.protocol == corev1.ProtocolUDP && len(settings.sourceRanges) > 0 && t.opts.LoadBalancerProxyProtocol.Enabled {
			t.problem(ref, ir.SeverityWarning, ReasonClientAddressUnknown, "the hub's load balancer gives the clients' addresses in PROXY protocol headers (spec.loadBalancer.proxyProtocol of the Tenant or Config), which Envoy cannot read on UDP: spec.sourceRanges is enforced on this port against the address the datagrams come from, the client's only if the hub's load balancer keeps it")
		}
		eps := t.endpoints(lb, ps)
		if len(eps) == 0 {
			t.problem(ref, ir.SeverityError, ReasonNoEndpoints, "the cluster has no usable endpoints; connections will fail until the tenant has Ready nodes with valid addresses")
		}
		t.listeners[key] = ps.resource
		t.emit(ref, ps, settings, eps)
	}
}

// emit adds the listener and cluster of one port.
func (t *l4) emit(owner ir.ObjectRef, ps portSpec, s lbSettings, eps []ir.Endpoint) {
	addr, more := listenerAddresses(t.opts, s.families)
	l := &ir.Listener{
		Name:         ps.resource,
		Address:      addr,
		Port:         uint32(ps.listenerPort),
		StatPrefix:   ps.statName,
		Owners:       []ir.ObjectRef{owner},
		Cluster:      ps.resource,
		HashSourceIP: s.sourceIP,
		SourceRanges: s.sourceRanges,
	}
	l.AdditionalAddresses = more
	c := &ir.Cluster{
		Name:           ps.resource,
		StatName:       ps.statName,
		Owners:         []ir.ObjectRef{owner},
		Endpoints:      eps,
		ConnectTimeout: ir.Duration(s.opts.ConnectTimeout),
		MaxConnections: s.opts.MaxConnectionsPerCluster,
		HashSourceIP:   s.sourceIP,
	}
	if ps.protocol == corev1.ProtocolUDP {
		l.Protocol, c.Protocol = ir.ProtocolUDP, ir.UpstreamUDP
		l.IdleTimeout = ir.Duration(s.opts.UDPSessionIdleTimeout)
	} else {
		l.Protocol, c.Protocol = ir.ProtocolTCP, ir.UpstreamTCP
		l.AccessLog = t.opts.AccessLog
		c.ProxyProtocol = s.proxyProtocol
		// The hub's load balancer names the client in a PROXY protocol header: read first, its
		// address is the one source ranges, the access log and the PROXY protocol towards the
		// tenant see (the listener filter of a Gateway's ClientTrafficPolicy).
		if pp := t.opts.LoadBalancerProxyProtocol; pp.Enabled {
			l.ClientTraffic = &ir.ClientTraffic{ProxyProtocol: &ir.ProxyProtocol{Optional: pp.Optional}}
		}
	}
	c.HealthCheck = t.healthCheck(s, c.Protocol == ir.UpstreamUDP)
	t.cfg.Listeners = append(t.cfg.Listeners, l)
	t.cfg.Clusters = append(t.cfg.Clusters, c)
}

// healthCheck is the health check of a cluster of a LoadBalancer's nodes (nil for none). TCP
// ports are checked by a TCP connect to the NodePort; with a healthCheckNodePort
// (externalTrafficPolicy Local), every port, TCP and UDP alike, is checked the way kube-proxy
// expects: GET /healthz on that port of every node, healthy on 200 only, so a node without a
// local endpoint gets no new connections.
func (t *l4) healthCheck(s lbSettings, udp bool) *ir.HealthCheck {
	hc := s.opts.HealthCheck
	if hc.Disabled || (udp && s.healthCheckPort == 0) {
		return nil
	}
	out := &ir.HealthCheck{
		Interval:           ir.Duration(hc.Interval),
		Timeout:            ir.Duration(hc.Timeout),
		UnhealthyThreshold: hc.UnhealthyThreshold,
		HealthyThreshold:   hc.HealthyThreshold,
		NoTrafficInterval:  ir.Duration(hc.NoTrafficInterval),
	}
	if s.healthCheckPort != 0 {
		out.HTTPPath = HealthCheckNodePath
		out.Port = s.healthCheckPort
		out.NoPanic = true
	}
	return out
}

// settings reads the per-LoadBalancer annotations and spec knobs.
func (t *l4) settings(lb *v1alpha1.LoadBalancer) lbSettings {
	s := lbSettings{opts: t.upstreamAnnotations(lb)}
	if svc := t.in.HubServices[lb.Name]; svc != nil && svc.DeletionTimestamp.IsZero() {
		s.families = svc.Spec.IPFamilies
	}
	on, ok := ProxyProtocol(lb)
	s.proxyProtocol = on
	if !ok {
		t.problem(t.ref(lb, ""), ir.SeverityWarning, ReasonInvalidAnnotation, "annotation %s=%q is not understood (use \"v2\"); PROXY protocol is off",
			v1alpha1.AnnotationProxyProtocol, truncate(lb.Annotations[v1alpha1.AnnotationProxyProtocol]))
	}
	switch p := lb.Spec.HealthCheckNodePort; {
	case p == 0:
	case p < 1 || p > 65535:
		t.problem(t.ref(lb, ""), ir.SeverityWarning, ReasonInvalidPort, "healthCheckNodePort %d is out of range 1-65535; nodes are checked as without it", p)
	default:
		s.healthCheckPort = uint32(p)
	}
	t.sourceRanges(lb, &s)
	if p := lb.Spec.Persistence; p != nil {
		switch p.Type {
		case v1alpha1.PersistenceSourceIP:
			s.sourceIP = true
		case "":
		default:
			t.problem(t.ref(lb, ""), ir.SeverityWarning, ReasonUnsupportedPersistence, "persistence type %q is not supported (use %q); persistence is off",
				p.Type, v1alpha1.PersistenceSourceIP)
		}
	}
	return s
}

// sourceRanges reads spec.sourceRanges into s. Every entry must be a CIDR
// (sourcerange.Parse), at most v1alpha1.MaxSourceRanges of them: otherwise nothing of the
// LoadBalancer is served (rangesInvalid, an Error naming the bad entries), because leaving a
// bad entry out could leave no entry at all, and an empty list serves everyone. With ranges
// and a hub Service of type ClusterIP, Envoy never sees the clients' addresses: a Warning
// says so (the ranges are still enforced, against the address Envoy does see), unless the
// hub requires a PROXY protocol header naming the client.
func (t *l4) sourceRanges(lb *v1alpha1.LoadBalancer, s *lbSettings) {
	in := lb.Spec.SourceRanges
	if len(in) == 0 {
		return
	}
	ref := t.ref(lb, "")
	if len(in) > v1alpha1.MaxSourceRanges {
		s.rangesInvalid = true
		t.problem(ref, ir.SeverityError, ReasonInvalidSourceRanges, "spec.sourceRanges has %d entries, at most %d are allowed; no port is served until it is fixed",
			len(in), v1alpha1.MaxSourceRanges)
		return
	}
	var bad []string
	out := make([]string, 0, len(in))
	for _, r := range in {
		c, err := sourcerange.Parse(r)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q", truncate(r)))
			continue
		}
		out = append(out, c)
	}
	if len(bad) > 0 {
		s.rangesInvalid = true
		t.problem(ref, ir.SeverityError, ReasonInvalidSourceRanges, "spec.sourceRanges: %s %s not a CIDR such as 203.0.113.0/24 or 2001:db8::/32; no port is served until it is fixed",
			strings.Join(bad, ", "), isOrAre(len(bad)))
		return
	}
	s.sourceRanges = sourcerange.Sort(out)
	// A PROXY protocol header the hub requires (spec.loadBalancer.proxyProtocol) names the
	// client whatever the hub Service's type.
	if pp := t.opts.LoadBalancerProxyProtocol; pp.Enabled && !pp.Optional {
		return
	}
	if svc := t.in.HubServices[lb.Name]; svc != nil && svc.DeletionTimestamp.IsZero() &&
		(svc.Spec.Type == "" || svc.Spec.Type == corev1.ServiceTypeClusterIP) {
		t.problem(ref, ir.SeverityWarning, ReasonClientAddressUnknown, "the hub Service is of type ClusterIP (spec.type %s): clients reach the load balancer through something in the management cluster, whose address Envoy sees instead of theirs, so spec.sourceRanges is enforced against that address; use type LoadBalancer or NodePort",
			cmp.Or(string(lb.Spec.Type), "ClusterIP"))
	}
}

func isOrAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
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

// endpoints collects every address × matching endpoint port over all endpoint groups of the
// LoadBalancer, sorted and deduplicated.
func (t *l4) endpoints(lb *v1alpha1.LoadBalancer, ps portSpec) []ir.Endpoint {
	var eps clusterEndpoints
	ref := t.ref(lb, ps.label)
	for gi := range lb.Spec.Endpoints {
		g := &lb.Spec.Endpoints[gi]
		port, ok := t.endpointPort(g, ps)
		if !ok {
			t.problem(ref, ir.SeverityWarning, ReasonEndpointPortNotFound, "endpoints[%d] has no port named %q nor a port at index %d; left out", gi, ps.name, ps.index)
			continue
		}
		if port < 1 || port > 65535 {
			t.problem(ref, ir.SeverityWarning, ReasonInvalidPort, "endpoints[%d] port %d is out of range 1-65535; left out", gi, port)
			continue
		}
		e, name, ok := t.expander.group(g)
		if !ok {
			t.problem(t.ref(lb, ""), ir.SeverityWarning, ReasonAddressesNotFound, "endpoints[%d] references Addresses %q, which does not exist in %s", gi, truncate(name), t.in.Tenant)
			continue
		}
		e.report(&t.problems, t.ref(lb, ""))
		eps.add(e, uint32(port))
	}
	list, quota := t.expander.take(&eps, t.opts)
	if quota != "" {
		t.problems.AddMessage(ref, ir.SeverityWarning, ReasonQuotaExceeded, quota)
	}
	return list
}

// manyPorts is the number of ports above which a list of ports is looked up through an index
// rather than scanned (a LoadBalancer may have 128 ports, and each port looks up its
// endpoint port and listener port).
const manyPorts = 8

// endpointPort picks the port of an endpoint group matching a LoadBalancer port: by name when
// the LoadBalancer port is named and the group has a port of that name (the first one), else
// by index.
func (t *l4) endpointPort(g *v1alpha1.LoadBalancerEndpoints, ps portSpec) (int32, bool) {
	if ps.name != "" {
		if len(g.Ports) > manyPorts {
			names, ok := t.portNames[g]
			if !ok {
				names = make(map[string]int32, len(g.Ports))
				for _, p := range g.Ports {
					if _, dup := names[p.Name]; !dup {
						names[p.Name] = p.Port
					}
				}
				if t.portNames == nil {
					t.portNames = map[*v1alpha1.LoadBalancerEndpoints]map[string]int32{}
				}
				t.portNames[g] = names
			}
			if port, ok := names[ps.name]; ok {
				return port, true
			}
		} else {
			for _, p := range g.Ports {
				if p.Name == ps.name {
					return p.Port, true
				}
			}
		}
	}
	if ps.index < len(g.Ports) {
		return g.Ports[ps.index].Port, true
	}
	return 0, false
}

// hubPorts are the listener ports a LoadBalancer's hub Service records: the targetPort of
// each of its ports, by protocol and port number (the hub Service has one port per
// LoadBalancer port, with the same protocol and number). Looked up through an index when
// there are many.
type hubPorts struct {
	ports []corev1.ServicePort
	index map[listenerKey]int32
	// exhausted are the LoadBalancer ports the manager found no listener port for
	// (v1alpha1.AnnotationPortsExhausted).
	exhausted map[listenerKey]bool
}

// indexHubPorts indexes the ports of a hub Service (nil, or one being deleted, records none).
func indexHubPorts(svc *corev1.Service) hubPorts {
	if svc == nil || !svc.DeletionTimestamp.IsZero() {
		return hubPorts{}
	}
	x := hubPorts{ports: svc.Spec.Ports}
	for p := range hubnames.Exhausted(svc) {
		if x.exhausted == nil {
			x.exhausted = map[listenerKey]bool{}
		}
		x.exhausted[listenerKey{p.Protocol, p.Port}] = true
	}
	if len(x.ports) > manyPorts {
		x.index = make(map[listenerKey]int32, len(x.ports))
		for _, sp := range x.ports {
			k := listenerKey{v1alpha1.ProtocolOrTCP(sp.Protocol), sp.Port}
			if _, dup := x.index[k]; !dup {
				x.index[k] = targetPort(sp)
			}
		}
	}
	return x
}

// listenerPort is the listener port recorded for the LoadBalancer port (protocol, port): the
// targetPort of the first hub Service port with that protocol and number, 0 when there is
// none or its targetPort is not a number.
func (x hubPorts) listenerPort(protocol corev1.Protocol, port int32) int32 {
	if x.index != nil {
		return x.index[listenerKey{protocol, port}]
	}
	for _, sp := range x.ports {
		if sp.Port == port && v1alpha1.ProtocolOrTCP(sp.Protocol) == protocol {
			return targetPort(sp)
		}
	}
	return 0
}

// targetPort is a Service port's targetPort when it is a number, else 0.
func targetPort(sp corev1.ServicePort) int32 {
	// A port of the Envoy pods themselves is never a listener's (ir.FleetPorts).
	if sp.TargetPort.Type != intstr.Int || ir.IsFleetPort(uint32(sp.TargetPort.IntVal)) {
		return 0
	}
	return sp.TargetPort.IntVal
}

// parseAddress accepts an IP (v4 or v6, no zone, not unspecified; returned too, unmapped)
// or, when no IP is given, a DNS name (normalized; the returned IP is then invalid).
func parseAddress(a v1alpha1.EndpointAddress) (ir.Endpoint, netip.Addr, bool) {
	if a.IP != "" {
		ip, err := netip.ParseAddr(strings.TrimSpace(a.IP))
		if err != nil || ip.Zone() != "" || ip.Unmap().IsUnspecified() {
			return ir.Endpoint{}, netip.Addr{}, false
		}
		ip = ip.Unmap()
		return ir.Endpoint{Address: ip.String()}, ip, true
	}
	if a.Hostname != "" {
		h := strings.TrimSuffix(strings.ToLower(a.Hostname), ".")
		if len(validation.IsDNS1123Subdomain(h)) > 0 {
			return ir.Endpoint{}, netip.Addr{}, false
		}
		return ir.Endpoint{Address: h}, netip.Addr{}, true
	}
	return ir.Endpoint{}, netip.Addr{}, false
}

// maxQuoted bounds how much of a tenant-written value a problem message quotes: 64 bytes and
// the ellipsis.
const maxQuoted = 64 + len(textcut.Ellipsis)

// truncate shortens a tenant-written value for a message (textcut.Cut to maxQuoted).
func truncate(s string) string { return textcut.Cut(s, maxQuoted, textcut.Ellipsis) }
