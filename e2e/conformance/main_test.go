package conformance

import (
	"testing"

	"kubelb.dev/kubelb/e2e/framework"
)

// TestMain runs the conformance harness in a private network namespace: Pod IPs
// (10.244.0.0/16) and the hub load balancer's addresses (10.245.1.0/24) are not loopback, so
// the harness binds them on the namespace's own lo, and no packet leaves the namespace.
// `unshare` needs no root: the test binary re-executes itself inside a user, network and PID
// namespace, and the kernel ends them with it (framework.RunInNetns).
func TestMain(m *testing.M) { framework.RunInNetns(m, "conformance") }
