package routeconf

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestWithoutVirtualHosts(t *testing.T) {
	rc := &routev3.RouteConfiguration{
		Name:                     "gateway/web/http",
		IgnorePortInHostMatching: true,
		ValidateClusters:         wrapperspb.Bool(false),
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{{
			Header: &corev3.HeaderValue{Key: "alt-svc", Value: `h3=":443"`},
		}},
		VirtualHosts: []*routev3.VirtualHost{{Name: "a", Domains: []string{"a.example"}}, {Name: "b", Domains: []string{"b.example"}}},
	}
	before := proto.Clone(rc)
	shell := WithoutVirtualHosts(rc)
	if len(shell.VirtualHosts) != 0 {
		t.Fatalf("virtual hosts kept: %v", shell.VirtualHosts)
	}
	want := proto.Clone(rc).(*routev3.RouteConfiguration)
	want.VirtualHosts = nil
	if !proto.Equal(shell, want) {
		t.Fatalf("WithoutVirtualHosts = %v, want %v", shell, want)
	}
	if !proto.Equal(rc, before) {
		t.Fatal("WithoutVirtualHosts changed its input")
	}
	// Valid exactly when the parts are: an invalid virtual host makes the whole invalid, an
	// invalid field outside them makes the shell invalid.
	bad := proto.Clone(rc).(*routev3.RouteConfiguration)
	bad.VirtualHosts[1].Domains = nil // at least one domain is required
	if bad.Validate() == nil || bad.VirtualHosts[1].Validate() == nil || WithoutVirtualHosts(bad).Validate() != nil {
		t.Fatal("an invalid virtual host: the whole and the host must be invalid, the shell valid")
	}
	bad = proto.Clone(rc).(*routev3.RouteConfiguration)
	bad.ResponseHeadersToAdd[0].Header.Key = ""
	if bad.Validate() == nil || WithoutVirtualHosts(bad).Validate() == nil {
		t.Fatal("an invalid header: the whole and the shell must be invalid")
	}
}

func TestValidate(t *testing.T) {
	rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{
		{Name: "a", Domains: []string{"a.example"}}, {Name: "b"}, // b has no domain: invalid
	}}
	all := func(int) bool { return true }
	none := func(int) bool { return false }
	if err := Validate(rc, all); err != nil {
		t.Errorf("virtual hosts known valid are not validated again: %v", err)
	}
	err := Validate(rc, none)
	if err == nil || err.Error() != rc.Validate().Error() {
		t.Errorf("Validate = %v, want the whole configuration's error %v", err, rc.Validate())
	}
	rc.VirtualHosts[1].Domains = []string{"b.example"}
	if err := Validate(rc, none); err != nil {
		t.Errorf("a valid configuration: %v", err)
	}
}
