package routekind

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

func gatewayObject(listeners any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"spec": map[string]any{"listeners": listeners},
	}}
}

func TestGatewayPorts(t *testing.T) {
	t.Parallel()
	ports, problems := GatewayPorts(gatewayObject([]any{
		map[string]any{"name": "https", "port": int64(443), "protocol": "HTTPS"},
		map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"},
		map[string]any{"name": "tls", "port": int64(443), "protocol": "TLS"}, // same Service port as https
		map[string]any{"name": "dns", "port": float64(53), "protocol": "UDP"},
		map[string]any{"name": "dns-tcp", "port": int64(53), "protocol": "TCP"},
		map[string]any{"name": "zero", "port": int64(0), "protocol": "HTTP"},
		map[string]any{"name": "big", "port": int64(65536), "protocol": "HTTP"},
		map[string]any{"name": "frac", "port": 80.5, "protocol": "HTTP"},
		map[string]any{"name": "text", "port": "80", "protocol": "HTTP"},
		map[string]any{"name": "sctp", "port": int64(9), "protocol": "SCTP"},
		map[string]any{"name": "custom", "port": int64(9), "protocol": "example.com/foo"},
		"not an object",
		map[string]any{"name": strings.Repeat("x", 300), "port": int64(-1), "protocol": "HTTP"},
	}))
	want := []ListenerPort{{Protocol: corev1.ProtocolTCP, Port: 53}, {Protocol: corev1.ProtocolUDP, Port: 53}, {Protocol: corev1.ProtocolTCP, Port: 80}, {Protocol: corev1.ProtocolTCP, Port: 443}}
	if diff := cmp.Diff(want, ports, cmp.AllowUnexported(ListenerPort{})); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	wantProblems := []string{
		`listener "zero": port must be a number from 1 to 65535`,
		`listener "big": port must be a number from 1 to 65535`,
		`listener "frac": port must be a number from 1 to 65535`,
		`listener "text": port must be a number from 1 to 65535`,
		`listener "sctp": protocol must be HTTP, HTTPS, TLS, TCP or UDP`,
		`listener "custom": protocol must be HTTP, HTTPS, TLS, TCP or UDP`,
		`listener 11 is not an object`,
		`listener 12: port must be a number from 1 to 65535`, // a name too long to quote
	}
	if diff := cmp.Diff(wantProblems, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	// At most MaxListeners listeners get ports: 64, as in Gateway API.
	if MaxListeners != 64 {
		t.Errorf("MaxListeners %d", MaxListeners)
	}
	var many []any
	for i := range 70 {
		many = append(many, map[string]any{"name": fmt.Sprintf("l%d", i), "port": int64(1000 + i), "protocol": "TCP"})
	}
	ports, problems = GatewayPorts(gatewayObject(many))
	if len(ports) != MaxListeners || len(problems) != 1 || !strings.Contains(problems[0], "70 listeners") {
		t.Errorf("%d ports, problems %v", len(ports), problems)
	}
	if _, problems := GatewayPorts(gatewayObject("nope")); len(problems) != 1 {
		t.Errorf("listeners not a list: %v", problems)
	}
	if _, problems := GatewayPorts(&unstructured.Unstructured{Object: map[string]any{}}); len(problems) != 1 {
		t.Errorf("no listeners: %v", problems)
	}
}

// TestValidRouteName compares ValidRouteName with the API machinery's label value check.
func TestValidRouteName(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := "aZ09-_.é/ "
	cases := []string{"", "a", "-a", "a-", "a.b", "a_b", "_", strings.Repeat("a", 63), strings.Repeat("a", 64), "0f0c5b2a-0000-4000-8000-000000000001"}
	for range 5000 {
		b := make([]byte, r.IntN(70))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, name := range cases {
		if got, want := ValidRouteName(name), len(validation.IsValidLabelValue(name)) == 0; got != want {
			t.Errorf("ValidRouteName(%q) = %v, want %v", name, got, want)
		}
	}
}
