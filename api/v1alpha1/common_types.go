package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names, labels and annotations of the tenant ↔ hub contract.
const (
	// CleanupFinalizer is set by the ccm on the tenant Services and Secrets it mirrors, and by
	// the manager on Tenants, whose removal needs cleanup. LoadBalancers and Routes no longer
	// carry it (the manager cleans up after them without); on those an earlier version set,
	// the manager still removes it.
	CleanupFinalizer = "kubelb.k8c.io/cleanup"

	// AnnotationPrefix is the prefix of kubelb's annotations on tenant objects.
	AnnotationPrefix = "kubelb.k8c.io/"

	LabelOriginName         = "kubelb.k8c.io/origin-name"
	LabelOriginNamespace    = "kubelb.k8c.io/origin-ns"
	LabelOriginResourceKind = "kubelb.k8c.io/origin-resource-kind"
	LabelTenantName         = "kubelb.k8c.io/tenant"
	LabelManagedBy          = "kubelb.k8c.io/managed-by"
	LabelManagedByValue     = "kubelb"
	LabelLoadBalancerName   = "kubelb.k8c.io/lb-name"
	LabelLoadBalancerNS     = "kubelb.k8c.io/lb-namespace"

	// LabelRouteName is set by the manager on the hub Service it made for a Gateway's Route;
	// the value is the Route's name (the tenant Gateway's UID).
	LabelRouteName = "kubelb.k8c.io/route-name"
	// LabelIngressService ("true") marks the one hub Service per tenant that carries the
	// tenant's Ingresses (and LoadBalancer hostnames) on ports 80 and 443.
	LabelIngressService = "kubelb.k8c.io/ingress"
	// IngressServiceName is the name of that Service in the tenant namespace.
	IngressServiceName = "kubelb-ingress"
	// GatewayServicePrefix prefixes a Gateway Route's name to form its hub Service name.
	GatewayServicePrefix = "gateway-"
	// AnnotationPortsExhausted is set by the manager on a LoadBalancer's hub Service when some
	// ports of the LoadBalancer got no listener port because the hub's range is exhausted:
	// "<protocol>/<port>" of each, comma-separated, sorted. A port the hub Service has no
	// port for and that this does not list is not allocated yet (pending), not refused.
	AnnotationPortsExhausted = "kubelb.k8c.io/ports-exhausted"

	// AnnotationProxyProtocol on a tenant Service asks for PROXY protocol v2 towards the tenant.
	AnnotationProxyProtocol = "kubelb.k8c.io/proxy-protocol"

	// Annotations on a tenant Service that override the tenant's spec.upstream for its
	// LoadBalancer (additions; ignorable). Durations are Go durations ("5s", "1m30s").
	AnnotationConnectTimeout                = "kubelb.k8c.io/connect-timeout"
	AnnotationMaxConnections                = "kubelb.k8c.io/max-connections"
	AnnotationUDPIdleTimeout                = "kubelb.k8c.io/udp-idle-timeout"
	AnnotationHealthCheckDisable            = "kubelb.k8c.io/health-check-disable"
	AnnotationHealthCheckInterval           = "kubelb.k8c.io/health-check-interval"
	AnnotationHealthCheckTimeout            = "kubelb.k8c.io/health-check-timeout"
	AnnotationHealthCheckUnhealthyThreshold = "kubelb.k8c.io/health-check-unhealthy-threshold"
	AnnotationHealthCheckHealthyThreshold   = "kubelb.k8c.io/health-check-healthy-threshold"
	AnnotationHealthCheckNoTrafficInterval  = "kubelb.k8c.io/health-check-no-traffic-interval"
	// AnnotationIPMode on a tenant Service chooses the ipMode ("VIP" or "Proxy") of its
	// status.loadBalancer.ingress, overriding spec.loadBalancer.ipMode of the Tenant and
	// Config (an addition; ignorable).
	AnnotationIPMode = "kubelb.k8c.io/ip-mode"

	// Annotations on a tenant Ingress, HTTPRoute or GRPCRoute that override the tenant's
	// spec.http for its routes (additions; ignorable; the ccm copies the tenant object's
	// kubelb.k8c.io/ annotations into the Route it embeds). AnnotationRequestTimeout bounds
	// each request ("0s": none; an HTTPRoute rule's timeouts.request wins);
	// AnnotationStreamIdleTimeout ends requests idle for that long, at most the tenant's
	// spec.http.streamIdleTimeout.
	AnnotationRequestTimeout    = "kubelb.k8c.io/request-timeout"
	AnnotationStreamIdleTimeout = "kubelb.k8c.io/stream-idle-timeout"
	// AnnotationSSLRedirect on a tenant Ingress ("true" or "false"; an addition, ignorable)
	// overrides the tenant's spec.ingress.sslRedirect for it: "true" answers requests over HTTP
	// for its TLS hosts served over HTTPS with a 301 to https.
	AnnotationSSLRedirect = "kubelb.k8c.io/ssl-redirect"

	// DefaultClass is the load balancer, ingress and gateway class kubelb answers to.
	DefaultClass = "kubelb"

	// DefaultAddressesName is the name of the one Addresses object per tenant namespace.
	DefaultAddressesName = "default"
	// DefaultConfigName is the name of the Config object in the manager's namespace.
	DefaultConfigName = "default"
	// TenantNamespacePrefix prefixes a Tenant's name to form its namespace on the hub.
	TenantNamespacePrefix = "tenant-"
	// CCMKubeconfigSecretName is the Secret holding the ccm's kubeconfig for the hub.
	CCMKubeconfigSecretName = "kubelb-ccm-kubeconfig"
	// CCMKubeconfigSecretKey is the key of the kubeconfig in that Secret.
	CCMKubeconfigSecretKey = "kubelb"
)

