package v1alpha1

// BackendTraffic is the Envoy Gateway BackendTrafficPolicy (gateway.envoyproxy.io/v1alpha1)
// that applies to the object a Route mirrors, as kubelb's ccm resolved it: for a Gateway the
// policy targeting the Gateway, for an HTTPRoute or a GRPCRoute the policy targeting the
// route (which overrides its Gateways'). Only the fields kubelb serves are carried, in Envoy
// Gateway's shapes; the ccm refuses a policy with any other (docs/l7.md, "Traffic
// policies"). The manager validates and bounds every field again.
type BackendTraffic struct {
	// Namespace and Name of the policy (the object's namespace).
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// LoadBalancer is how a backend's endpoints are chosen.
	// +optional
	LoadBalancer *TrafficLoadBalancer `json:"loadBalancer,omitempty"`
	// CircuitBreaker bounds the connections and requests to a backend.
	// +optional
	CircuitBreaker *TrafficCircuitBreaker `json:"circuitBreaker,omitempty"`
	// HealthCheck holds the passive health check (outlier detection).
	// +optional
	HealthCheck *TrafficHealthCheck `json:"healthCheck,omitempty"`
	// Retry is how failed requests are tried again.
	// +optional
	Retry *TrafficRetry `json:"retry,omitempty"`
	// Timeout holds the connection and request timeouts.
	// +optional
	Timeout *TrafficTimeout `json:"timeout,omitempty"`
	// RateLimit limits the requests of the routes: local rate limits, counted by each Envoy.
	// +optional
	RateLimit *TrafficRateLimit `json:"rateLimit,omitempty"`
	// Compression compresses the routes' responses: Envoy Gateway's compressor (or its
	// deprecated compression), in the order of preference.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Compression []TrafficCompression `json:"compression,omitempty"`
}

// TrafficCompression is one compressor of Envoy Gateway's compressor list.
type TrafficCompression struct {
	// Type is Gzip or Brotli (Envoy Gateway's Zstd is not served by kubelb).
	// +kubebuilder:validation:MaxLength=16
	Type string `json:"type"`
	// Gzip, Brotli and Zstd are Envoy Gateway's settings of each compressor; they have no
	// fields in the version kubelb reads.
	// +optional
	Gzip *TrafficCompressorSettings `json:"gzip,omitempty"`
	// +optional
	Brotli *TrafficCompressorSettings `json:"brotli,omitempty"`
	// +optional
	Zstd *TrafficCompressorSettings `json:"zstd,omitempty"`
}

// TrafficCompressorSettings are a compressor's settings: none yet.
type TrafficCompressorSettings struct{}

// TrafficLoadBalancer is Envoy Gateway's loadBalancer.
type TrafficLoadBalancer struct {
	// Type is RoundRobin, LeastRequest, Random or ConsistentHash.
	// +kubebuilder:validation:MaxLength=32
	Type string `json:"type"`
	// ConsistentHash says what is hashed (type ConsistentHash).
	// +optional
	ConsistentHash *TrafficConsistentHash `json:"consistentHash,omitempty"`
}

// TrafficConsistentHash is Envoy Gateway's consistentHash: Maglev over the client address,
// a header or a cookie.
type TrafficConsistentHash struct {
	// Type is SourceIP, Header or Cookie.
	// +kubebuilder:validation:MaxLength=32
	Type string `json:"type"`
	// Header names the header hashed (type Header).
	// +optional
	Header *TrafficHashHeader `json:"header,omitempty"`
	// Cookie names the cookie hashed (type Cookie).
	// +optional
	Cookie *TrafficHashCookie `json:"cookie,omitempty"`
	// TableSize is the Maglev table size, a prime number (Envoy's default 65537).
	// +optional
	// +kubebuilder:validation:Maximum=5000011
	TableSize *uint64 `json:"tableSize,omitempty"`
}

// TrafficHashHeader names a header.
type TrafficHashHeader struct {
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
}

// TrafficHashCookie names a cookie; with TTL, Envoy sets it when the request has none.
type TrafficHashCookie struct {
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	TTL string `json:"ttl,omitempty"`
}

// TrafficCircuitBreaker is Envoy Gateway's circuitBreaker.
type TrafficCircuitBreaker struct {
	// +optional
	MaxConnections *int64 `json:"maxConnections,omitempty"`
	// +optional
	MaxPendingRequests *int64 `json:"maxPendingRequests,omitempty"`
	// +optional
	MaxParallelRequests *int64 `json:"maxParallelRequests,omitempty"`
	// +optional
	MaxParallelRetries *int64 `json:"maxParallelRetries,omitempty"`
	// +optional
	MaxRequestsPerConnection *int64 `json:"maxRequestsPerConnection,omitempty"`
}

// TrafficHealthCheck is Envoy Gateway's healthCheck, passive only.
type TrafficHealthCheck struct {
	// +optional
	Passive *TrafficPassiveHealthCheck `json:"passive,omitempty"`
}

// TrafficPassiveHealthCheck is Envoy Gateway's healthCheck.passive: Envoy's outlier
// detection. Durations are Gateway API durations (e.g. 3s, 500ms).
type TrafficPassiveHealthCheck struct {
	// +optional
	SplitExternalLocalOriginErrors *bool `json:"splitExternalLocalOriginErrors,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Interval string `json:"interval,omitempty"`
	// +optional
	ConsecutiveLocalOriginFailures *uint32 `json:"consecutiveLocalOriginFailures,omitempty"`
	// +optional
	ConsecutiveGatewayErrors *uint32 `json:"consecutiveGatewayErrors,omitempty"`
	// +optional
	Consecutive5xxErrors *uint32 `json:"consecutive5XxErrors,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	BaseEjectionTime string `json:"baseEjectionTime,omitempty"`
	// +optional
	MaxEjectionPercent *int32 `json:"maxEjectionPercent,omitempty"`
	// +optional
	AlwaysEjectOneEndpoint *bool `json:"alwaysEjectOneEndpoint,omitempty"`
}

