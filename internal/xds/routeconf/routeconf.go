// Package routeconf holds what the back end and the xDS server share about route
// configurations: both validate (and the server hashes) a route configuration of thousands of
// virtual hosts one virtual host at a time, so that one changed virtual host costs one
// virtual host's work (docs/performance.md, "What one changed HTTPRoute costs a rebuild").
package routeconf

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// virtualHosts is the field WithoutVirtualHosts leaves out.
var virtualHosts = (&routev3.RouteConfiguration{}).ProtoReflect().Descriptor().Fields().ByName("virtual_hosts")

// WithoutVirtualHosts returns a new RouteConfiguration with every field of rc but its virtual
// hosts; its other fields are rc's own messages (shared, never copied), so it must be read
// only. protoc-gen-validate checks a RouteConfiguration's virtual hosts only one by one (no
// rule on the list), so rc is valid exactly when this and each of its virtual hosts are.
func WithoutVirtualHosts(rc *routev3.RouteConfiguration) *routev3.RouteConfiguration {
	out := &routev3.RouteConfiguration{}
	dst := out.ProtoReflect()
	rc.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd != virtualHosts {
			dst.Set(fd, v)
		}
		return true
	})
	return out
}
