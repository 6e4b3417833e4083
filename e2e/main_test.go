package e2e

import (
	"testing"

	"kubelb.dev/kubelb/e2e/framework"
)

// TestMain runs the end-to-end tests in a private network namespace (framework.RunInNetns),
// as the conformance harness and the fault scenarios do. Their Envoys bind listeners with
// SO_REUSEPORT (Envoy's default) on ports every test System's manager allocates from the same
// default range, so on a loopback shared with another test package two Envoys would bind the
// same 127.0.0.1:<port> and the kernel would hand each a share of the other's connections. In
// its own namespace a test's ports are its own (docs/testing.md).
func TestMain(m *testing.M) { framework.RunInNetns(m, "e2e") }
