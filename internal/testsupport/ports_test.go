package testsupport

import "testing"

// TestFreePortStaysOutOfTheEphemeralRange: a port in the kernel's ephemeral range can be taken
// by any outgoing connection between FreePort and the bind it was picked for (CI saw Envoy's
// ready listener fail so). FreePort hands out ports outside it, and never the same one twice.
func TestFreePortStaysOutOfTheEphemeralRange(t *testing.T) {
	if ephemeralOverlaps(freePortMin, freePortMax) {
		t.Skip("this machine's ephemeral port range overlaps", freePortMin, "-", freePortMax)
	}
	seen := map[int]bool{}
	for range 200 {
		p := FreePort(t, "127.0.0.1", "127.0.0.2")
		if p < freePortMin || p > freePortMax {
			t.Fatalf("FreePort = %d, want %d-%d", p, freePortMin, freePortMax)
		}
		if ephemeralOverlaps(p, p) {
			t.Fatalf("FreePort = %d, in the ephemeral range", p)
		}
		if seen[p] {
			t.Fatalf("FreePort handed out %d twice", p)
		}
		seen[p] = true
	}
}
