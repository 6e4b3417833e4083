package translate

import (
	"fmt"
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
	if got.unsupported != "" || !strings.Contains(got.unusable, "(and 13 more)") || len(got.unusable) > 400 {
		t.Errorf("5000 static addresses: %+v", got)
	}
	custom := gwv1.AddressType("example.com/custom")
	addrs = append(addrs, gwv1.GatewaySpecAddress{Type: &custom, Value: "x"})
	if got := readGatewayAddresses(addrs); got.unsupported != "" {
		t.Errorf("an entry beyond the first 16 was read: %+v", got)
	}
}
