package faults

import (
	"testing"

	"kubelb.dev/kubelb/e2e/framework"
)

// TestMain runs the fault scenarios in a private network namespace (framework.RunInNetns, as
// the e2e package and the conformance harness do). Their Envoys bind their listeners with
// SO_REUSEPORT (Envoy's default), and every System's manager allocates from the same default
// listener port range, so on a loopback shared with another test package two Envoys of two
// tests bind the same 127.0.0.1:<port> and the kernel hands each a share of the other's
// connections: a request to TestLeaderKilled's stable Service was answered by another test's
// Envoy, and failed when that Envoy's listener went away (docs/reliability.md, "Leader
// killed"). In its own namespace a scenario's ports are its own.
func TestMain(m *testing.M) { framework.RunInNetns(m, "faults") }
