package v1alpha1

// Security is the Envoy Gateway SecurityPolicy (gateway.envoyproxy.io/v1alpha1) that applies
// to the object a Route mirrors, as kubelb's ccm resolved it: for a Gateway the policy
// targeting the Gateway, for an HTTPRoute or a GRPCRoute the policy targeting the route (which
// overrides its Gateways'). Only the fields kubelb serves are carried, in Envoy Gateway's
// shapes: authorization by client address, basic authentication, JWT authentication with
// keys given in the policy, API keys, external authorization and OpenID Connect login; the ccm refuses a policy with any other
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
	// JWT asks clients for a JSON Web Token signed by a key of one of its providers.
	// +optional
	JWT *SecurityJWT `json:"jwt,omitempty"`
	// APIKeyAuth asks clients for an API key of those in its Secrets.
	// +optional
	APIKeyAuth *SecurityAPIKeyAuth `json:"apiKeyAuth,omitempty"`
	// ExtAuth asks an external authorization service (a Service of the policy's namespace,
	// which the Route embeds as it does backends) whether to serve each request.
	// +optional
	ExtAuth *SecurityExtAuth `json:"extAuth,omitempty"`
	// OIDC logs users in with an OpenID Connect provider (authorization code flow); its token
	// endpoint is reached through a Service of the policy's namespace, which the Route embeds
	// as it does backends.
	// +optional
	OIDC *SecurityOIDC `json:"oidc,omitempty"`
}

// SecurityOIDC is Envoy Gateway's oidc, the part kubelb serves: a request without a valid
// session cookie is redirected to the provider's authorization endpoint; the provider's
// answer (a code) is exchanged at its token endpoint for tokens kept in cookies.
type SecurityOIDC struct {
	Provider SecurityOIDCProvider `json:"provider"`
	// ClientID is the client's ID at the provider.
	// +kubebuilder:validation:MaxLength=256
	ClientID string `json:"clientID"`
	// ClientSecret is a Secret of the policy's namespace holding the client's secret (key
	// client-secret); the Route carries its name only.
	ClientSecret SecurityBasicAuthUsers `json:"clientSecret"`
	// Scopes asked besides openid.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Scopes []string `json:"scopes,omitempty"`
	// Resources (RFC 8707) asked for.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Resources []string `json:"resources,omitempty"`
	// RedirectURL is where the provider sends users back; default
	// %REQ(x-forwarded-proto)%://%REQ(:authority)%/oauth2/callback.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	RedirectURL *string `json:"redirectURL,omitempty"`
	// LogoutPath ends the session (its cookies removed).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LogoutPath *string `json:"logoutPath,omitempty"`
	// RefreshToken renews the tokens with the provider's refresh token when they expire
	// (Envoy Gateway's default: true).
	// +optional
	RefreshToken *bool `json:"refreshToken,omitempty"`
	// ForwardAccessToken sends the access token to the backend (Authorization: Bearer).
	// +optional
	ForwardAccessToken *bool `json:"forwardAccessToken,omitempty"`
	// CookieDomain is the domain of the session cookies.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	CookieDomain *string `json:"cookieDomain,omitempty"`
	// CookieNames are the names of the token cookies.
	// +optional
	CookieNames *SecurityOIDCCookieNames `json:"cookieNames,omitempty"`
	// CookieConfig sets the SameSite attribute of the login's cookies.
	// +optional
	CookieConfig *SecurityOIDCCookieConfig `json:"cookieConfig,omitempty"`
	// DefaultTokenTTL is the tokens' lifetime when the provider's answer gives none.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	DefaultTokenTTL *string `json:"defaultTokenTTL,omitempty"`
	// DefaultRefreshTokenTTL is the refresh token's lifetime when it does not say.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	DefaultRefreshTokenTTL *string `json:"defaultRefreshTokenTTL,omitempty"`
	// CSRFTokenTTL is how long a login started may take (the CSRF cookie's lifetime).
	// +kubebuilder:validation:MaxLength=32
	// +optional
	CSRFTokenTTL *string `json:"csrfTokenTTL,omitempty"`
	// DenyRedirect: requests matching one of its headers are answered 401 instead of being
	// redirected to the provider (scripts, API clients).
	// +optional
	DenyRedirect *SecurityOIDCDenyRedirect `json:"denyRedirect,omitempty"`
	// PassThroughAuthHeader lets requests carrying a token where the policy's jwt reads it
	// skip the login; the jwt then verifies the token.
	// +optional
	PassThroughAuthHeader *bool `json:"passThroughAuthHeader,omitempty"`
	// DisableTokenEncryption keeps the tokens in their cookies in plain text.
	// +optional
	DisableTokenEncryption *bool `json:"disableTokenEncryption,omitempty"`
}

