package v1alpha1

// Security is the Envoy Gateway SecurityPolicy (gateway.envoyproxy.io/v1alpha1) that applies
// to the object a Route mirrors, as kubelb's ccm resolved it: for a Gateway the policy
// targeting the Gateway, for an HTTPRoute or a GRPCRoute the policy targeting the route (which
// overrides its Gateways'). Only the fields kubelb serves are carried, in Envoy Gateway's
// shapes: authorization by client address and basic authentication; the ccm refuses a policy with any other
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
	// BasicAuth asks clients for a user name and password (HTTP Basic authentication).
	// +optional
	BasicAuth *SecurityBasicAuth `json:"basicAuth,omitempty"`
}

// SecurityBasicAuth is Envoy Gateway's basicAuth: the users are in a Secret of the policy's
// namespace, key .htpasswd. The Route carries only the Secret's reference, never its content:
// the ccm mirrors the Secret to the hub as a SyncSecret, and the manager reads the hub Secret
// made from it.
type SecurityBasicAuth struct {
	// Users is the Secret holding the users in htpasswd format (key .htpasswd).
	Users SecurityBasicAuthUsers `json:"users"`
}

// SecurityBasicAuthUsers is a reference to a Secret (Gateway API's SecretObjectReference).
type SecurityBasicAuthUsers struct {
	// Group of the referent: empty (core).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group *string `json:"group,omitempty"`
	// Kind of the referent: Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind *string `json:"kind,omitempty"`
	// Name of the Secret.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the Secret: unset or the policy's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace *string `json:"namespace,omitempty"`
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
