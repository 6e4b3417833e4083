package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// RouteSpec carries a tenant's layer-7 object and the Services its backends reference.
type RouteSpec struct {
	// Endpoints are the tenant addresses traffic is sent to, normally one group with an
	// addressesReference to Addresses/default.
	// +optional
	// At most 4 groups.
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	Endpoints []LoadBalancerEndpoints `json:"endpoints,omitempty"`

	// Source of the route.
	// +optional
	Source RouteSource `json:"source,omitempty"`
}

// RouteSource is where a route comes from.
type RouteSource struct {
	// Kubernetes holds a route that comes from a tenant cluster.
	// +optional
	Kubernetes *KubernetesSource `json:"kubernetes,omitempty"`
}

// KubernetesSource is a tenant Ingress, Gateway, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute or
// UDPRoute with its Services.
type KubernetesSource struct {
	// Route is the whole tenant object.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	Route unstructured.Unstructured `json:"resource,omitempty"`

	// Services referenced by the route's backends, as seen in the tenant (with NodePorts).
	// +optional
	// At most 512: a Gateway API route has at most 16 rules of 16 backends, and
	// a ClusterIP backend may come with its NodePort twin.
	// +kubebuilder:validation:MaxItems=512
	// +listType=atomic
	Services []UpstreamService `json:"services,omitempty"`

	// Context is what kubelb's ccm saw in the tenant cluster that the hub cannot see, for
	// Gateway API attachment (see docs/l7.md). Optional: a KubeLB CE ccm leaves it out, and
	// the manager then falls back to KubeLB CE's semantics.
	// +optional
	Context *SourceContext `json:"context,omitempty"`
}

// SourceContext carries tenant facts the manager needs to decide Gateway API attachment.
type SourceContext struct {
	// NamespaceLabels are the labels of the object's namespace, for listeners whose
	// allowedRoutes select namespaces by label.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`

	// GrantedRefs are the object's references to another namespace (backendRefs,
	// certificateRefs) that a ReferenceGrant in the target namespace permits. A
	// cross-namespace reference not listed is refused (RefNotPermitted).
	// +optional
	// +kubebuilder:validation:MaxItems=128
	// +listType=atomic
	GrantedRefs []GrantedRef `json:"grantedRefs,omitempty"`

	// BackendTLS says, for each backend Service port of the route (an HTTPRoute, a GRPCRoute
	// or a TLSRoute) that a BackendTLSPolicy targets, how the hub connects to it over TLS (a
	// TLSRoute's backends: behind listeners in mode Terminate). A backend port listed here is
	// never sent plain text: an entry the hub cannot use answers with an error. At most one
	// entry per Service port: a route has at most 16 rules of 16 backendRefs and 16 mirror
	// filters.
	// +optional
	// +kubebuilder:validation:MaxItems=512
	// +listType=atomic
	BackendTLS []BackendTLS `json:"backendTLS,omitempty"`

	// BackendCACertificates are the PEM bundles of CA certificates BackendTLS entries (and,
	// for a Gateway, FrontendCACertificates entries) refer to by index (caCertificates),
	// each bundle once.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=65536
	// +listType=atomic
	BackendCACertificates []string `json:"backendCACertificates,omitempty"`

	// FrontendCACertificates are, for a Gateway, the ConfigMaps its client certificate
	// validation names (spec.tls.frontend, default and perPort caCertificateRefs) that the
	// Gateway may use (its namespace's, or another's a ReferenceGrant permits), as the ccm
	// found them: each one's CA certificates, by index in backendCACertificates, or why it
	// cannot be used. A reference not listed does not resolve, and an HTTPS listener left
	// without a usable CA certificate is not served (never served without validation).
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	FrontendCACertificates []FrontendCACertificate `json:"frontendCACertificates,omitempty"`

	// BackendTraffic is the Envoy Gateway BackendTrafficPolicy that applies to the object
	// (a Gateway, an HTTPRoute or a GRPCRoute), as the ccm resolved it: a route's own
	// overrides its Gateway's. Unset: none.
	// +optional
	BackendTraffic *BackendTraffic `json:"backendTraffic,omitempty"`

	// Security is the Envoy Gateway SecurityPolicy that applies to the object (a Gateway, an
	// HTTPRoute or a GRPCRoute), as the ccm resolved it: a route's own overrides its
	// Gateway's. Unset: none.
	// +optional
	Security *Security `json:"security,omitempty"`

	// ClientTraffic is the Envoy Gateway ClientTrafficPolicy that applies to the object (a
	// Gateway), as the ccm resolved it: the settings of the Gateway's HTTP and HTTPS
	// listeners towards its clients. Unset: none.
	// +optional
	ClientTraffic *ClientTraffic `json:"clientTraffic,omitempty"`

	// PolicySections are the Envoy Gateway policies that apply to one section of the object
	// only (a targetRef's sectionName), as the ccm resolved them: for a Gateway one of its
	// listeners (by name), for an HTTPRoute or a GRPCRoute one of its rules (by
	// spec.rules[].name). A section's policy of a kind overrides the object's own of that
	// kind for that section (a rule's overrides its route's, which overrides its listener's,
	// which overrides its Gateway's). Sorted by name, one entry per section.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	PolicySections []PolicySection `json:"policySections,omitempty"`
}

