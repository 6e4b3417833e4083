// Package envoytest runs the real Envoy binary in tests: it finds the binary, starts Envoy
// with a bootstrap on loopback, talks to its admin interface and stops it by PID.
package envoytest

import (
	"bytes"
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
	"syscall"
	"testing"
	"time"
)

// Version is the Envoy version the tests are written against.
const Version = "1.40.0"

// Binary returns the path of the Envoy binary: $KUBELB_ENVOY, else bin/envoy/<Version>/envoy
// under the repository root. It fails the test when the binary is missing; it never skips.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv("KUBELB_ENVOY")
	if path == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatalf("cannot find the Envoy binary: %v", err)
		}
		path = filepath.Join(root, "bin", "envoy", Version, "envoy")
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("Envoy binary %s is missing or not executable: run make tools (or set KUBELB_ENVOY)", path)
	}
	return path
}

// repoRoot walks up from the working directory to the folder holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Validate runs "envoy --mode validate" on a bootstrap and returns Envoy's complaint, if any.
func Validate(t testing.TB, bootstrap []byte, args ...string) error {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bootstrap.yaml")
	if err := os.WriteFile(cfg, bootstrap, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	argv := append([]string{"--mode", "validate", "-c", cfg, "--disable-hot-restart", "-l", "warning"}, args...)
	out, err := exec.CommandContext(ctx, Binary(t), argv...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("envoy --mode validate: %w\n%s", err, out)
	}
	return nil
}

// Envoy is a running Envoy process.
type Envoy struct {
	// Admin is the base URL of the admin interface, e.g. http://127.0.0.1:40123.
	Admin string

	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

// Start runs Envoy with the bootstrap, whose admin address should be 127.0.0.1:0: the port
// Envoy picks is read back from --admin-address-path. Extra args are appended (e.g.
// "--service-node", "proxy-1"). Envoy is killed by its PID when the test ends, and its log is
// printed if the test failed.
func Start(t testing.TB, bootstrap []byte, args ...string) *Envoy {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bootstrap.yaml")
	if err := os.WriteFile(cfg, bootstrap, 0o600); err != nil {
		t.Fatal(err)
	}
	e := &Envoy{logPath: filepath.Join(dir, "envoy.log"), done: make(chan struct{})}
	addrPath := filepath.Join(dir, "admin-address")
	argv := append([]string{
		"-c", cfg,
		"--use-dynamic-base-id", "--base-id-path", filepath.Join(dir, "base-id"),
		"--admin-address-path", addrPath,
		"--concurrency", "1",
		"--log-path", e.logPath,
		"-l", "info",
		"--drain-time-s", "1",
	}, args...)
	e.cmd = exec.Command(Binary(t), argv...)
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	e.cmd.Stdout, e.cmd.Stderr = &stderr, &stderr
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("start Envoy: %v", err)
	}
	go func() { _ = e.cmd.Wait(); close(e.done) }()
	t.Cleanup(func() {
		if e.cmd.Process != nil {
			_ = e.cmd.Process.Kill()
		}
		<-e.done
		if t.Failed() {
			t.Logf("Envoy output:\n%s\nEnvoy log (tail):\n%s", stderr.String(), e.LogTail(100))
		}
	})

	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(addrPath); err == nil && len(bytes.TrimSpace(b)) > 0 {
			e.Admin = "http://" + strings.TrimSpace(string(b))
			break
		}
		select {
		case <-e.done:
			t.Fatalf("Envoy exited at start: %v\n%s\n%s", e.cmd.ProcessState, stderr.String(), e.LogTail(50))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("Envoy did not write its admin address within 30s\n%s", e.LogTail(50))
		}
	}
	return e
}

// Stop kills Envoy by its PID and waits for it to exit.
func (e *Envoy) Stop() {
	if e.cmd.Process != nil {
		_ = e.cmd.Process.Kill()
	}
	<-e.done
}

// Exited reports whether the Envoy process has ended.
func (e *Envoy) Exited() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// LogTail returns the last n lines of Envoy's log.
func (e *Envoy) LogTail(n int) string {
	b, _ := os.ReadFile(e.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Get fetches an admin path, e.g. "/listeners" or "/config_dump?resource=dynamic_listeners".
func (e *Envoy) Get(path string) (string, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(e.Admin + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), nil
}

// Eventually polls cond every 100ms until it returns true, failing the test after timeout
// with the last error or message it gave.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FreePort returns a port on ip that is free for both TCP and UDP at the time of the call.
func FreePort(t testing.TB, ips ...string) int {
	t.Helper()
	if len(ips) == 0 {
		ips = []string{"127.0.0.1"}
	}
	for range 100 {
		l, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if portFree(port, ips) {
			return port
		}
	}
	t.Fatal("no port free on all of", ips)
	return 0
}

func portFree(port int, ips []string) bool {
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}()
	for _, ip := range ips {
		addr := net.JoinHostPort(ip, fmt.Sprint(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		closers = append(closers, l)
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		closers = append(closers, u)
	}
	return true
}
