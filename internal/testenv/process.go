package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
	buildDir   string
)

// BuildBinary builds one of kubelb's commands (e.g. "./cmd/kubelb") once per test process and
// returns the path of the binary.
func BuildBinary(t TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildCache[pkg]; ok {
		return p
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "kubelb-test-bin-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = d
	}
	out := filepath.Join(buildDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	buildCache[pkg] = out
	return out
}

// FreePort returns a TCP port that is free on 127.0.0.1 right now.
func FreePort(t TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Process is a program a test started; it is ended (by its PID) when the test ends.
type Process struct {
	Name string
	Cmd  *exec.Cmd
	Log  string
	done chan struct{}
	err  error
}

// StartProcess starts a program with its output going to a log file in the test's temporary
// folder; the log is printed when the test fails.
func StartProcess(t TB, name, path string, args ...string) *Process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
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
			b, _ := os.ReadFile(logPath)
			t.Logf("--- log of %s (last 8 KiB) ---\n%s", name, tail(b, 8192))
		}
	})
	return p
}

func tail(b []byte, n int) []byte {
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

// Kill ends the process by its PID, if it still runs.
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

// Eventually polls cond every interval until it returns nil or timeout passes, then fails the
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

// HTTPGet fetches a URL on loopback and returns status and body.
func HTTPGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// WaitHTTP200 waits until url answers 200 and returns the body; it fails early if proc exits.
func WaitHTTP200(t TB, proc *Process, url string, timeout time.Duration) string {
	t.Helper()
	var body string
	Eventually(t, timeout, url, func() error {
		if proc != nil && proc.Exited() {
			t.Fatalf("%s exited early:\n%s", proc.Name, proc.Output())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		code, b, err := HTTPGet(ctx, url)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("status %d: %s", code, strings.TrimSpace(b))
		}
		body = b
		return nil
	})
	return body
}

// Loopback is 127.0.0.1:port.
func Loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
