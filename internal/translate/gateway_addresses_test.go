package translate

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestGatewayAddressesBounded: a hub Route's embedded Gateway is not validated against
// Gateway API's bound of 16 addresses, so the front end reads the first 16 and names at most
// three static ones in its message, however many a tenant writes.
func TestGatewayAddressesBounded(t *testing.T) {
	var addrs []gwv1.GatewaySpecAddress
	for i := range 5000 {
		addrs = append(addrs, gwv1.GatewaySpecAddress{Value: fmt.Sprintf("192.0.2.%d", i%250)})
	}
	got := readGatewayAddresses(addrs)
	_, ok, why := StaticAddressRequest(addrs, []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")})
	if got.unsupported != "" || len(got.static) != 16 || ok || !strings.Contains(why, "(and 13 more)") || len(why) > 400 {
		t.Errorf("5000 static addresses: %+v, %q", got, why)
	}
	custom := gwv1.AddressType("example.com/custom")
	addrs = append(addrs, gwv1.GatewaySpecAddress{Type: &custom, Value: "x"})
	if got := readGatewayAddresses(addrs); got.unsupported != "" {
		t.Errorf("an entry beyond the first 16 was read: %+v", got)
	}
}

// TestStaticAddressRequest: the manager asks the hub's load balancer only for one IP address
// inside the tenant's grant; anything else is refused with words the tenant can act on.
func TestStaticAddressRequest(t *testing.T) {
	grant := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/28"), netip.MustParsePrefix("2001:db8::7/128")}
	ip := func(v string) gwv1.GatewaySpecAddress { return gwv1.GatewaySpecAddress{Value: v} }
	hostname := gwv1.HostnameAddressType
	for _, c := range []struct {
		name  string
		addrs []gwv1.GatewaySpecAddress
		grant []netip.Prefix
		want  string // the address asked for; "" none
		why   string // part of the reason; "" none
	}{
		{name: "none asked", addrs: []gwv1.GatewaySpecAddress{{}}, grant: grant},
		{name: "granted IPv4", addrs: []gwv1.GatewaySpecAddress{ip("192.0.2.5")}, grant: grant, want: "192.0.2.5"},
		{name: "granted IPv6, any address beside it", addrs: []gwv1.GatewaySpecAddress{{}, ip("2001:db8::7")}, grant: grant, want: "2001:db8::7"},
		{name: "outside the grant", addrs: []gwv1.GatewaySpecAddress{ip("192.0.2.16")}, grant: grant, why: "not among the addresses granted to the tenant"},
		{name: "no grant", addrs: []gwv1.GatewaySpecAddress{ip("192.0.2.5")}, why: "not among the addresses granted"},
		{name: "two", addrs: []gwv1.GatewaySpecAddress{ip("192.0.2.5"), ip("192.0.2.6")}, grant: grant, why: "asks for 2 static addresses (192.0.2.5, 192.0.2.6)"},
		{name: "not an IP", addrs: []gwv1.GatewaySpecAddress{ip("gw.example.com")}, grant: grant, why: `"gw.example.com", which is not an IP address`},
		{name: "another type", addrs: []gwv1.GatewaySpecAddress{{Type: &hostname, Value: "gw.example.com"}}, grant: grant, why: `of type "Hostname"`},
	} {
		got, ok, why := StaticAddressRequest(c.addrs, c.grant)
		if ok != (c.want != "") || (ok && got.String() != c.want) {
			t.Errorf("%s: asks for %v (%v), want %q", c.name, got, ok, c.want)
		}
		if (c.why == "") != (why == "") || !strings.Contains(why, c.why) {
			t.Errorf("%s: reason %q, want one with %q", c.name, why, c.why)
		}
	}
}