// PolicySection is what Envoy Gateway policies apply to one section of an object (a
// Gateway's listener, a route's rule).
type PolicySection struct {
	// Name is the section's name: a listener's or a rule's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// BackendTraffic is the BackendTrafficPolicy that targets the section. Unset: none.
	// +optional
	BackendTraffic *BackendTraffic `json:"backendTraffic,omitempty"`

	// Security is the SecurityPolicy that targets the section. Unset: none.
	// +optional
	Security *Security `json:"security,omitempty"`

	// ClientTraffic is the ClientTrafficPolicy that targets the section (a Gateway's
	// listener). Unset: none.
	// +optional
	ClientTraffic *ClientTraffic `json:"clientTraffic,omitempty"`
}

// PolicySection is the entry of section name (nil: none).
func (c *SourceContext) PolicySection(name string) *PolicySection {
	if c == nil {
		return nil
	}
	for i := range c.PolicySections {
		if c.PolicySections[i].Name == name {
			return &c.PolicySections[i]
		}
	}
	return nil
}

// FrontendCACertificate is a ConfigMap named by a Gateway's client certificate validation (or
// a ConfigMap or Secret named by its ClientTrafficPolicy's tls.clientValidation), as the ccm
// found it.
type FrontendCACertificate struct {
	// Namespace and Name of the ConfigMap.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Kind is ConfigMap (unset) or Secret (a ClientTrafficPolicy's caCertificateRefs may
	// name Secrets of its namespace).
	// +optional
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind,omitempty"`
	// CACertificates is the index in backendCACertificates of the PEM CA certificates of its
	// key ca.crt; unset when the ConfigMap cannot be used (Problem says why).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=7
	CACertificates *int32 `json:"caCertificates,omitempty"`
	// Problem says why the ConfigMap cannot be used: it does not exist, has no key ca.crt,
	// or holds no usable PEM certificates.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Problem string `json:"problem,omitempty"`
}

// BackendTLS is the TLS a BackendTLSPolicy asks for towards one backend Service port.
type BackendTLS struct {
	// Namespace and Name of the Service, as the route's backendRefs name it (not its
	// NodePort twin).
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Port is the Service port, as the route's backendRefs name it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// Policy is the name of the BackendTLSPolicy (in the Service's namespace).
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy"`
	// Hostname is the server name sent (SNI) and, without SubjectAltNames, the name the
	// backend's certificate must carry.
	// +kubebuilder:validation:MaxLength=253
	Hostname string `json:"hostname"`
	// SubjectAltNames, when set, are the names of which the backend's certificate must
	// carry one (instead of Hostname).
	// +optional
	// +kubebuilder:validation:MaxItems=5
	// +listType=atomic
	SubjectAltNames []BackendTLSSubjectAltName `json:"subjectAltNames,omitempty"`
	// CACertificates is the index in backendCACertificates of the CA certificates that
	// verify the backend's certificate.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=7
	CACertificates *int32 `json:"caCertificates,omitempty"`
	// WellKnownCACertificates is "System" for the CA certificates of Envoy's system bundle.
	// Without it and without CACertificates the policy has no usable CA certificate, and
	// the backend port answers with an error.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	WellKnownCACertificates string `json:"wellKnownCACertificates,omitempty"`
}

// BackendTLSSubjectAltName is one subject alternative name a backend's certificate may
// carry: a DNS name (type Hostname) or a URI (type URI).
type BackendTLSSubjectAltName struct {
	// Type is Hostname or URI.
	// +kubebuilder:validation:MaxLength=16
	Type string `json:"type"`
	// Hostname (type Hostname).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Hostname string `json:"hostname,omitempty"`
	// URI (type URI).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	URI string `json:"uri,omitempty"`
}

// GrantedRef is a cross-namespace reference permitted by a ReferenceGrant.
type GrantedRef struct {
	// Group of the referent ("" for core).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// Kind of the referent, e.g. Service or Secret.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Namespace of the referent.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the referent.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// UpstreamService is a tenant Service referenced by a route. It is an embedded resource, so
// that the API server keeps its metadata (name, namespace, uid, labels: the manager matches a
// NodePort twin to its backend by the origin-name label).
// At most 128 ports, as a LoadBalancer's.
// +kubebuilder:validation:XEmbeddedResource
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.ports) || self.spec.ports.size() <= 128",message="a Service has at most 128 ports"
type UpstreamService struct {
	corev1.Service `json:",inline"`
}

