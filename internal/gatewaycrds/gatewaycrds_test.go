package gatewaycrds

import (
	"strings"
	"testing"
)

func TestChannels(t *testing.T) {
	names := func(channel string) map[string]bool {
		t.Helper()
		crds, err := CRDs(channel)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, c := range crds {
			out[c.Name] = true
		}
		return out
	}
	standard, experimental := names("standard"), names("experimental")
	for _, want := range []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants"} {
		if !standard[want+".gateway.networking.k8s.io"] {
			t.Errorf("standard channel lacks %s", want)
		}
	}
	const x = "xbackendtrafficpolicies.gateway.networking.x-k8s.io"
	if !experimental[x] || standard[x] {
		t.Errorf("%s must be in the experimental channel only", x)
	}
	if len(experimental) <= len(standard) {
		t.Errorf("experimental has %d CRDs, standard %d", len(experimental), len(standard))
	}
	if _, err := CRDs("beta"); err == nil || !strings.Contains(err.Error(), "standard or experimental") {
		t.Fatalf("unknown channel: %v", err)
	}
}
