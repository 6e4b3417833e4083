package main

import "testing"

// TestDemo runs what `make demo` shows, without waiting for Ctrl-C: a tenant Service gets an
// address and a request goes through a real Envoy to a backend on a tenant node.
func TestDemo(t *testing.T) {
	if err := run(t, true); err != nil {
		t.Fatal(err)
	}
}
