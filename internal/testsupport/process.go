package testsupport

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{}
)

// BuildBinary builds one of kubelb's commands (e.g. "./cmd/kubelb") once per test process and
// returns the path of the binary. Binaries go to bin/test/<checkout>/ (git-ignored, one
// directory per checkout, since worktrees may share bin/), not to a temporary directory: a
// test process has no hook at exit to remove one, and each left 156 MiB behind. Concurrent
// test processes build the same code, and each renames its build into place, so a running
// binary is never written over.
func BuildBinary(t TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildCache[pkg]; ok {
		return p
	}
	root := RepoRoot()
	dir := filepath.Join(root, "bin", "test", fmt.Sprintf("%x", sha256.Sum256([]byte(root)))[:12])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	tmp := fmt.Sprintf("%s.%d", out, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	buildCache[pkg] = out
	return out
}

// Loopback is 127.0.0.1:port.
func Loopback(port int) string { return net.JoinHostPort("127.0.0.1", fmt.Sprint(port)) }

// Eventually polls cond every 100ms until it returns nil or timeout passes, then fails the
// test with the last error.
func Eventually(t TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Process is a program a test started; it is ended (by its PID) when the test ends, and also
// when the test process dies.
type Process struct {
	Name string
	Cmd  *exec.Cmd
	// Log is the file that gets the program's stdout and stderr.
	Log  string
	done chan struct{}
	err  error
}

// KeepLogsEnv names a folder where the logs of the processes tests start are kept (for
// debugging); by default they go to the test's temporary folder and are removed with it.
const KeepLogsEnv = "KUBELB_KEEP_LOGS"

// StartProcess starts a program with its output going to a log file in the test's temporary
// folder; the end of the log is printed when the test fails.
func StartProcess(t TB, name, path string, args ...string) *Process {
	t.Helper()
	return StartProcessWithEnv(t, name, path, nil, args...)
}

// StartProcessWithEnv is StartProcess with extra environment variables (KEY=value) added to
// the test's own.
func StartProcessWithEnv(t TB, name, path string, env []string, args ...string) *Process {
	t.Helper()
	dir := os.Getenv(KeepLogsEnv)
	if dir == "" {
		dir = t.TempDir()
	}
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &Process{Name: name, Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- log of %s (last 8 KiB) ---\n%s", name, tailBytes([]byte(p.Output()), 8192))
		}
	})
	return p
}

func tailBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits up to timeout; it returns the exit code (-1 when killed).
func (p *Process) Stop(timeout time.Duration) (int, error) {
	if !p.Exited() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
		return -1, fmt.Errorf("%s did not stop within %s of SIGTERM", p.Name, timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, p.err
}

// Kill ends the process by its PID with SIGKILL (nothing is flushed or released), if it still
// runs, and waits for it.
func (p *Process) Kill() {
	if !p.Exited() {
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}

// Output returns what the process logged so far.
func (p *Process) Output() string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

// Tail returns the last n lines the process logged.
func (p *Process) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Output(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
