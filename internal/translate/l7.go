package translate

import (
	"cmp"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// KindRoute is the kind of hub object Layer 7 problems are reported on: the Route mirroring
// the tenant object. Sections name the part of the tenant object ("listener https",
// "rule 0", "parent 1").
const KindRoute = "Route"

// Reasons shared by the Layer 7 front ends. The Gateway API reasons of route and listener
// conditions are the upstream constants; these are the problems' reasons.
const (
	// ReasonInvalidRoute: the embedded tenant object cannot be read (the Route is skipped).
	ReasonInvalidRoute = "InvalidRoute"
	// ReasonBackendNotFound: a backend Service (or its port) is not among the Route's Services.
	ReasonBackendNotFound = "BackendNotFound"
	// ReasonBackendNoNodePort: the backend Service port has no NodePort to reach it on.
	ReasonBackendNoNodePort = "BackendNoNodePort"
	// ReasonCertificateNotFound: no synced Secret for a referenced certificate.
	ReasonCertificateNotFound = "CertificateNotFound"
	// ReasonInvalidCertificate: the Secret holds no usable certificate and key.
	ReasonInvalidCertificate = "InvalidCertificate"
	// ReasonListenerPortNotAllocated: the hub's listener port range had no port left for the
	// listener (the hub Service lists it in v1alpha1.AnnotationPortsExhausted). A listener
	// port not allocated yet is ReasonPortPending.
	ReasonListenerPortNotAllocated = "ListenerPortNotAllocated"
)

// RouteStatus is what the Layer 7 front ends say of one Route: the status the ccm copies
// back onto the tenant object (status.resources.route.status).
type RouteStatus struct {
	// Kind of the tenant object: Ingress, Gateway, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute
	// or UDPRoute.
	Kind string
	// Generation of the tenant object the status describes: the embedded
	// metadata.generation, or the Route's own generation when the embedded object has none
	// (a KubeLB CE ccm leaves it out).
	Generation int64
	// Status is the tenant object's status in its own shape, as JSON: {"loadBalancer":…}
	// for an Ingress, {"addresses":…,"conditions":…,"listeners":…} for a Gateway,
	// {"parents":[…]} for a route.
	Status json.RawMessage
}

// Result is the output of Run: the tenant's whole IR, the problems of every object, and
// the status of every Route.
type Result struct {
	Config   *ir.Config
	Problems ir.Problems
	// Routes by Route name.
	Routes map[string]RouteStatus
}

// Run translates one tenant: its LoadBalancers (Layer 4) and its Routes (Layer 7: Ingresses,
// Gateways and Gateway API routes) into one IR. It returns an error only when the Options
// themselves are invalid.
func Run(in Input) (Result, error) {
	l4, err := translateL4(in)
	if err != nil {
		return Result{}, err
	}
	return runL7(in, l4.cfg, l4.problems.List(), l4.expander, nil, nil, nil), nil
}

// runL7 runs the Layer 7 front ends after the Layer 4 one gave cfg and problems, with its
// expansions (x), and normalizes the whole. decoded (nil: none) keeps the Routes' decoded
// tenant objects from one run to the next (Incremental), routes (nil: none) what its
// HTTPRoutes and GRPCRoutes did, budget (nil: none) the clusters the health-check budget
// replaced.
func runL7(in Input, cfg *ir.Config, problems ir.Problems, x *expander, decoded *decodeCache, routes *routeMemo, budget *healthBudgetMemo) Result {
	t := newL7(in, cfg, x)
	t.decoded, t.routes = decoded, routes
	if routes != nil {
		t.vhosts = &routes.vhosts
	}
	t.ingresses()
	t.gateways()
	markHTTPFilter(cfg, (*ir.RouteConfig).HasSourceRanges, func(l *ir.Listener, on bool) { l.RouteSourceRanges = on })
	markHTTPFilter(cfg, (*ir.RouteConfig).HasBasicAuth, func(l *ir.Listener, on bool) { l.BasicAuth = on })
	markHTTPFilter(cfg, (*ir.RouteConfig).HasAPIKeyAuth, func(l *ir.Listener, on bool) { l.APIKeyAuth = on })
	markHTTPFilter(cfg, (*ir.RouteConfig).HasRateLimit, func(l *ir.Listener, on bool) { l.RateLimit = on })
	t.markGlobalRateLimit(cfg)
	markJWT(cfg, t.jwtProviders)
	markListeners(cfg, t.extAuths.made, (*ir.RouteConfig).ExtAuthNames, func(l *ir.Listener, s []ir.ExtAuthService) { l.ExtAuth = s })
	markListeners(cfg, t.oidcs.made, (*ir.RouteConfig).OIDCNames, func(l *ir.Listener, s []ir.OIDC) { l.OIDC = s })
	for _, c := range ir.Compressors { // in their order: the listeners' filters are in it
		markHTTPFilter(cfg, func(rc *ir.RouteConfig) bool { return rc.HasCompressor(c) }, func(l *ir.Listener, on bool) {
			if on {
				l.Compressors = append(l.Compressors, c)
			}
		})
	}
	cfg.Normalize()
	all := append(problems, t.problems.List()...)
	all = append(all, budgetHealthChecks(cfg, t.opts, budget)...)
	all.Sort()
	return Result{Config: cfg, Problems: all, Routes: t.statuses}
}

// markHTTPFilter sets, with set, on every HTTP, HTTPS and HTTP3 listener whether a route
// configuration it serves has what has tells: the HTTP filter serving it (RBAC for source
// ranges, basic_auth, local_ratelimit) must then run in the listener's connection manager,
// for whichever front end made the routes.
func markHTTPFilter(cfg *ir.Config, has func(*ir.RouteConfig) bool, set func(*ir.Listener, bool)) {
	with := map[string]bool{}
	for _, rc := range cfg.RouteConfigs {
		if has(rc) {
			with[rc.Name] = true
		}
	}
	if len(with) == 0 {
		return
	}
	for _, l := range cfg.Listeners {
		names, ok := routeConfigsOf(l)
		if !ok {
			continue
		}
		needs := false
		for _, name := range names {
			needs = needs || with[name]
		}
		set(l, needs)
	}
}

// routeConfigsOf are the names of the route configurations an HTTP, HTTPS or HTTP3 listener
// serves (its own and its TLS servers'); false for a listener of another protocol.
func routeConfigsOf(l *ir.Listener) ([]string, bool) {
	if !l.Protocol.ServesHTTP() {
		return nil, false
	}
	names := []string{l.RouteConfig}
	for _, srv := range l.TLS {
		names = append(names, srv.RouteConfig)
	}
	return names, true
}

// l7 is the state shared by the Layer 7 front ends while they translate one tenant.
type l7 struct {
	in       Input
	opts     Options
	cfg      *ir.Config
	problems ir.ProblemSet
	expander *expander
	statuses map[string]RouteStatus
	// byKind holds the Routes by the kind of their tenant object, oldest first (those of
	// kinds kubelb does not serve are left out).
	byKind map[routekind.Kind][]*v1alpha1.Route
	// clusters and secrets already in cfg, by name; clusters is made when first needed
	// (clusterIndex): a tenant of LoadBalancers alone never needs it.
	clusters map[string]*ir.Cluster
	secrets  map[string]*ir.Secret
	// Indexes of the input, made when first needed: the Services of Routes with many
	// (service), hub Secrets by origin, hub Services of Routes by Route name.
	services map[*v1alpha1.Route]serviceIndex
	// validServices: the backend Service names ("namespace", "name") found valid
	// (checkServiceName).
	validServices map[[2]string]struct{}
	// traffic and security: the BackendTrafficPolicies and SecurityPolicies of Route
	// contexts, checked once (policies.go).
	traffic  policyChecks[v1alpha1.BackendTraffic, trafficpolicy.Settings]
	security policyChecks[v1alpha1.Security, trafficpolicy.SecuritySettings]
	// client: the ClientTrafficPolicies of Gateways' Route contexts, checked once
	// (clienttraffic.go).
	client policyChecks[v1alpha1.ClientTraffic, trafficpolicy.ClientSettings]
	// basicAuths: the users of basic authentications by hub Secret origin and key, checked
	// once (basicauth.go).
	basicAuths map[basicAuthKey]basicAuthResult
	// jwts: the requirement of each SecurityPolicy with jwt by "namespace/name" (by
	// "<Route>/namespace/name" when it fetches keys), jwtProviders their providers by name,
	// remoteJWKS how many of them fetch their keys (jwt.go).
	jwts         listenerFilters[ir.JWT]
	jwtProviders map[string]*ir.JWTProvider
	remoteJWKS   int
	// trafficIR and authorizationIR: what the routes under a checked policy share, made once
	// per policy (backendtraffic.go, security.go).
	trafficIR       map[*trafficpolicy.Settings]*backendTraffic
	authorizationIR map[*trafficpolicy.Authorization]*ir.Authorization
	apiKeyIR        map[*trafficpolicy.APIKeyAuth]apiKeyResult
	// extAuths: the external authorization services (extauth.go); oidcs: the OIDC logins
	// (oidc.go).
	extAuths listenerFilters[ir.ExtAuthService]
	oidcs    listenerFilters[ir.OIDC]
	// addressWarned: the Gateways whose hub Service loses client addresses, warned of once
	// for their SecurityPolicies (security.go).
	addressWarned  map[*gateway]bool
	secretIndex    map[nsName]*corev1.Secret
	routeServices  map[string]*corev1.Service
	ingressService *corev1.Service
	// bound indexes cfg.Listeners[:boundIndexed] by address, port and transport (boundBy).
	bound        map[boundKey]string
	boundIndexed int
	// caChecked holds why each PEM bundle of backend CA certificates seen cannot be used
	// ("" when it can).
	caChecked map[string]string
	// decoded: the decoded tenant objects of an earlier run (Incremental); nil for none.
	decoded *decodeCache
	// routes: what HTTPRoutes and GRPCRoutes did in an earlier run (Incremental); nil for
	// none. rec records the route being translated (nil: none).
	routes *routeMemo
	rec    *routeRecord
	// vhosts: the Gateways' virtual hosts of an earlier run by their candidates
	// (Incremental); nil for none.
	vhosts *vhostMemo
}

func newL7(in Input, cfg *ir.Config, x *expander) *l7 {
	t := &l7{
		in:           in,
		opts:         in.Options.withDefaults(),
		cfg:          cfg,
		expander:     x,
		statuses:     map[string]RouteStatus{},
		byKind:       map[routekind.Kind][]*v1alpha1.Route{},
		secrets:      map[string]*ir.Secret{},
		services:     map[*v1alpha1.Route]serviceIndex{},
		traffic:      trafficChecks(validRateLimitService(in.Options.RateLimitService)),
		security:     securityChecks(),
		client:       clientChecks(),
		jwts:         listenerFilters[ir.JWT]{max: maxJWTPolicies},
		jwtProviders: map[string]*ir.JWTProvider{},
		extAuths:     listenerFilters[ir.ExtAuthService]{max: maxExtAuthServices},
		oidcs:        listenerFilters[ir.OIDC]{max: maxOIDCLogins},
	}
	routes := make([]*v1alpha1.Route, 0, len(in.Routes))
	for i := range in.Routes {
		routes = append(routes, &in.Routes[i])
	}
	slices.SortStableFunc(routes, func(a, b *v1alpha1.Route) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	for _, r := range routes {
		if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
			t.problems.Add(t.ref(r, ""), ir.SeverityError, ReasonInvalidName, "name %q cannot be used in Envoy resource names: %s", truncate(r.Name), strings.Join(errs, "; "))
			continue
		}
		if kind, _ := routekind.Of(r); kind != routekind.Unsupported {
			t.byKind[kind] = append(t.byKind[kind], r)
		}
	}
	return t
}

// clusterIndex returns the clusters of cfg by name, indexing them on first use.
func (t *l7) clusterIndex() map[string]*ir.Cluster {
	if t.clusters == nil {
		t.clusters = make(map[string]*ir.Cluster, len(t.cfg.Clusters))
		for _, c := range t.cfg.Clusters {
			t.clusters[c.Name] = c
		}
	}
	return t.clusters
}

// ref names a Route (and a section of its tenant object) in problems and IR owners.
func (t *l7) ref(r *v1alpha1.Route, section string) ir.ObjectRef {
	return ir.ObjectRef{Kind: KindRoute, Namespace: t.in.Tenant, Name: r.Name, Section: section}
}

// decode converts the Route's embedded tenant object into out (a typed object such as
// *networkingv1.Ingress). A failure is a problem on the Route, which is then skipped.
func (t *l7) decode(r *v1alpha1.Route, out any) bool {
	src := r.Spec.Source.Kubernetes
	if src == nil || src.Route.Object == nil {
		t.problems.Add(t.ref(r, ""), ir.SeverityError, ReasonInvalidRoute, "spec.source.kubernetes.resource is empty")
		return false
	}
	if t.decoded.get(r, out) {
		return true
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(src.Route.Object, out); err != nil {
		t.problems.Add(t.ref(r, ""), ir.SeverityError, ReasonInvalidRoute, "spec.source.kubernetes.resource cannot be read as %s: %s",
			src.Route.GetKind(), truncate(err.Error()))
		return false
	}
	t.decoded.put(r, out)
	return true
}

// generation is the tenant object's generation the status describes.
func (t *l7) generation(r *v1alpha1.Route) int64 {
	if src := r.Spec.Source.Kubernetes; src != nil {
		if g := src.Route.GetGeneration(); g > 0 {
			return g
		}
	}
	return r.Generation
}

// setStatus records the tenant object's status for a Route.
func (t *l7) setStatus(r *v1alpha1.Route, kind string, status any) {
	raw, err := json.Marshal(status)
	if err != nil { // the statuses are plain API types; this cannot happen
		panic(fmt.Sprintf("marshalling the status of Route %s: %v", r.Name, err))
	}
	t.statuses[r.Name] = RouteStatus{Kind: kind, Generation: t.generation(r), Status: raw}
}

// backend is a resolved backend of a Route: the cluster carrying it.
type backend struct {
	cluster string
}

// backend resolves a backend Service port of a Route (namespace, name and port as written in
// the tenant object) to a cluster of the tenant nodes' addresses × the Service port's
// NodePort, adding the cluster once. The Service is looked up among the Route's embedded
// Services by name, or by the origin-name label of a "<name>-nodeport" twin (KubeLB CE and
// kubelb mirror ClusterIP backends that way). http2 forces an HTTP/2 upstream (gRPC);
// otherwise the port's appProtocol decides (kubernetes.io/h2c, grpc, h2c → HTTP/2). The
// cluster speaks TLS when the Route's context has a BackendTLSPolicy for the port
// (backendTLS), presenting clientCert (an IR Secret, a Gateway's spec.tls.backend; "" for
// none) as its client certificate. On failure it returns the problem's reason and message (ReasonInvalidBackendTLS
// when that TLS cannot be used: the backend must answer with an error, never plain text);
// the caller reports it on the right section with the severity it needs.
func (t *l7) backend(r *v1alpha1.Route, owner ir.ObjectRef, namespace, name string, port int32, http2 bool, clientCert string) (backend, string, string) {
	return t.backendWith(r, owner, namespace, name, port, http2, clientCert, nil)
}

// backendWith is backend under a BackendTrafficPolicy (nil: none): a policy that changes
// clusters gives the backend a cluster of its own (trafficClusterName).
func (t *l7) backendWith(r *v1alpha1.Route, owner ir.ObjectRef, namespace, name string, port int32, http2 bool, clientCert string, traffic *backendTraffic) (backend, string, string) {
	if reason, msg := t.checkServiceName(namespace, name); reason != "" {
		return backend{}, reason, msg
	}
	svc := t.service(r, namespace, name)
	if svc == nil {
		return backend{}, ReasonBackendNotFound, fmt.Sprintf("Service %s/%s is not among the Services the route carries", truncate(namespace), truncate(name))
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Port == port && v1alpha1.ProtocolOrTCP(p.Protocol) == corev1.ProtocolTCP {
			sp = p
			break
		}
	}
	if sp == nil {
		return backend{}, ReasonBackendNotFound, fmt.Sprintf("Service %s/%s has no TCP port %d", truncate(namespace), truncate(name), port)
	}
	if sp.NodePort < 1 || sp.NodePort > 65535 {
		return backend{}, ReasonBackendNoNodePort, fmt.Sprintf("port %d of Service %s/%s has no NodePort; the hub reaches tenant backends only on NodePorts", port, truncate(namespace), truncate(name))
	}
	proto := ir.UpstreamHTTP1
	if http2 || isHTTP2(sp) {
		proto = ir.UpstreamHTTP2
	}
	upTLS, msg := t.backendTLS(r, namespace, name, port)
	if msg != "" {
		return backend{}, ReasonInvalidBackendTLS, msg
	}
	clusterName := backendClusterName(r.Name, namespace, name, port, "")
	if proto == ir.UpstreamHTTP2 {
		clusterName += "/h2"
	}
	if upTLS != nil && clientCert != "" {
		// One cluster per client certificate: a route attached to two Gateways reaches the
		// backend with each Gateway's own.
		upTLS.ClientCertificate = clientCert
		clusterName += "/client/" + clientCert
	}
	if !traffic.clusterSettings() {
		traffic = nil
	}
	if traffic != nil {
		clusterName = trafficClusterName(clusterName, traffic)
	}
	if c, ok := t.clusterIndex()[clusterName]; ok {
		if !t.rec.added(t, c) {
			t.rec.taint()
		}
		c.Owners = append(c.Owners, owner)
		return backend{cluster: clusterName}, "", ""
	}
	c := &ir.Cluster{
		Name:           clusterName,
		StatName:       strings.ReplaceAll(fmt.Sprintf("%s/%s/%d", namespace, name, port), ".", "_"),
		Protocol:       proto,
		Owners:         []ir.ObjectRef{owner},
		Endpoints:      t.endpoints(r, uint32(sp.NodePort)),
		ConnectTimeout: ir.Duration(t.opts.ConnectTimeout),
		MaxConnections: t.opts.MaxConnectionsPerCluster,
		TLS:            upTLS,
	}
	if traffic != nil {
		t.applyCluster(c, traffic, owner)
	}
	if len(c.Endpoints) == 0 {
		t.problems.Add(owner, ir.SeverityWarning, ReasonNoEndpoints, "the backend %s/%s:%d has no usable endpoints; requests fail until the tenant has Ready nodes with valid addresses",
			truncate(namespace), truncate(name), port)
	}
	t.clusters[clusterName] = c
	t.cfg.Clusters = append(t.cfg.Clusters, c)
	return backend{cluster: clusterName}, "", ""
}

// Envoy resource names made from tenant names. Kubernetes names never hold "/" (namespaces
// and Services are DNS-1123 labels, Routes and Secrets DNS-1123 subdomains), so joining them
// with "/" keeps every name unambiguous: two different (namespace, name) pairs never give one
// name, and no Layer 7 name equals a Layer 4 one (those hold no "/"). A Gateway's names start
// with "gateway/", which no Ingress name does. ":" is avoided: the status controller splits
// Envoy's rejection messages on it to find the resources named. Names of one kind of Envoy
// resource:
//   - listeners: "<lb>-<tcp|udp>-<port>" (Layer 4), "ingress-http", "ingress-https",
//     "gateway/<route>/<tcp|udp>-<port>" (a Gateway's port);
//   - clusters: "<lb>-<tcp|udp>-<port>" (Layer 4), "<lb>-http-<port>" (a LoadBalancer
//     hostname), "<route>/<ns>/<svc>/<port>" (an HTTP backend; "/h2" appended for HTTP/2,
//     then "/client/<secret>" for a TLS backend given a Gateway's client certificate;
//     "/tcp" or "/udp" for a stream backend);
//   - secrets: "cert/<ns>/<name>" (a tenant TLS Secret), "hostname-<lb>";
//   - route configurations: "ingress-http", "ingress-https-<secret>",
//     "gateway/<route>/http-<port>", "gateway/<route>/https-<port>/<listener>".

// backendClusterName is the cluster of a Route's backend Service port; suffix ("", "tcp",
// "udp") tells stream backends apart.
func backendClusterName(route, namespace, name string, port int32, suffix string) string {
	s := fmt.Sprintf("%s/%s/%s/%d", route, namespace, name, port)
	if suffix != "" {
		s += "/" + suffix
	}
	return s
}

// certSecretName is the IR secret of a tenant TLS Secret.
func certSecretName(namespace, name string) string {
	return "cert/" + namespace + "/" + name
}

// checkObjectName checks a namespace (a DNS-1123 label) and name (a DNS-1123 subdomain) a
// tenant object refers to before they become part of an Envoy resource name; on failure it
// returns ReasonBackendNotFound and a message.
func checkObjectName(kind, namespace, name string) (string, string) {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return ReasonBackendNotFound, fmt.Sprintf("%s %s/%s: the namespace is not a DNS label: %s", kind, truncate(namespace), truncate(name), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return ReasonBackendNotFound, fmt.Sprintf("%s %s/%s: the name is not a DNS subdomain: %s", kind, truncate(namespace), truncate(name), strings.Join(errs, "; "))
	}
	return "", ""
}

// checkServiceName is checkObjectName for a backend Service, remembering the names found
// valid for the run: thousands of routes name the same few Services.
func (t *l7) checkServiceName(namespace, name string) (string, string) {
	key := [2]string{namespace, name}
	if _, ok := t.validServices[key]; ok {
		return "", ""
	}
	reason, msg := checkObjectName("Service", namespace, name)
	if reason == "" {
		if t.validServices == nil {
			t.validServices = map[[2]string]struct{}{}
		}
		t.validServices[key] = struct{}{}
	}
	return reason, msg
}

// isHTTP2 reports whether a Service port speaks cleartext HTTP/2.
func isHTTP2(p *corev1.ServicePort) bool {
	ap := ""
	if p.AppProtocol != nil {
		ap = strings.ToLower(*p.AppProtocol)
	}
	switch ap {
	case "kubernetes.io/h2c", "h2c", "grpc":
		return true
	}
	return ap == "" && (p.Name == "grpc" || strings.HasPrefix(p.Name, "grpc-") || p.Name == "h2c" || strings.HasPrefix(p.Name, "h2c-"))
}

// service finds a backend Service among the Route's embedded Services: by namespace and
// name (the first), or else by the origin labels of a NodePort twin (the first). A Route may
// carry 512 Services and reference them thousands of times: an index per Route answers
// when there are many.
func (t *l7) service(r *v1alpha1.Route, namespace, name string) *corev1.Service {
	src := r.Spec.Source.Kubernetes
	if src == nil {
		return nil
	}
	if len(src.Services) > manyServices {
		x, ok := t.services[r]
		if !ok {
			x = indexServices(src)
			t.services[r] = x
		}
		key := nsName{namespace, name}
		if s, ok := x.byName[key]; ok {
			return s
		}
		return x.twins[key]
	}
	var twin *corev1.Service
	for i := range src.Services {
		s := &src.Services[i].Service
		ns := s.Namespace
		if ns == "" {
			ns = src.Route.GetNamespace()
		}
		if ns != namespace {
			continue
		}
		if s.Name == name {
			return s
		}
		if s.Labels[v1alpha1.LabelOriginName] == name && twin == nil {
			twin = s
		}
	}
	return twin
}

// manyServices is the number of a Route's Services above which they are indexed.
const manyServices = 8

type nsName struct{ namespace, name string }

// serviceIndex finds a Route's Services by namespace and name, and NodePort twins by
// namespace and origin name.
type serviceIndex struct {
	byName, twins map[nsName]*corev1.Service
}

func indexServices(src *v1alpha1.KubernetesSource) serviceIndex {
	x := serviceIndex{byName: make(map[nsName]*corev1.Service, len(src.Services)), twins: map[nsName]*corev1.Service{}}
	for i := range src.Services {
		s := &src.Services[i].Service
		ns := s.Namespace
		if ns == "" {
			ns = src.Route.GetNamespace()
		}
		if _, dup := x.byName[nsName{ns, s.Name}]; !dup {
			x.byName[nsName{ns, s.Name}] = s
		}
		if origin, ok := s.Labels[v1alpha1.LabelOriginName]; ok {
			if _, dup := x.twins[nsName{ns, origin}]; !dup {
				x.twins[nsName{ns, origin}] = s
			}
		}
	}
	return x
}

// endpoints are the addresses of the Route's endpoint groups (normally Addresses/default) ×
// port, filtered by the endpoint policy.
func (t *l7) endpoints(r *v1alpha1.Route, port uint32) []ir.Endpoint {
	groups := r.Spec.Endpoints
	if len(groups) == 0 { // a route always goes to the tenant's nodes
		groups = []v1alpha1.LoadBalancerEndpoints{{AddressesReference: &corev1.ObjectReference{Name: v1alpha1.DefaultAddressesName}}}
	}
	var eps clusterEndpoints
	for gi := range groups {
		e, name, ok := t.expander.group(&groups[gi])
		if !ok {
			t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonAddressesNotFound, "endpoints[%d] references Addresses %q, which does not exist in %s", gi, truncate(name), t.in.Tenant)
			continue
		}
		e.report(&t.problems, t.ref(r, ""))
		eps.add(e, port)
	}
	list, quota := t.expander.take(&eps, t.opts)
	if quota != "" {
		t.rec.taint() // the tenant's endpoints are cut: which routes get them depends on the others
		t.problems.AddMessage(t.ref(r, ""), ir.SeverityWarning, ReasonQuotaExceeded, quota)
	}
	return list
}

// certificate resolves a tenant TLS Secret (namespace/name as written in the tenant object)
// to an IR secret, added once: the hub Secret made from its SyncSecret, found by the origin
// labels. On failure it returns the problem's reason and message.
func (t *l7) certificate(owner ir.ObjectRef, namespace, name string) (string, string, string) {
	if reason, msg := checkObjectName("Secret", namespace, name); reason != "" {
		return "", ReasonCertificateNotFound, msg
	}
	irName := certSecretName(namespace, name)
	if s, ok := t.secrets[irName]; ok {
		s.Owners = append(s.Owners, owner)
		return irName, "", ""
	}
	found := t.secretByOrigin()[nsName{namespace, name}]
	if found == nil {
		return "", ReasonCertificateNotFound, fmt.Sprintf("Secret %s/%s has not reached the hub (the ccm mirrors Secrets referenced by served Ingresses and Gateways)", truncate(namespace), truncate(name))
	}
	crt, key := found.Data[corev1.TLSCertKey], found.Data[corev1.TLSPrivateKeyKey]
	if _, err := tls.X509KeyPair(crt, key); err != nil {
		return "", ReasonInvalidCertificate, fmt.Sprintf("Secret %s/%s does not hold a usable certificate and key (tls.crt, tls.key): %s", truncate(namespace), truncate(name), truncate(err.Error()))
	}
	s := &ir.Secret{Name: irName, Owners: []ir.ObjectRef{owner}, CertChain: crt, PrivateKey: key}
	t.secrets[irName] = s
	t.cfg.Secrets = append(t.cfg.Secrets, s)
	return irName, "", ""
}

// secretByOrigin indexes the hub Secrets by the namespace and name of their tenant Secret
// (the origin labels), once per translation; of two for one tenant Secret, the newer.
func (t *l7) secretByOrigin() map[nsName]*corev1.Secret {
	if t.secretIndex != nil {
		return t.secretIndex
	}
	t.secretIndex = make(map[nsName]*corev1.Secret, len(t.in.Secrets))
	for i := range t.in.Secrets {
		s := &t.in.Secrets[i]
		ns, name := s.Labels[v1alpha1.LabelOriginNamespace], s.Labels[v1alpha1.LabelOriginName]
		key := nsName{ns, name}
		if found := t.secretIndex[key]; found == nil || s.CreationTimestamp.After(found.CreationTimestamp.Time) {
			t.secretIndex[key] = s
		}
	}
	return t.secretIndex
}

// routeService finds the hub Service the Route controller made: the Gateway Route's
// (LabelRouteName; the first) or, with routeName "", the tenant's shared Ingress Service.
// The Services are indexed once per translation.
func (t *l7) routeService(routeName string) *corev1.Service {
	if t.routeServices == nil {
		t.routeServices = make(map[string]*corev1.Service, len(t.in.RouteServices))
		for i := range t.in.RouteServices {
			s := &t.in.RouteServices[i]
			if s.Labels[v1alpha1.LabelIngressService] == "true" && s.Name == v1alpha1.IngressServiceName && t.ingressService == nil {
				t.ingressService = s
			}
			if key := s.Labels[v1alpha1.LabelRouteName]; key != "" {
				if _, dup := t.routeServices[key]; !dup {
					t.routeServices[key] = s
				}
			}
		}
	}
	if routeName == "" {
		return t.ingressService
	}
	return t.routeServices[routeName]
}

// listenerPort is the Envoy listener port the Route controller allocated for a tenant-facing
// port of a hub Service (its targetPort); 0 when there is none yet.
// exhaustedPort tells whether the manager found no listener port left in the hub's range for
// port of the hub Service svc (hubnames.Exhausted): a listener it is missing is then refused
// (ListenerPortNotAllocated), not pending (PortPending: the manager has not allocated it yet).
func exhaustedPort(svc *corev1.Service, port int32, proto corev1.Protocol) bool {
	return hubnames.Exhausted(svc)[hubnames.ServicePortRef{Protocol: proto, Port: port}]
}

func listenerPort(svc *corev1.Service, port int32, proto corev1.Protocol) uint32 {
	if svc == nil {
		return 0
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == port && v1alpha1.ProtocolOrTCP(p.Protocol) == proto {
			// A port of the Envoy pods themselves is never a listener's (ir.FleetPorts).
			if v := p.TargetPort.IntValue(); v > 0 && v <= 65535 && !ir.IsFleetPort(uint32(v)) {
				return uint32(v)
			}
		}
	}
	return 0
}