// SecurityOIDCCookieConfig is the SameSite attribute of an OIDC login's cookies.
type SecurityOIDCCookieConfig struct {
	// SameSite is Lax, Strict or None.
	// +kubebuilder:validation:MaxLength=16
	// +optional
	SameSite *string `json:"sameSite,omitempty"`
}

// SecurityOIDCDenyRedirect names the requests answered 401 rather than redirected.
type SecurityOIDCDenyRedirect struct {
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Headers []SecurityOIDCHeaderMatch `json:"headers,omitempty"`
}

// SecurityOIDCHeaderMatch matches a request header (Envoy Gateway's StringMatch with a name).
type SecurityOIDCHeaderMatch struct {
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// Type is Exact (unset), Prefix, Suffix or RegularExpression.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Type *string `json:"type,omitempty"`
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
}

// SecurityOIDCProvider is the OpenID Connect provider: its issuer and endpoints (kubelb does
// not discover them) and the Service of the policy's namespace its token endpoint is reached
// through.
type SecurityOIDCProvider struct {
	// BackendRefs names the Service (exactly one) the hub reaches the token endpoint through.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	BackendRefs []SecurityBackendRef `json:"backendRefs,omitempty"`
	// +kubebuilder:validation:MaxLength=512
	Issuer string `json:"issuer"`
	// +kubebuilder:validation:MaxLength=512
	// +optional
	AuthorizationEndpoint *string `json:"authorizationEndpoint,omitempty"`
	// +kubebuilder:validation:MaxLength=512
	// +optional
	TokenEndpoint *string `json:"tokenEndpoint,omitempty"`
}

// SecurityOIDCCookieNames are the names of the cookies of the access and ID tokens.
type SecurityOIDCCookieNames struct {
	// +kubebuilder:validation:MaxLength=64
	// +optional
	AccessToken *string `json:"accessToken,omitempty"`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	IDToken *string `json:"idToken,omitempty"`
}

// SecurityExtAuth is Envoy Gateway's extAuth: each request is first sent to an authorization
// service over HTTP or gRPC (exactly one of them); its answer decides.
type SecurityExtAuth struct {
	// HTTP: the service answers plain HTTP requests; a 2xx answer lets the request on.
	// +optional
	HTTP *SecurityExtAuthHTTP `json:"http,omitempty"`
	// GRPC: the service speaks Envoy's envoy.service.auth.v3.Authorization protocol.
	// +optional
	GRPC *SecurityExtAuthGRPC `json:"grpc,omitempty"`
	// HeadersToExtAuth names the client request headers sent to the service (besides those
	// Envoy always sends).
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	HeadersToExtAuth []string `json:"headersToExtAuth,omitempty"`
	// FailOpen serves requests when the service cannot be reached (default: refused with 403).
	// +optional
	FailOpen *bool `json:"failOpen,omitempty"`
}

// SecurityExtAuthHTTP is an HTTP authorization service.
type SecurityExtAuthHTTP struct {
	// BackendRefs names the service: one Service port of the policy's namespace.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1
	// +listType=atomic
	BackendRefs []SecurityBackendRef `json:"backendRefs"`
	// Path is the path prefix of the authorization requests (the client's path follows it).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Path string `json:"path,omitempty"`
	// HeadersToBackend names the headers of an allowing answer copied to the request sent
	// on to the backend.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	HeadersToBackend []string `json:"headersToBackend,omitempty"`
}

// SecurityExtAuthGRPC is a gRPC authorization service.
type SecurityExtAuthGRPC struct {
	// BackendRefs names the service: one Service port of the policy's namespace.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1
	// +listType=atomic
	BackendRefs []SecurityBackendRef `json:"backendRefs"`
}

// SecurityBackendRef is a reference to a Service port (Gateway API's BackendObjectReference).
type SecurityBackendRef struct {
	// Group of the referent: empty (core).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group *string `json:"group,omitempty"`
	// Kind of the referent: Service.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind *string `json:"kind,omitempty"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the Service: unset or the policy's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace *string `json:"namespace,omitempty"`
	// Port of the Service.
	// +optional
	Port *int32 `json:"port,omitempty"`
	// Weight (defaulted to 1 by Envoy Gateway's CRD): with one Service, anything but 0.
	// +optional
	Weight *int32 `json:"weight,omitempty"`
}