// RouteStatus is what the hub reports of a route.
type RouteStatus struct {
	// Resources made on the hub for the route.
	// +optional
	Resources RouteResourcesStatus `json:"resources,omitempty"`
}

// RouteResourcesStatus lists the hub objects made for a route.
type RouteResourcesStatus struct {
	// Source names the tenant object.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Source string `json:"source,omitempty"`

	// Services made on the hub, keyed "namespace/name".
	// +optional
	// At most 512, as the spec's.
	// +kubebuilder:validation:MaxProperties=512
	Services map[string]RouteServiceStatus `json:"services,omitempty"`

	// Route made on the hub; its status is copied back onto the tenant object.
	// +optional
	Route ResourceState `json:"route,omitempty"`
}

// RouteServiceStatus is a hub Service made for a route.
type RouteServiceStatus struct {
	ResourceState `json:",inline"`

	// +optional
	// At most 128.
	// +kubebuilder:validation:MaxItems=128
	// +listType=atomic
	Ports []corev1.ServicePort `json:"ports,omitempty"`
}

// ResourceState describes one hub object made for a route.
type ResourceState struct {
	// +optional
	// +kubebuilder:validation:MaxLength=316
	APIVersion string `json:"apiVersion,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	GeneratedName string `json:"generatedName,omitempty"`

	// Status of the object, raw.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Status runtime.RawExtension `json:"status,omitempty"`

	// Conditions of the hub object. On status.resources.route (and each entry of
	// status.resources.services): ResourceAppliedSuccessfully, whether the Route's hub objects
	// are in place. True reason: InstallationSuccessful. False reasons: Disabled (Ingress or
	// Gateway API disabled by the Tenant or Config), PortsExhausted (no listener port left),
	// InvalidListeners (some Gateway listeners left out), UnsupportedKind, ServiceFailed (the
	// hub Service was rejected or another Service is in the way), InvalidName, QuotaExceeded
	// (the tenant's limits).
	// On status.resources.route only, Programmed (written by the leader): whether the tenant's
	// Envoy proxies hold the route's configuration. True reasons: Programmed,
	// ProgrammedWithWarnings (some input ignored, see the message). False reasons: Rejected (an
	// Envoy proxy NACKed it; see the TenantState's status.rejections), NotTranslated (kubelb
	// does not translate the kind), or a translation problem's reason.
	// A False Programmed condition may also take the reason of the first translation problem:
	// InvalidName, UnsupportedProtocol, InvalidPort, PortNotAllocated, ListenerPortConflict,
	// AddressesNotFound, InvalidAddress, EndpointDenied, EndpointPortNotFound, NoEndpoints,
	// InvalidAnnotation, UnsupportedAnnotation, ProxyProtocolUnsupported, UnsupportedPersistence,
	// QuotaExceeded, InvalidSourceRanges, ClientAddressUnknown,
	// HealthCheckThrottled, HostnameNotResolved, LoadBalancingDisabled, InvalidHostname,
	// HostnameConflict, HostnameNoHTTPPort, InvalidRoute, BackendNotFound, BackendNoNodePort,
	// CertificateNotFound, InvalidCertificate, ListenerPortNotAllocated, InvalidHost,
	// InvalidPath, PathConflict, CertificateConflict, UnsupportedBackend, InvalidTLS,
	// InvalidListener, InvalidRule, UnsupportedFilter, TooMany, ListenerTaken,
	// OverPlatformBound, InvalidConfig (each explained in docs/conditions.md); the message
	// lists every problem.
	// On status.resources.route only, BackendsReachable (written by the leader): whether the
	// tenant's Envoy proxies reach the route's backends in their health checks. True reason:
	// Reachable. False reasons: SomeBackendsUnreachable (the message names them),
	// NoBackendReachable. Unknown reasons: NotYetChecked, TooManyEndpoints (the tenant has
	// more endpoints than the proxies check), HealthNotReported (more of the tenant's clusters
	// have unreachable endpoints than a manager replica reports, and this one's were left out).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Route mirrors a tenant Ingress, Gateway, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute or UDPRoute
// into the hub.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=klroute,categories=kubelb
// +kubebuilder:printcolumn:name="OriginName",type=string,JSONPath=`.metadata.labels.kubelb\.k8c\.io/origin-name`
// +kubebuilder:printcolumn:name="OriginNamespace",type=string,JSONPath=`.metadata.labels.kubelb\.k8c\.io/origin-ns`
// +kubebuilder:printcolumn:name="OriginResource",type=string,JSONPath=`.metadata.labels.kubelb\.k8c\.io/origin-resource-kind`
// +kubebuilder:printcolumn:name="Programmed",type=string,JSONPath=`.status.resources.route.conditions[?(@.type=="Programmed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Route struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RouteSpec   `json:"spec,omitempty"`
	Status RouteStatus `json:"status,omitempty"`
}

// RouteList is a list of Routes.
// +kubebuilder:object:root=true
type RouteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Route `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Route{}, &RouteList{})
}