// LoadBalancerEndpoints is a group of addresses and the ports they serve.
type LoadBalancerEndpoints struct {
	// Name of the endpoint group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// Addresses of the endpoints.
	// +optional
	// At most 1000 (an EndpointSlice's limit).
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	Addresses []EndpointAddress `json:"addresses,omitempty"`

	// AddressesReference points at an Addresses object (normally "default") whose addresses
	// are used instead of Addresses.
	// +optional
	AddressesReference *corev1.ObjectReference `json:"addressesReference,omitempty"`

	// Ports served by every endpoint address.
	// +optional
	// At most 128, as a LoadBalancer's ports.
	// +kubebuilder:validation:MaxItems=128
	// +listType=atomic
	Ports []EndpointPort `json:"ports,omitempty"`
}

// EndpointAddress is one address of an endpoint: either an IP or a hostname.
type EndpointAddress struct {
	// IP address of the endpoint.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	IP string `json:"ip,omitempty"`

	// Hostname of the endpoint.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Hostname string `json:"hostname,omitempty"`
}

// EndpointPort is a port served by endpoint addresses.
type EndpointPort struct {
	// Name of the port.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// Port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// Protocol of the port: TCP or UDP.
	// +kubebuilder:validation:Enum=TCP;UDP
	// +kubebuilder:default=TCP
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// AnnotationSettings controls which annotations flow from tenant objects onto hub objects.
type AnnotationSettings struct {
	// PropagatedAnnotations lists annotations (key, and optionally the only value allowed)
	// that are copied from tenant objects onto the hub objects made for them.
	// +optional
	// At most 256 entries.
	// +kubebuilder:validation:MaxProperties=256
	PropagatedAnnotations *map[string]string `json:"propagatedAnnotations,omitempty"`

	// PropagateAllAnnotations copies every annotation but the denied ones.
	// +optional
	PropagateAllAnnotations *bool `json:"propagateAllAnnotations,omitempty"`

	// DeniedAnnotations are never copied.
	// +optional
	// At most 256 annotation keys.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=317
	// +listType=atomic
	DeniedAnnotations []string `json:"deniedAnnotations,omitempty"`

	// AllowedSteeringAnnotations lets annotations that steer a hub load balancer or DNS
	// (MetalLB, kube-vip, external-dns, Cilium LB-IPAM, PureLB, cloud providers' Service
	// annotations: the built-in list in docs/tenants.md) be copied by
	// propagateAllAnnotations: each entry is a key, or a prefix ending in "/" or ".".
	// Without an entry, such annotations are never copied from a tenant object by
	// propagateAllAnnotations (propagatedAnnotations and defaultAnnotations, which the
	// platform team writes, still pass). A Tenant's list replaces the Config's. An addition
	// to the KubeLB CE API; ignorable.
	// +optional
	// At most 64 entries.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=317
	// +listType=atomic
	AllowedSteeringAnnotations []string `json:"allowedSteeringAnnotations,omitempty"`

	// DefaultAnnotations are set on every hub object of the given kind ("service": a
	// LoadBalancer's hub Service, "ingress": the shared Ingress hub Service, "gateway": a
	// Gateway's hub Service, or "all"). KubeLB CE's route kinds ("httproute", "grpcroute",
	// "tcproute", "udproute", "tlsroute") are accepted and have no hub object to land on:
	// routes are translated into Envoy, not into hub objects. Any other key (a typo such as
	// "services") is rejected: the enum of AnnotatedResource does not reach map keys, so a
	// CEL rule checks them.
	// +optional
	// At most 16 kinds, each with at most 256 annotations.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['all', 'service', 'ingress', 'gateway', 'httproute', 'grpcroute', 'tcproute', 'udproute', 'tlsroute'])",message="defaultAnnotations keys must be one of: all, service, ingress, gateway, httproute, grpcroute, tcproute, udproute, tlsroute"
	DefaultAnnotations map[AnnotatedResource]Annotations `json:"defaultAnnotations,omitempty"`
}

// AnnotatedResource names a kind of hub object that default annotations apply to.
// It has KubeLB CE's values. The enum does not reach the keys of defaultAnnotations (a CRD
// cannot restrict map keys by an enum); a CEL rule on that field (AnnotationSettings)
// rejects other keys.
// +kubebuilder:validation:Enum=all;service;ingress;gateway;httproute;grpcroute;tcproute;udproute;tlsroute
type AnnotatedResource string

// Annotations is a set of annotations.
// +kubebuilder:validation:MaxProperties=256
type Annotations map[string]string

// Kinds of objects that default annotations apply to.
const (
	AnnotatedResourceAll       AnnotatedResource = "all"
	AnnotatedResourceService   AnnotatedResource = "service"
	AnnotatedResourceIngress   AnnotatedResource = "ingress"
	AnnotatedResourceGateway   AnnotatedResource = "gateway"
	AnnotatedResourceHTTPRoute AnnotatedResource = "httproute"
	AnnotatedResourceGRPCRoute AnnotatedResource = "grpcroute"
	AnnotatedResourceTCPRoute  AnnotatedResource = "tcproute"
	AnnotatedResourceUDPRoute  AnnotatedResource = "udproute"
	AnnotatedResourceTLSRoute  AnnotatedResource = "tlsroute"
)

// Version describes a build of a kubelb component.
type Version struct {
	// +optional
	// +kubebuilder:validation:MaxLength=256
	GitVersion string `json:"gitVersion,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	GitCommit string `json:"gitCommit,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	BuildDate string `json:"buildDate,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Edition string `json:"edition,omitempty"`
}

// LoadBalancerSettings are the tenant-wide settings of layer-4 load balancing.
type LoadBalancerSettings struct {
	// Class is the loadBalancerClass of the hub Services that expose the Envoy fleet.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Class *string `json:"class,omitempty"`

	// Disable turns layer-4 load balancing off.
	// +optional
	Disable bool `json:"disable,omitempty"`

	// AllocateNodePorts sets allocateLoadBalancerNodePorts of the hub Services of type
	// LoadBalancer made for the tenant: its LoadBalancers', its Gateways' and its shared
	// Ingress Service. Unset means true: every port of such a hub Service takes a NodePort of
	// the hub, as Kubernetes does by default. Set it to false when the
	// hub's load balancer implementation sends traffic to the Envoy pods directly (MetalLB in
	// L2 or BGP mode, kube-vip, Cilium): the hub's NodePort range then no longer bounds the
	// number of LoadBalancer ports. A Tenant's value replaces the Config's. An addition to the
	// KubeLB CE API.
	// +optional
	AllocateNodePorts *bool `json:"allocateNodePorts,omitempty"`
	// IPMode of the addresses the tenant Services show (status.loadBalancer.ingress[].ipMode;
	// an addition; ignorable): "Proxy" keeps the tenant's kube-proxy from short-cutting
	// in-cluster traffic to the address, so it goes through Envoy (and gets PROXY protocol);
	// "VIP" lets it short-cut. Unset: Proxy for Services with PROXY protocol on, VIP for the
	// others. The Tenant's overrides the Config's; a Service's kubelb.k8c.io/ip-mode
	// annotation overrides both.
	// +kubebuilder:validation:Enum=VIP;Proxy
	// +optional
	IPMode *corev1.LoadBalancerIPMode `json:"ipMode,omitempty"`
	// AddressPool is the AddressPool the tenant's hub Services of type LoadBalancer take
	// their addresses from when the manager runs with --address-provider=ipam (an addition;
	// ignorable). Unset or "": the default pool. The Tenant's overrides the Config's.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$`
	AddressPool *string `json:"addressPool,omitempty"`
	// NodeSet is the value of the label kubelb.k8c.io/use-as-loadbalancer of the hub nodes
	// whose addresses the tenant's hub Services of type LoadBalancer get when the manager runs
	// with --address-provider=node-ip (an addition; ignorable). Unset or "": the default set
	// (nodes labelled "true" or ""). Tenants on disjoint node sets never conflict on a port.
	// The Tenant's overrides the Config's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	NodeSet *string `json:"nodeSet,omitempty"`
	// ProxyProtocol says that the hub's load balancer starts every TCP connection it sends to
	// the hub Services of the tenant's LoadBalancers with a PROXY protocol header (v1 or v2)
	// naming the client: the Envoy listeners of their TCP ports then read it first, and the
	// client's address is the header's for source ranges (loadBalancerSourceRanges), the
	// access log and the PROXY protocol towards the tenant. Only the platform team knows
	// whether its load balancer sends one: turn it on there first (with a load balancer that
	// does not, every connection is refused, unless optional). UDP ports and the hub Services
	// of Gateways and of the Ingress Service are not concerned. Each field of the Tenant's
	// overrides the Config's. An addition to the KubeLB CE API.
	// +optional
	ProxyProtocol *LoadBalancerProxyProtocol `json:"proxyProtocol,omitempty"`
}

// LoadBalancerProxyProtocol is the PROXY protocol the hub's load balancer speaks to the
// tenant's LoadBalancers (LoadBalancerSettings.ProxyProtocol).
type LoadBalancerProxyProtocol struct {
	// Enabled makes the TCP listeners of the tenant's LoadBalancers read a PROXY protocol
	// header on every connection; a connection without one is closed (unless Optional).
	// Unset: off.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Optional also serves connections without a header, as coming from their peer's
	// address (while a load balancer is being switched over). Unset: false.
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// IngressSettings are the tenant-wide settings of Ingress support.
type IngressSettings struct {
	// Class is the ingress class used on the hub.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Class *string `json:"class,omitempty"`

	// Disable turns Ingress support off.
	// +optional
	Disable bool `json:"disable,omitempty"`

	// SSLRedirect answers a request over HTTP for a host an Ingress lists in spec.tls, when
	// the host is served over HTTPS, with 301 Moved Permanently to https (same host and
	// path) instead of its routes; hosts without TLS are unchanged. An Ingress's annotation
	// kubelb.k8c.io/ssl-redirect ("true" or "false") overrides it. A Tenant's value replaces
	// the Config's; unset (both): off.
	// +optional
	SSLRedirect *bool `json:"sslRedirect,omitempty"`

	// DefaultCertificate is the certificate the tenant's Ingresses get for a TLS entry that
	// names no Secret (as ingress-nginx's --default-ssl-certificate): a hub Secret of type
	// kubernetes.io/tls, labelled kubelb.k8c.io/managed-by: kubelb (the manager watches only
	// such Secrets). A Tenant's value replaces the Config's; unset (both): such a TLS entry is
	// not served (InvalidTLS).
	// +optional
	DefaultCertificate *SecretRef `json:"defaultCertificate,omitempty"`
}

// SecretRef names a hub Secret.
type SecretRef struct {
	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// GatewayAPISettings are the tenant-wide settings of Gateway API support.
type GatewayAPISettings struct {
	// Class is the gateway class used on the hub.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Class *string `json:"class,omitempty"`

	// DefaultGateway is the hub Gateway routes attach to by default.
	// +optional
	DefaultGateway *corev1.ObjectReference `json:"defaultGateway,omitempty"`

	// Disable turns Gateway API support off.
	// +optional
	Disable bool `json:"disable,omitempty"`
}

// DNSSettings are the tenant-wide DNS settings.
type DNSSettings struct {
	// WildcardDomain from which hostnames are generated.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	WildcardDomain *string `json:"wildcardDomain,omitempty"`

	// AllowExplicitHostnames lets tenants ask for hostnames of their own.
	// +optional
	AllowExplicitHostnames *bool `json:"allowExplicitHostnames,omitempty"`

	// UseDNSAnnotations adds external-dns annotations to hub objects.
	// +optional
	UseDNSAnnotations *bool `json:"useDNSAnnotations,omitempty"`

	// ReservedDomains are domains no tenant's explicit hostname (spec.hostname of a
	// LoadBalancer) may be or be under, added to the built-in ones (cluster.local, svc,
	// kubernetes.default, localhost, and the wildcard domains of the Config and the
	// Tenant). The Config's and the Tenant's lists add up. An addition to the KubeLB CE
	// API; ignorable.
	// +optional
	// At most 64 domains.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	ReservedDomains []string `json:"reservedDomains,omitempty"`

	// UseCertificateAnnotations adds cert-manager annotations to hub objects.
	// +optional
	UseCertificateAnnotations *bool `json:"useCertificateAnnotations,omitempty"`
}

// CertificatesSettings are the tenant-wide certificate settings.
type CertificatesSettings struct {
	// DefaultClusterIssuer is the cert-manager ClusterIssuer used by default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	DefaultClusterIssuer *string `json:"defaultClusterIssuer,omitempty"`
}

// Limits bound what one tenant may hold in the hub (an addition to the KubeLB CE API;
// ignorable). A field left unset takes the Config's value, and the Config's unset fields take
// the defaults in docs/security.md. The manager serves the oldest objects (by creation time,
// then namespace/name) up to a limit and marks the rest Ready=False with reason
// QuotaExceeded; the Tenant controller also writes a ResourceQuota counting the tenant's
// LoadBalancers, Routes, SyncSecrets and Addresses.
type Limits struct {
	// LoadBalancers is the most LoadBalancer objects the tenant's namespace may hold.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	LoadBalancers *int32 `json:"loadBalancers,omitempty"`
	// Routes is the most Route objects the tenant's namespace may hold.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	Routes *int32 `json:"routes,omitempty"`
	// ListenerPorts is the most Envoy listener ports (from the hub-wide range) the tenant may
	// hold.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	ListenerPorts *int32 `json:"listenerPorts,omitempty"`
	// NodePorts is the most hub NodePorts the tenant's hub Services may take together: one
	// per port of a hub Service of type NodePort, and of type LoadBalancer when the tenant's
	// allocateNodePorts is on. The hub's NodePort range is shared with the platform team's
	// own Services.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	NodePorts *int32 `json:"nodePorts,omitempty"`
	// EndpointsPerCluster is the most endpoints one upstream cluster of the tenant may have.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	EndpointsPerCluster *int32 `json:"endpointsPerCluster,omitempty"`
	// Endpoints is the most endpoints all the tenant's upstream clusters may have together;
	// the oldest objects are served first. It bounds the manager's memory for one tenant.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000000
	// +optional
	Endpoints *int32 `json:"endpoints,omitempty"`
	// HealthCheckProbesPerSecond is the most active health-check probes per second the
	// tenant's Envoy proxies may send together (each proxy checks every endpoint of every
	// checked cluster once per interval); over it, intervals are stretched, and for the
	// largest clusters checks are turned off. The tenant also gets at most its share of the
	// Config's spec.totalHealthCheckProbesPerSecond. Default 2000.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	HealthCheckProbesPerSecond *int32 `json:"healthCheckProbesPerSecond,omitempty"`
	// ObjectBytes is the most bytes the tenant's LoadBalancers and Routes may take together
	// (each one's spec as JSON, plus its labels and annotations); the oldest objects are
	// served first. It bounds the manager's memory and the hub's etcd for one tenant.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1073741824
	// +optional
	ObjectBytes *int64 `json:"objectBytes,omitempty"`
	// SyncSecrets is the most SyncSecret objects the tenant's namespace may hold.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	SyncSecrets *int32 `json:"syncSecrets,omitempty"`
	// SyncSecretBytes is the most bytes the data (keys and values) of the tenant's
	// SyncSecrets may take together; the oldest SyncSecrets are copied first.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1073741824
	// +optional
	SyncSecretBytes *int64 `json:"syncSecretBytes,omitempty"`
	// Addresses is the most Addresses objects the tenant's namespace may hold (the ccm
	// writes one, "default").
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Addresses *int32 `json:"addresses,omitempty"`
}

// EndpointPolicy lists CIDRs the tenant's endpoint addresses may (allow) or may not (deny)
// be (an addition to the KubeLB CE API; ignorable). Loopback, link-local, multicast, cloud
// metadata addresses, the IANA special-purpose ranges that are never an endpoint, and the
// hub's own Service CIDRs, Pod CIDRs and node addresses are denied by default (NAT64 and 6to4
// addresses also as the IPv4 address they carry; docs/tenants.md); only an allow
// entry at least as specific as such a range opens it. The most specific entry containing an
// address decides; at equal prefix length a deny beats an allow. Hostname endpoints are not
// checked. See docs/translate.md.
type EndpointPolicy struct {
	// Allow lists CIDRs (e.g. "10.0.0.0/8", "fd00::/64") that open default-denied ranges.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c))",message="every entry must be a CIDR, e.g. 10.0.0.0/8"
	// +listType=atomic
	// +optional
	Allow []string `json:"allow,omitempty"`
	// Deny lists CIDRs no endpoint may be in; a deny entry beats a less specific allow.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c))",message="every entry must be a CIDR, e.g. 10.0.0.0/8"
	// +listType=atomic
	// +optional
	Deny []string `json:"deny,omitempty"`
}

// UpstreamSettings tune the Envoy clusters that carry a tenant's traffic to its nodes (an
// addition to the KubeLB CE API; ignorable): every cluster of the tenant's LoadBalancers and
// Routes. A field left unset takes the Config's value, and the Config's unset fields take
// the defaults in docs/translate.md. A tenant Service may override them for its own
// LoadBalancer with the kubelb.k8c.io/ annotations listed in docs/ccm.md.
type UpstreamSettings struct {
	// ConnectTimeout of connections to the tenant's nodes (10ms to 10m); default 5s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('10m')",message="must be a duration from 10ms to 10m, e.g. 5s"
	// +optional
	ConnectTimeout *metav1.Duration `json:"connectTimeout,omitempty"`
	// MaxConnections is the most connections (TCP) or sessions (UDP) one Envoy proxy opens
	// to one cluster, i.e. per Service port; default 1048576.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxConnections *int32 `json:"maxConnections,omitempty"`
	// UDPIdleTimeout ends a UDP session that carried no datagram for this long (1s to 24h);
	// default 60s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="must be a duration from 1s to 24h, e.g. 60s"
	// +optional
	UDPIdleTimeout *metav1.Duration `json:"udpIdleTimeout,omitempty"`
	// HealthCheck is the active health check of TCP clusters.
	// +optional
	HealthCheck UpstreamHealthCheck `json:"healthCheck,omitempty"`
}

// HTTPSettings tune the tenant's HTTP routes (Ingresses, HTTPRoutes, GRPCRoutes, LoadBalancer
// hostnames); each field set on a Tenant overrides the Config's (an addition; ignorable).
type HTTPSettings struct {
	// RequestTimeout bounds a whole request, from its first byte to the last byte of its
	// response (for gRPC, the whole stream), on every route that does not set its own
	// (HTTPRoute timeouts.request, the kubelb.k8c.io/request-timeout annotation of an Ingress,
	// HTTPRoute or GRPCRoute). 0s lets requests and streams take as long as they take; from
	// 0s to 24h. Default 0s: Envoy's own 15 s default, which cuts long downloads and gRPC
	// streams, never applies.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="must be a duration from 0s to 24h, e.g. 60s; 0s means none"
	// +optional
	RequestTimeout *metav1.Duration `json:"requestTimeout,omitempty"`
	// StreamIdleTimeout ends a request or stream on which no byte went either way for this
	// long (1s to 24h); default 5m. It protects Envoy from clients and backends that hold
	// streams open without traffic; the kubelb.k8c.io/stream-idle-timeout annotation of a
	// route can only shorten it.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="must be a duration from 1s to 24h, e.g. 5m"
	// +optional
	StreamIdleTimeout *metav1.Duration `json:"streamIdleTimeout,omitempty"`
}

// UpstreamHealthCheck configures the active health check of a tenant's TCP clusters (a TCP
// connect to every node); each field set overrides the Config's.
type UpstreamHealthCheck struct {
	// Disable turns active health checking off: every node gets traffic until a connection
	// to it fails.
	// +optional
	Disable *bool `json:"disable,omitempty"`
	// Interval between two checks of a node (1s to 1h); default 5s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="must be a duration from 1s to 1h, e.g. 5s"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Timeout of one check (10ms to 1h); default 2s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('1h')",message="must be a duration from 10ms to 1h, e.g. 2s"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// UnhealthyThreshold is the number of failed checks that take a node out (1 to 100);
	// default 2.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	UnhealthyThreshold *int32 `json:"unhealthyThreshold,omitempty"`
	// HealthyThreshold is the number of passed checks that bring a node back (1 to 100);
	// default 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	HealthyThreshold *int32 `json:"healthyThreshold,omitempty"`
	// NoTrafficInterval is the interval of checks while a cluster has carried no traffic
	// (1s to 1h); default Envoy's 60s, which keeps idle Services cheap.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="must be a duration from 1s to 1h, e.g. 60s"
	// +optional
	NoTrafficInterval *metav1.Duration `json:"noTrafficInterval,omitempty"`
}

// TrafficPolicyFeature is a part of Envoy Gateway's policies (BackendTrafficPolicy,
// SecurityPolicy, ClientTrafficPolicy) that kubelb serves and the platform team may allow a tenant.
// +kubebuilder:validation:Enum=LoadBalancer;CircuitBreaker;PassiveHealthCheck;Retry;Timeout;RateLimit;Compression;BasicAuth;JWT;APIKeyAuth;ExtAuth;OIDC;Authorization;ClientTraffic
type TrafficPolicyFeature string

// The features of TrafficPolicyBounds: a BackendTrafficPolicy's loadBalancer,
// circuitBreaker, healthCheck.passive, retry, timeout, rateLimit and compressor; a SecurityPolicy's
// basicAuth, jwt, apiKeyAuth, extAuth, oidc and authorization; a ClientTrafficPolicy as a whole.
const (
	TrafficPolicyFeatureLoadBalancer       TrafficPolicyFeature = "LoadBalancer"
	TrafficPolicyFeatureCircuitBreaker     TrafficPolicyFeature = "CircuitBreaker"
	TrafficPolicyFeaturePassiveHealthCheck TrafficPolicyFeature = "PassiveHealthCheck"
	TrafficPolicyFeatureRetry              TrafficPolicyFeature = "Retry"
	TrafficPolicyFeatureTimeout            TrafficPolicyFeature = "Timeout"
	TrafficPolicyFeatureRateLimit          TrafficPolicyFeature = "RateLimit"
	TrafficPolicyFeatureCompression        TrafficPolicyFeature = "Compression"
	TrafficPolicyFeatureBasicAuth          TrafficPolicyFeature = "BasicAuth"
	TrafficPolicyFeatureJWT                TrafficPolicyFeature = "JWT"
	TrafficPolicyFeatureAPIKeyAuth         TrafficPolicyFeature = "APIKeyAuth"
	TrafficPolicyFeatureExtAuth            TrafficPolicyFeature = "ExtAuth"
	TrafficPolicyFeatureOIDC               TrafficPolicyFeature = "OIDC"
	TrafficPolicyFeatureAuthorization      TrafficPolicyFeature = "Authorization"
	TrafficPolicyFeatureClientTraffic      TrafficPolicyFeature = "ClientTraffic"
)

// TrafficPolicyBounds are what the platform team allows the traffic policies a tenant
// writes (Envoy Gateway's BackendTrafficPolicy and SecurityPolicy; an addition to the KubeLB
// CE API, ignorable). A Tenant's fields override the Config's field by field; an unset field
// bounds nothing. A policy over a bound is not applied at all (never half-applied): the hub
// leaves it out of the tenant's Envoy configuration, and its status in the tenant cluster says
// Accepted False, reason OverPlatformBound, naming the bound and where it is set.
type TrafficPolicyBounds struct {
	// Features are the parts of the policies the tenant may use. Unset: every feature kubelb
	// serves; an empty list: none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	Features *[]TrafficPolicyFeature `json:"features,omitempty"`
	// MaxRequestsPerSecond is the largest rate a local rate-limit rule may allow, per second
	// (a rule of 6000 requests per Minute allows 100 per second); a rule that counts each
	// client or header value apart is compared by its own limit.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	// +optional
	MaxRequestsPerSecond *int64 `json:"maxRequestsPerSecond,omitempty"`
	// MaxRetries is the most retries a retry may ask (retry.numRetries; unset there: 2).
	// kubelb serves at most 10 whatever the bound.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +optional
	MaxRetries *int32 `json:"maxRetries,omitempty"`
	// MaxRequestTimeout is the longest request timeout a policy may ask
	// (timeout.http.requestTimeout; 0s there, no timeout, is over any bound), from 1ms to 1h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms') && duration(self) <= duration('1h')",message="must be a duration from 1ms to 1h, e.g. 30s"
	// +optional
	MaxRequestTimeout *metav1.Duration `json:"maxRequestTimeout,omitempty"`
}

// TenantTrafficPolicyBounds are the TrafficPolicyBounds that apply to one tenant (the
// Tenant's fields over the Config's), as the manager tells the tenant's ccm in its
// TenantState.
type TenantTrafficPolicyBounds struct {
	TrafficPolicyBounds `json:",inline"`
	// SetBy names, for each bound set (by its field name: features, maxRequestsPerSecond,
	// maxRetries, maxRequestTimeout), the object that sets it: "Tenant <name>" or "Config
	// <name>".
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	SetBy map[string]string `json:"setBy,omitempty"`
}