// SecurityAPIKeyAuth is Envoy Gateway's apiKeyAuth: a request must carry one of the API keys
// of its Secrets (each key of a Secret is a client ID, its value the client's API key) where
// extractFrom says. The Route carries the Secrets' names only, never the keys.
type SecurityAPIKeyAuth struct {
	// CredentialRefs are the Secrets of the policy's namespace holding the API keys.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	CredentialRefs []SecurityBasicAuthUsers `json:"credentialRefs"`
	// ExtractFrom says where requests carry the key: each entry one of headers, params
	// (query parameters) or cookies.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	ExtractFrom []SecurityAPIKeyExtractFrom `json:"extractFrom"`
	// ForwardClientIDHeader names the request header the client ID of a verified key is
	// written to for the backend.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	ForwardClientIDHeader string `json:"forwardClientIDHeader,omitempty"`
	// Sanitize removes the key from the request before the backend.
	// +optional
	Sanitize *bool `json:"sanitize,omitempty"`
}

// SecurityAPIKeyExtractFrom is one place requests carry the API key.
type SecurityAPIKeyExtractFrom struct {
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	Headers []string `json:"headers,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	Params []string `json:"params,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	Cookies []string `json:"cookies,omitempty"`
}

// SecurityJWT is Envoy Gateway's jwt: a request must carry a JSON Web Token (in the
// Authorization header, "Bearer <token>") that one of the providers verifies.
type SecurityJWT struct {
	// Optional serves requests without a token (a request with a token that does not verify
	// is still refused).
	// +optional
	Optional *bool `json:"optional,omitempty"`
	// Providers: a token is accepted when any of them verifies it.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	Providers []SecurityJWTProvider `json:"providers"`
}

// SecurityJWTProvider is one JWT provider: the keys that sign its tokens (given in the
// policy: public key material, not a secret), the issuer and audiences its tokens must name,
// and the claims copied to request headers.
type SecurityJWTProvider struct {
	// Name of the provider, unique in the policy.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Issuer the tokens must name (claim iss); empty: any.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Issuer string `json:"issuer,omitempty"`
	// Audiences of which the tokens must name one (claim aud); empty: any.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	Audiences []string `json:"audiences,omitempty"`
	// LocalJWKS holds the JSON Web Key Set verifying the tokens.
	// +optional
	LocalJWKS *SecurityLocalJWKS `json:"localJWKS,omitempty"`
	// RemoteJWKS fetches the JSON Web Key Set from a key server reached through a Service of
	// the policy's namespace (exactly one of localJWKS and remoteJWKS).
	// +optional
	RemoteJWKS *SecurityRemoteJWKS `json:"remoteJWKS,omitempty"`
	// ClaimToHeaders copies claims of a verified token to request headers.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	ClaimToHeaders []SecurityClaimToHeader `json:"claimToHeaders,omitempty"`
	// ExtractFrom is where the token is read; unset: the Authorization header (Bearer).
	// +optional
	ExtractFrom *SecurityJWTExtractFrom `json:"extractFrom,omitempty"`
}

// SecurityJWTExtractFrom is Envoy Gateway's extractFrom: the request headers, cookies and
// query parameters the token is read from.
type SecurityJWTExtractFrom struct {
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	Headers []SecurityJWTHeader `json:"headers,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	Cookies []string `json:"cookies,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	Params []string `json:"params,omitempty"`
}

// SecurityJWTHeader is a request header holding the token, after ValuePrefix.
type SecurityJWTHeader struct {
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ValuePrefix *string `json:"valuePrefix,omitempty"`
}

// SecurityLocalJWKS is Envoy Gateway's localJWKS of type Inline: the key set itself.
type SecurityLocalJWKS struct {
	// Type is Inline (unset: Inline).
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Type string `json:"type,omitempty"`
	// Inline is the JSON Web Key Set (RFC 7517), public keys only.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	Inline *string `json:"inline,omitempty"`
}

// SecurityRemoteJWKS is Envoy Gateway's remoteJWKS, the part kubelb serves: the key set is
// fetched by the hub's Envoy through the Service backendRefs names (the Route embeds it as it
// does backends); the URI only gives the requests' Host and path.
type SecurityRemoteJWKS struct {
	// BackendRefs names the Service (exactly one) of the policy's namespace the key server is
	// reached through.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	BackendRefs []SecurityBackendRef `json:"backendRefs,omitempty"`
	// URI of the key set: its Host and path.
	// +kubebuilder:validation:MaxLength=253
	URI string `json:"uri"`
	// CacheDuration is how long a fetched key set is used before it is fetched again.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	CacheDuration *string `json:"cacheDuration,omitempty"`
	// FailedRefetchDuration is how long Envoy waits after a failed fetch before the next.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	FailedRefetchDuration *string `json:"failedRefetchDuration,omitempty"`
}

// SecurityClaimToHeader copies a claim of a verified token to a request header.
type SecurityClaimToHeader struct {
	// Header is the request header's name.
	// +kubebuilder:validation:MaxLength=256
	Header string `json:"header"`
	// Claim is the claim's name; a nested claim as "a.b".
	// +kubebuilder:validation:MaxLength=256
	Claim string `json:"claim"`
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
