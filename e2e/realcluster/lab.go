// Package realcluster boots real Kubernetes clusters for tests: every node runs a real
// kubelet, containerd, runc, the CNI bridge plugin and kube-proxy (nftables mode), and the
// first node of each cluster also etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler. Everything runs inside namespaces the test makes, on this machine, as
// real root:
//
//   - the test binary re-executes itself (Main, from TestMain) in a new "lab" network and
//     mount namespace. The lab has a bridge (LabBridge, LabAddress on LabCIDR) and holds the
//     test client (the test process, kubectl, helm) and whatever the test serves to the
//     nodes (a registry on LabAddress);
//   - each node is a process (this binary again, as the node's init) in its own network,
//     mount, PID, UTS and IPC namespaces, joined to the lab bridge by a veth pair. Its
//     components are started in those namespaces with nsenter; killing the init kills them
//     all. Its mount namespace has tmpfs over /run, /var/log and /var/lib (containerd,
//     kubelet, etcd and CNI state), files with kubelet's wanted values bound over the
//     kernel settings kubelet checks, and a read-only root: nothing a component writes
//     reaches the machine.
//
// See docs/testing.md, "Real clusters".
package realcluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const (
	// LabBridge is the lab namespace's bridge every node's veth joins.
	LabBridge = "lab0"
	// LabCIDR is the lab's network; nodes get LabCIDR addresses from .10 on.
	LabCIDR = "10.250.0.0/24"
	// LabAddress is the lab namespace's own address on LabBridge, where a test serves what
	// nodes pull (e.g. a registry at LabAddress:5000). Nodes route everything they do not
	// know to it, and the lab forwards nothing: no packet leaves the lab.
	LabAddress = "10.250.0.1"

	modeEnv    = "KUBELB_REALCLUSTER_MODE" // "lab" or "node": what this process is
	hostPIDEnv = "KUBELB_REALCLUSTER_HOSTPID"
	nodeEnv    = "KUBELB_REALCLUSTER_NODE"    // node init: the node's name
	sysctlEnv  = "KUBELB_REALCLUSTER_SYSCTLS" // node init: folder of files to bind over /proc/sys
)

var inLab bool

// Main runs the tests of a package that starts real clusters; call it from TestMain. As
// root it re-executes the test binary in a new lab network + mount namespace and exits
// with its code; the lab and everything in it die with this process. Run by the lab as a
// node's init, it never returns. Without root it runs the tests as they are, and Start
// skips saying why.
func Main(m *testing.M) {
	switch os.Getenv(modeEnv) {
	case "node":
		nodeInit()
		return
	case "lab":
		code := runLab(m)
		removeImages()
		os.Exit(code)
	}
	if os.Geteuid() != 0 {
		os.Exit(m.Run())
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), modeEnv+"=lab", hostPIDEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		fmt.Fprintf(os.Stderr, "realcluster: running the tests in a lab namespace: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runLab sets the lab namespace up and runs the tests in it.
func runLab(m *testing.M) int {
	if err := setupLab(); err != nil {
		fmt.Fprintf(os.Stderr, "realcluster: setting the lab namespace up: %v\n", err)
		return 1
	}
	inLab = true
	sweepStaleCgroups()
	sweepStaleFolders()
	return m.Run()
}

func setupLab() error {
	// Mounts made here (none today) and in the nodes never propagate to the machine.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	// A new network namespace inherits the machine's IPv4 forwarding setting: the lab
	// forwards nothing (it has no other link anyway).
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0"), 0o644); err != nil {
		return fmt.Errorf("turning forwarding off in the lab: %w", err)
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", LabBridge, "type", "bridge"},
		{"addr", "add", LabAddress + "/24", "dev", LabBridge},
		{"link", "set", LabBridge, "up"},
	} {
		if err := run("ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// hostPID is the PID (in the machine's namespace) of the process that made the lab; it
// names the run's cgroups so that a later run can tell stale ones.
func hostPID() string { return os.Getenv(hostPIDEnv) }

// MachinePID returns the PID of the test process that made the lab, which stays in the
// machine's own namespaces: /proc/<MachinePID>/ns/net and /proc/<MachinePID>/mountinfo are
// the machine's network namespace and mounts, for a test that checks it left them
// unchanged. It is 0 outside the lab.
func MachinePID() int {
	pid, err := strconv.Atoi(hostPID())
	if err != nil {
		return 0
	}
	return pid
}

// labNodeIP returns the lab address of the n-th node made in the lab (n from 0).
func labNodeIP(n int) net.IP { return net.IPv4(10, 250, 0, byte(10+n)).To4() }

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// kubeletSysctls are the kernel settings kubelet checks with protectKernelDefaults (and
// would otherwise write for the whole machine), with the values it wants. The node's
// mount namespace sees files with these values over the /proc/sys entries.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// nodeInit is a node's PID 1: it makes the node's mounts private to it, says "ready" on
// stdout, then reaps orphans until SIGTERM or SIGKILL; when it ends, the kernel kills every
// process of the node's PID namespace.
func nodeInit() {
	if err := setupNode(); err != nil {
		fmt.Printf("error: %v\n", err)
		os.Exit(1)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	fmt.Println("ready")
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

func setupNode() error {
	if err := syscall.Sethostname([]byte(os.Getenv(nodeEnv))); err != nil {
		return fmt.Errorf("setting the hostname: %w", err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting the node's /proc: %w", err)
	}
	for _, dir := range []string{"/run", "/var/log", "/var/lib"} {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=755"); err != nil {
			return fmt.Errorf("mounting a tmpfs over %s: %w", dir, err)
		}
	}
	for _, dir := range []string{"/run/tmp", "/run/home"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("making %s: %w", dir, err)
		}
	}
	sysctls := os.Getenv(sysctlEnv)
	for key := range kubeletSysctls {
		src := filepath.Join(sysctls, strings.ReplaceAll(key, "/", "."))
		if err := syscall.Mount(src, "/proc/sys/"+key, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %s over /proc/sys/%s: %w", src, key, err)
		}
	}
	// Per network namespace: the node routes for its Pods and bridged Pod traffic goes
	// through kube-proxy's rules.
	for key, value := range map[string]string{
		"net/ipv4/ip_forward":                 "1",
		"net/bridge/bridge-nf-call-iptables":  "1",
		"net/bridge/bridge-nf-call-ip6tables": "1",
	} {
		if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
			return fmt.Errorf("setting %s in the node's network namespace: %w", key, err)
		}
	}
	if err := run("ip", "link", "set", "lo", "up"); err != nil {
		return err
	}
	// Last: any write outside the tmpfs mounts fails instead of reaching the machine.
	if err := syscall.Mount("", "/", "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("remounting / read-only: %w", err)
	}
	return nil
}

// startNodeInit starts a node's init in new namespaces and waits for its "ready".
func startNodeInit(name, sysctlDir string, log *os.File) (*exec.Cmd, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), modeEnv+"=node", nodeEnv+"="+name, sysctlEnv+"="+sysctlDir)
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the init of node %s: %w", name, err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the init of node %s did not start: %q (%v)", name, strings.TrimSpace(line), err)
	}
	return cmd, nil
}
