// Package testsupport is the one place tests (and `make demo`) get their shared helpers: it
// finds and runs the real Envoy (validate a bootstrap, start it on loopback, read its admin
// interface), starts and stops processes, builds kubelb's binaries, hands out free loopback
// ports, polls with Eventually, and runs backends of every kind (TCP, UDP, HTTP/1.1, h2c,
// gRPC, TLS) that say which node and Pod answered, with a bounded round-trip client for each,
// and plays kube-proxy's per-node health endpoint of externalTrafficPolicy Local Services
// (NodeHealth: GET /healthz answers 200 or 503).
//
// It is a leaf: it knows nothing of API servers (internal/testenv starts those and builds on
// this package) and does not import "testing", so the demo program can use it through TB.
package testsupport

// TB is the part of testing.TB the helpers use. *testing.T and *testing.B satisfy it; so does
// the `make demo` program, which runs the same harness outside `go test`.
type TB interface {
	Helper()
	Cleanup(func())
	TempDir() string
	Failed() bool
	Logf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	FailNow()
}
