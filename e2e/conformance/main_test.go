package conformance

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// inNetns marks the test binary re-executed inside its private network namespace.
const inNetns = "KUBELB_CONFORMANCE_NETNS"

// TestMain runs the conformance harness in a private network namespace: Pod IPs
// (10.244.0.0/16) and the hub load balancer's addresses (10.245.1.0/24) are not loopback, so
// the harness binds them on the namespace's own lo, and no packet leaves the namespace.
// `unshare` needs no root: the test binary re-executes itself inside a user, network and PID
// namespace, and the kernel ends them with it.
func TestMain(m *testing.M) {
	if os.Getenv(inNetns) == "" {
		os.Exit(reexecInNetns())
	}
	if err := setupNetns(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance: setting up the network namespace:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func reexecInNetns() int {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance: the harness needs unshare (util-linux) to make its network namespace:", err)
		return 1
	}
	// --pid --fork --kill-child: the test binary is PID 1 of its own PID namespace, so when it
	// ends (or is killed, or unshare is) the kernel kills every process the harness started —
	// kube-apiserver, etcd, kube-controller-manager, the binaries, Envoy, the echo Pods.
	cmd := exec.Command(unshare, append([]string{"--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--", os.Args[0]}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), inNetns+"=1")
	// The harness dies with this process (e.g. when `go test` times it out).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "conformance: running the harness in a network namespace:", err)
		return 1
	}
	return 0
}

// HostAddress is the namespace's own non-loopback address: kube-apiserver picks the address
// it advertises from the default route.
const HostAddress = "10.245.0.1"

// setupNetns brings lo up and makes 10.244.0.0/15 (Pods and load balancer addresses) local,
// with a default route on lo (source HostAddress) so nothing can be sent anywhere else.
func setupNetns() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", HostAddress + "/32", "dev", "lo"},
		{"route", "add", "local", "10.244.0.0/15", "dev", "lo"},
		{"route", "add", "default", "dev", "lo", "src", HostAddress},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	return nil
}
