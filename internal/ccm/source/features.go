package source

import (
	"slices"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// SupportedFeatures are the Gateway API features kubelb implements: the core features of the
// GATEWAY-HTTP, GATEWAY-GRPC, GATEWAY-TLS, GATEWAY-TCP and GATEWAY-UDP conformance profiles and the extended features
// built so far. The ccm publishes them in the status of its GatewayClasses, and the
// conformance test (e2e/conformance) claims exactly these, so a feature listed here is one the
// official suite checks in `make test`. docs/conformance/README.md lists what is not
// implemented.
var SupportedFeatures = []features.FeatureName{
	// core
	features.SupportGateway, features.SupportReferenceGrant, features.SupportHTTPRoute,
	features.SupportGRPCRoute, features.SupportTLSRoute, features.SupportTCPRoute, features.SupportUDPRoute,
	// Gateway extended
	features.SupportGatewayPort8080, features.SupportGatewayHTTPListenerIsolation,
	features.SupportGatewayHTTPSListenerDetectMisdirectedRequests, features.SupportGatewayAddressEmpty, features.SupportGatewayInfrastructure,
	features.SupportGatewayStaticAddresses,
	features.SupportListenerSet,
	features.SupportGatewayFrontendClientCertificateValidation,
	features.SupportGatewayFrontendClientCertificateValidationInsecureFallback,
	features.SupportGatewayBackendClientCertificate,
	// HTTPRoute extended
	features.SupportHTTPRouteQueryParamMatching, features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteResponseHeaderModification, features.SupportHTTPRoutePortRedirect,
	features.SupportHTTPRouteSchemeRedirect, features.SupportHTTPRoutePathRedirect,
	features.SupportHTTPRouteHostRewrite, features.SupportHTTPRoutePathRewrite,
	features.SupportHTTPRouteRequestTimeout, features.SupportHTTPRouteBackendTimeout,
	features.SupportHTTPRoute303RedirectStatusCode, features.SupportHTTPRoute307RedirectStatusCode,
	features.SupportHTTPRoute308RedirectStatusCode, features.SupportHTTPRouteParentRefPort,
	features.SupportHTTPRouteDestinationPortMatching, features.SupportHTTPRouteBackendProtocolH2C,
	features.SupportHTTPRouteNamedRouteRule, features.SupportHTTPRouteBackendProtocolWebSocket,
	features.SupportHTTPRouteRequestMirror, features.SupportHTTPRouteRequestMultipleMirrors,
	features.SupportHTTPRouteRequestPercentageMirror,
	features.SupportHTTPRouteBackendRequestHeaderModification, features.SupportHTTPRouteCORS,
	// HTTPRoute extended, experimental channel (rules[].retry): checked by the conformance
	// run after the tenant's CRDs are upgraded to the experimental channel (TestGatewayAPIConformance/experimental)
	features.SupportHTTPRouteRetry, features.SupportHTTPRouteRetryBackendTimeout,
	features.SupportHTTPRouteRetryConnectionError,
	// GRPCRoute extended
	features.SupportGRPCRouteNamedRouteRule,
	// TLSRoute extended
	features.SupportTLSRouteModeTerminate, features.SupportTLSRouteModeMixed,
	// BackendTLSPolicy (extended): HTTPRoute and GRPCRoute backends
	features.SupportBackendTLSPolicy, features.SupportBackendTLSPolicySANValidation,
}

// supportedFeaturesStatus is SupportedFeatures as GatewayClass status.supportedFeatures:
// sorted by name, as the API requires.
func supportedFeaturesStatus() []gwapiv1.SupportedFeature {
	names := make([]string, 0, len(SupportedFeatures))
	for _, f := range SupportedFeatures {
		names = append(names, string(f))
	}
	slices.Sort(names)
	out := make([]gwapiv1.SupportedFeature, 0, len(names))
	for _, n := range slices.Compact(names) {
		out = append(out, gwapiv1.SupportedFeature{Name: gwapiv1.FeatureName(n)})
	}
	return out
}
