package testenv

// TB is the part of testing.TB the harness uses. *testing.T satisfies it; so does the
// `make demo` program, which runs the same harness outside `go test`.
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
