package v1alpha1

// Security is the Envoy Gateway SecurityPolicy (gateway.envoyproxy.io/v1alpha1) that applies
// to the object a Route mirrors, as kubelb's ccm resolved it: for a Gateway the policy
// targeting the Gateway, for an HTTPRoute or a GRPCRoute the policy targeting the route (which
// overrides its Gateways'). Only the fields kubelb serves are carried, in Envoy Gateway's
// shapes: authorization by client address; the ccm refuses a policy with any other
// (docs/l7.md, "Traffic policies"). The manager validates and bounds every field again.
type Security struct {
	// Namespace and Name of the policy (the object's namespace).
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Authorization decides which clients' requests are served.
	// +optional
	Authorization *SecurityAuthorization `json:"authorization,omitempty"`
}

// SecurityAuthorization is Envoy Gateway's authorization: the first rule whose principal
// matches a request decides; when none does, the default action.
type SecurityAuthorization struct {
	// DefaultAction is Allow or Deny; unset: Deny (Envoy Gateway's default).
	// +optional
	// +kubebuilder:validation:MaxLength=8
	DefaultAction string `json:"defaultAction,omitempty"`
	// Rules in order.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Rules []SecurityRule `json:"rules,omitempty"`
}

// SecurityRule is one authorization rule.
type SecurityRule struct {
	// Name of the rule (for messages).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Action is Allow or Deny.
	// +kubebuilder:validation:MaxLength=8
	Action string `json:"action"`
	// Principal is who the rule matches.
	Principal SecurityPrincipal `json:"principal"`
}

// SecurityPrincipal is the client a rule matches: by address only in kubelb.
type SecurityPrincipal struct {
	// ClientCIDRs are the client address ranges (IPv4 or IPv6 CIDRs) the rule matches, the
	// address of the connection's peer.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=atomic
	ClientCIDRs []string `json:"clientCIDRs,omitempty"`
}
