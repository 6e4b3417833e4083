package translate

import (
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/re2"
)

// TestWildcardIngressHostFitsEnvoy: the one-label check of a wildcard Ingress host is a
// regular expression that grows with the host; a host whose check Envoy would refuse (which
// would freeze every route of the Ingress listener) is refused as a host instead, and every
// host accepted has a check within Envoy's limit (re2.EnvoyMaxProgramSize).
func TestWildcardIngressHostFitsEnvoy(t *testing.T) {
	longest := 0
	for n := 1; n <= 250; n++ {
		suffix := strings.Repeat("a", min(n, 63))
		for len(suffix) < n {
			suffix += "." + strings.Repeat("b", min(n-len(suffix)-1, 63))
		}
		suffix = strings.Trim(strings.ReplaceAll(suffix, "..", ".a."), ".")
		h, msg := ingressHost("*." + suffix)
		if msg == "" {
			if n, err := re2.ProgramSize(wildcardAuthority(suffix)); err != nil || n > re2.EnvoyMaxProgramSize {
				t.Fatalf("host *.%s accepted, but Envoy would refuse its check: size %d, %v", suffix, n, err)
			}
			longest = max(longest, len(h))
			continue
		}
		if !strings.Contains(msg, "too long for a wildcard host") {
			t.Fatalf("host *.%s: %s", suffix, msg)
		}
	}
	if longest < 40 {
		t.Errorf("the longest wildcard host accepted has %d characters; want at least 40", longest)
	}
	t.Logf("longest wildcard Ingress host accepted: %d characters", longest)
}
