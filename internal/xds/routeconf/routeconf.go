// Package routeconf holds what the back end and the xDS server share about route
// configurations: both validate a route configuration of thousands of virtual hosts one
// virtual host at a time, so that one changed virtual host costs one virtual host's
// validation (docs/performance.md, "What one changed HTTPRoute costs a rebuild").
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

// Validate validates rc as protoc-gen-validate does, without validating again the virtual
// hosts known(i) says were found valid before (rc.VirtualHosts[i]): the rest of rc
// (WithoutVirtualHosts), then each other virtual host. When one is invalid, rc is validated
// whole, for protoc-gen-validate's own message naming it.
func Validate(rc *routev3.RouteConfiguration, known func(i int) bool) error {
	if err := WithoutVirtualHosts(rc).Validate(); err != nil {
		return err
	}
	for i, vh := range rc.VirtualHosts {
		if !known(i) && vh.Validate() != nil {
			return rc.Validate()
		}
	}
	return nil
}
