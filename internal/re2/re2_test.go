package re2

import (
	"strings"
	"testing"
)

// TestProgramSizeIsBounded: a 1024-byte pattern with counted repetitions stands for about a
// million RE2 instructions; ProgramSize stops counting at MaxCounted, and Check refuses it, in
// bounded work (a tenant's regex must not stall the translation of every tenant).
func TestProgramSizeIsBounded(t *testing.T) {
	pattern := "(?:" + strings.Repeat("[a-z]", 200) + "){1000}"
	allocs := testing.AllocsPerRun(3, func() {
		n, err := ProgramSize(pattern)
		if err != nil || n != MaxCounted+1 {
			t.Fatalf("ProgramSize = %d, %v; want %d", n, err, MaxCounted+1)
		}
	})
	if err := Check(pattern); err == nil || !strings.Contains(err.Error(), "over 4096") {
		t.Errorf("Check: %v", err)
	}
	// Without the bound this is about a million instructions and many more allocations.
	if allocs > 100000 {
		t.Errorf("%.0f allocations for one ProgramSize; the count is not bounded", allocs)
	}
	t.Logf("%.0f allocations", allocs)
}
