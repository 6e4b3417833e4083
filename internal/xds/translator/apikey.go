package translator

import (
	apikeyauthv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/api_key_auth/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"kubelb.dev/kubelb/internal/ir"
)

// API keys (ir.Route.APIKeyAuth): the connection managers of the listeners with
// ir.Listener.APIKeyAuth run Envoy's api_key_auth filter, disabled: it does nothing for a
// route without a configuration of its own. A route with API keys enables it with its
// clients' keys, the places requests carry them and what is forwarded (ApiKeyAuthPerRoute),
// and Envoy answers 401 to a request without the key of one of them. The filter runs with the
// other authentications, after the RBAC filter and before the rate limit.

// FilterAPIKeyAuth is Envoy's api_key_auth HTTP filter.
const FilterAPIKeyAuth = "envoy.filters.http.api_key_auth"

// apiKeyAuthFilter is the disabled api_key_auth filter of a connection manager; the routes'
// configurations enable it.
func apiKeyAuthFilter(errs *[]error) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{
		Name:       FilterAPIKeyAuth,
		Disabled:   true,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, &apikeyauthv3.ApiKeyAuth{})},
	}
}

// apiKeyAuthPerRoute enables the filter on a route with its clients' keys.
func apiKeyAuthPerRoute(a *ir.APIKeyAuth, errs *[]error) *anypb.Any {
	out := &apikeyauthv3.ApiKeyAuthPerRoute{}
	for _, c := range a.Credentials {
		out.Credentials = append(out.Credentials, &apikeyauthv3.Credential{Key: c.Key, Client: c.Client})
	}
	for _, s := range a.Sources {
		out.KeySources = append(out.KeySources, &apikeyauthv3.KeySource{Header: s.Header, Query: s.Param, Cookie: s.Cookie})
	}
	if a.ForwardClientIDHeader != "" || a.Sanitize {
		out.Forwarding = &apikeyauthv3.Forwarding{Header: a.ForwardClientIDHeader, HideCredentials: a.Sanitize}
	}
	return mustPack(errs, out)
}
