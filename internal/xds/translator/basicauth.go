package translator

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	basicauthv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/basic_auth/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"kubelb.dev/kubelb/internal/ir"
)

// Basic authentication (ir.Route.BasicAuth): the connection managers of the listeners with
// ir.Listener.BasicAuth run Envoy's basic_auth filter, disabled: it does nothing for a route
// without a configuration of its own. A route with basic authentication enables it with its
// users (BasicAuthPerRoute, typed_per_filter_config), and Envoy answers 401 (with a
// WWW-Authenticate challenge) to a request without the Basic credentials of one of them. The
// filter runs after the RBAC filter (a client refused by address gets 403 without being asked
// for a password) and right before the router.

// FilterBasicAuth is Envoy's basic_auth HTTP filter.
const FilterBasicAuth = "envoy.filters.http.basic_auth"

// basicAuthFilter is the disabled basic_auth filter of a connection manager; the routes'
// configurations enable it with their users. Envoy refuses the filter without users (unset or
// empty), so it has one no password matches: the hash is 20 zero bytes, which no known
// password's SHA-1 digest is (and the filter never runs with it: disabled, and a route that
// enables it brings its own users).
func basicAuthFilter(errs *[]error) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{
		Name:     FilterBasicAuth,
		Disabled: true,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, &basicauthv3.BasicAuth{
			Users: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: placeholderUser}},
		})},
	}
}

// basicAuthPerRoute enables the filter on a route with its users (htpasswd lines, inline).
func basicAuthPerRoute(b *ir.BasicAuth, errs *[]error) *anypb.Any {
	return mustPack(errs, &basicauthv3.BasicAuthPerRoute{
		Users: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: b.Users}},
	})
}

// placeholderUser is the user of the connection manager's disabled filter.
const placeholderUser = "kubelb-no-user:{SHA}AAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