// TrafficRetry is Envoy Gateway's retry.
type TrafficRetry struct {
	// +optional
	NumRetries *int32 `json:"numRetries,omitempty"`
	// +optional
	RetryOn *TrafficRetryOn `json:"retryOn,omitempty"`
	// +optional
	PerRetry *TrafficPerRetry `json:"perRetry,omitempty"`
}

// TrafficRetryOn is what is retried: Envoy's retry triggers and HTTP status codes.
type TrafficRetryOn struct {
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=32
	// +listType=atomic
	Triggers []string `json:"triggers,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	HTTPStatusCodes []int32 `json:"httpStatusCodes,omitempty"`
}

// TrafficPerRetry bounds each try and spaces them.
type TrafficPerRetry struct {
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Timeout string `json:"timeout,omitempty"`
	// +optional
	BackOff *TrafficBackOff `json:"backOff,omitempty"`
}

// TrafficBackOff is the exponential back-off between tries.
type TrafficBackOff struct {
	// +optional
	// +kubebuilder:validation:MaxLength=32
	BaseInterval string `json:"baseInterval,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	MaxInterval string `json:"maxInterval,omitempty"`
}

// TrafficTimeout is Envoy Gateway's timeout (tcp.connectTimeout, http.requestTimeout,
// http.connectionIdleTimeout).
type TrafficTimeout struct {
	// +optional
	TCP *TrafficTCPTimeout `json:"tcp,omitempty"`
	// +optional
	HTTP *TrafficHTTPTimeout `json:"http,omitempty"`
}

// TrafficTCPTimeout is the timeout of connecting to a backend.
type TrafficTCPTimeout struct {
	// +optional
	// +kubebuilder:validation:MaxLength=32
	ConnectTimeout string `json:"connectTimeout,omitempty"`
}

// TrafficHTTPTimeout holds the request timeout and the idle timeout of connections to
// backends.
type TrafficHTTPTimeout struct {
	// +optional
	// +kubebuilder:validation:MaxLength=32
	RequestTimeout string `json:"requestTimeout,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	ConnectionIdleTimeout string `json:"connectionIdleTimeout,omitempty"`
}

// TrafficRateLimit is Envoy Gateway's rateLimit: local rate limits (type Local, or local
// set), counted by each Envoy, or global ones (type Global, or global set), counted once for
// the tenant's whole fleet by its rate-limit service.
type TrafficRateLimit struct {
	// Type is Local or Global (Envoy Gateway deprecates it for setting local or global
	// directly).
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Type string `json:"type,omitempty"`
	// Local holds the rules of a local rate limit.
	// +optional
	Local *TrafficLocalRateLimit `json:"local,omitempty"`
	// Global holds the rules of a global rate limit. A hub that does not know the field
	// drops it (the ccm's Warning says so).
	// +optional
	Global *TrafficGlobalRateLimit `json:"global,omitempty"`
}

// TrafficGlobalRateLimit is Envoy Gateway's rateLimit.global: the same rules as a local
// limit (with the unit Day besides), counted across the tenant's fleet.
type TrafficGlobalRateLimit struct {
	// Rules are the limits; a request counts against every rule it matches, and is refused
	// (429) when one of them is spent.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Rules []TrafficRateLimitRule `json:"rules,omitempty"`
}

// TrafficLocalRateLimit is Envoy Gateway's rateLimit.local.
type TrafficLocalRateLimit struct {
	// Rules are the limits; a request counts against every rule it matches, and is refused
	// (429) when one of them is spent.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Rules []TrafficRateLimitRule `json:"rules,omitempty"`
}

// TrafficRateLimitRule is one limit and the clients it counts (all of the route's when
// clientSelectors is empty).
type TrafficRateLimitRule struct {
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	ClientSelectors []TrafficRateLimitSelector `json:"clientSelectors,omitempty"`
	Limit           TrafficRateLimitValue      `json:"limit"`
}

// TrafficRateLimitValue is a number of requests per unit (Second, Minute or Hour; Day for a
// global limit).
type TrafficRateLimitValue struct {
	Requests int64 `json:"requests"`
	// +kubebuilder:validation:MaxLength=16
	Unit string `json:"unit"`
}

// TrafficRateLimitSelector selects requests by headers and client address (all must match).
type TrafficRateLimitSelector struct {
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Headers []TrafficRateLimitHeader `json:"headers,omitempty"`
	// +optional
	SourceCIDR *TrafficRateLimitSourceCIDR `json:"sourceCIDR,omitempty"`
}

// TrafficRateLimitHeader matches a request header: Exact or RegularExpression on its value,
// or Distinct (one limit per value).
type TrafficRateLimitHeader struct {
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Type string `json:"type,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Value *string `json:"value,omitempty"`
	// Invert (Envoy Gateway's CRD defaults it to false) is not yet served when true.
	// +optional
	Invert *bool `json:"invert,omitempty"`
}

// TrafficRateLimitSourceCIDR matches the client address: Exact (one limit for the range) or
// Distinct (one limit per address in the range).
type TrafficRateLimitSourceCIDR struct {
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Type string `json:"type,omitempty"`
	// +kubebuilder:validation:MaxLength=256
	Value string `json:"value"`
	// Invert (Envoy Gateway's CRD defaults it to false) is not yet served when true.
	// +optional
	Invert *bool `json:"invert,omitempty"`
}
