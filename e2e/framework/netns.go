package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// InNetnsEnv marks a test binary re-executed inside its private network namespace; its value
// is what runs there ("*" for the whole binary, else one test's name).
const InNetnsEnv = "KUBELB_E2E_NETNS"

// NetnsHostAddress is the namespace's own non-loopback address: kube-apiserver picks the
// address it advertises from the default route.
const NetnsHostAddress = "10.245.0.1"

// SetupNetns brings lo up in a fresh network namespace and makes 10.244.0.0/15 (PodCIDR and
// LoadBalancerCIDR) local, with a default route on lo (source NetnsHostAddress) so nothing
// can be sent anywhere else. It does so once per process; later calls return the first
// call's result.
func SetupNetns() error {
	netnsOnce.Do(func() { netnsErr = setupNetns() })
	return netnsErr
}

func setupNetns() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", NetnsHostAddress + "/32", "dev", "lo"},
		{"route", "add", "local", "10.244.0.0/15", "dev", "lo"},
		{"route", "add", "default", "dev", "lo", "src", NetnsHostAddress},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	return nil
}

// ReexecInNetns runs this test binary again with args inside a private user, network and PID
// namespace (InNetnsEnv set to what), with its output on ours, and returns its exit code.
// `unshare` needs no root; the test binary is PID 1 of its PID namespace, so when it ends (or
// is killed, or unshare is) the kernel kills every process it started — kube-apiserver,
// etcd, kube-controller-manager, the binaries, Envoy, the played Pods. The namespace mounts
// its own /proc (--mount-proc), so /proc/<pid> of a process the harness started is that
// process (ProcessCPU, ProcessPeakRSS), not the host's process of the same number.
func ReexecInNetns(what string, args []string) (int, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return 1, fmt.Errorf("the harness needs unshare (util-linux) to make its network namespace: %w", err)
	}
	cmd := exec.Command(unshare, append([]string{"--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--", os.Args[0]}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), InNetnsEnv+"="+what)
	// The harness dies with this process (e.g. when `go test` times it out).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), nil
		}
		return 1, fmt.Errorf("running the harness in a network namespace: %w", err)
	}
	return 0, nil
}

var (
	netnsOnce sync.Once
	netnsErr  error
)

// PrivateNetwork runs the calling top-level test in a private network namespace, where Pod
// IPs (PodCIDR) are bound on the namespace's own lo and no packet leaves it, so a test can
// run the real kube-controller-manager with the played kubelet and kube-proxy (the API server
// refuses loopback endpoints in EndpointSlices). In the original process it runs the test
// binary again inside the namespace for this test alone, fails the test when that run fails,
// and returns false: the caller returns at once. Inside the namespace it returns true and
// the test goes on.
func PrivateNetwork(t *testing.T) bool {
	t.Helper()
	if v := os.Getenv(InNetnsEnv); v == t.Name() || v == "*" {
		if err := SetupNetns(); err != nil {
			t.Fatalf("setting up the network namespace: %v", err)
		}
		return true
	}
	args := []string{"-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.count=1", fmt.Sprintf("-test.v=%v", testing.Verbose())}
	if deadline, ok := t.Deadline(); ok {
		// A minute before ours: the run in the namespace times out first and says where.
		if left := time.Until(deadline) - time.Minute; left > 0 {
			args = append(args, "-test.timeout="+left.String())
		}
	}
	code, err := ReexecInNetns(t.Name(), args)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("%s failed in its network namespace (exit code %d; its output is above)", t.Name(), code)
	}
	return false
}

// RunInNetns is a TestMain that runs the whole test binary in its own private network
// namespace (ReexecInNetns, then SetupNetns inside it) and exits with its code; what names
// the package in error messages.
func RunInNetns(m *testing.M, what string) {
	if os.Getenv(InNetnsEnv) == "" {
		code, err := ReexecInNetns("*", os.Args[1:])
		if err != nil {
			fmt.Fprintln(os.Stderr, what+":", err)
		}
		os.Exit(code)
	}
	if err := SetupNetns(); err != nil {
		fmt.Fprintln(os.Stderr, what+": setting up the network namespace:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
