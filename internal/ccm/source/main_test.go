package source

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestMain runs the package's tests with one shared env (newEnv), stopped at the end.
func TestMain(m *testing.M) {
	packageTB = &mainTB{}
	code := m.Run()
	packageTB.cleanup()
	os.Exit(code)
}

// mainTB is the testsupport.TB of the package's shared env: it lives as long as the test
// binary. Fatal panics (the test that started the env fails with it).
type mainTB struct {
	mu       sync.Mutex
	cleanups []func()
	failed   bool
	msgs     []string
	dirs     []string
}

func (m *mainTB) Helper() {}

func (m *mainTB) Cleanup(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cleanups = append(m.cleanups, f)
}

func (m *mainTB) cleanup() {
	for i := len(m.cleanups) - 1; i >= 0; i-- {
		m.cleanups[i]()
	}
	for _, d := range m.dirs {
		_ = os.RemoveAll(d)
	}
}

func (m *mainTB) TempDir() string {
	d, err := os.MkdirTemp("", "kubelb-source-test-")
	if err != nil {
		panic(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs = append(m.dirs, d)
	return d
}

func (m *mainTB) Failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}

// Logf prints the shared ccm's logs with -v only.
func (m *mainTB) Logf(format string, args ...any) {
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

func (m *mainTB) Fatal(args ...any) { m.fail(fmt.Sprint(args...)) }

func (m *mainTB) Fatalf(format string, args ...any) { m.fail(fmt.Sprintf(format, args...)) }

func (m *mainTB) FailNow() { m.fail("FailNow") }

func (m *mainTB) fail(msg string) {
	m.mu.Lock()
	m.failed = true
	m.msgs = append(m.msgs, msg)
	m.mu.Unlock()
	panic("shared test env: " + msg)
}

// String is what failed.
func (m *mainTB) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.msgs, "; ")
}
