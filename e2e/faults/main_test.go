package faults

import (
	"fmt"
	"os"
	"testing"

	"kubelb.dev/kubelb/e2e/framework"
)

// TestMain runs the fault scenarios in a private network namespace (framework.ReexecInNetns,
// as the conformance harness does). Their Envoys bind their listeners with SO_REUSEPORT
// (Envoy's default), and every System's manager allocates from the same default listener
// port range, so on a loopback shared with another test package (`go test ./...` runs the e2e
// package beside this one) two Envoys of two tests bind the same 127.0.0.1:<port> and the
// kernel hands each a share of the other's connections: a request to a stable Service was
// answered by another test's Envoy, and failed when that Envoy's listener went away (see
// docs/reliability.md, "Leader killed"). In its own namespace a scenario's ports are its own.
func TestMain(m *testing.M) {
	if os.Getenv(framework.InNetnsEnv) == "" {
		code, err := framework.ReexecInNetns("*", os.Args[1:])
		if err != nil {
			fmt.Fprintln(os.Stderr, "faults:", err)
		}
		os.Exit(code)
	}
	if err := framework.SetupNetns(); err != nil {
		fmt.Fprintln(os.Stderr, "faults: setting up the network namespace:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
