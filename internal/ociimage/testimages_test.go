package ociimage

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"kubelb.dev/kubelb/internal/testsupport"
)

// TestPauseImage builds the pause image for both platforms (laid out as the official one:
// /pause only, 65535:65535) and runs its binary as PID 1 of a new PID namespace: an orphan
// left in that namespace is reaped when it exits, and SIGTERM stops pause with status 0.
func TestPauseImage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	binDir := t.TempDir()
	built, err := PauseImage(ctx, testsupport.RepoRoot(), bothPlatforms, binDir, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	if len(built.Images) != 2 {
		t.Fatalf("%d platforms", len(built.Images))
	}
	for _, bi := range built.Images {
		cf, err := bi.Image.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(cf.Config.Entrypoint, " ") != "/pause" || cf.Config.User != "65535:65535" || cf.Architecture != bi.Platform.Architecture {
			t.Errorf("%s: config %+v", bi.Platform, cf.Config)
		}
		files := flatten(t, bi.Image)
		if p, ok := files["/pause"]; !ok || p.mode != 0o755 || len(files) != 1 {
			t.Errorf("%s: files %d, /pause %+v; want /pause 0755 alone", bi.Platform, len(files), p.mode)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "linux-amd64", "pause"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting pause in a new PID namespace: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	pid := cmd.Process.Pid
	// A shell entering the namespace starts a short sleep and exits: the sleep, orphaned,
	// becomes a child of PID 1 there, pause. (The sleep's output is not the pipe nsenter's
	// output goes to, or reading that would wait for the sleep to end.)
	if out, err := exec.Command("nsenter", "--target", fmt.Sprint(pid), "--pid", "--", "/bin/sh", "-c", "sleep 5 </dev/null >/dev/null 2>&1 & exit 0").CombinedOutput(); err != nil {
		t.Fatalf("nsenter: %v\n%s", err, out)
	}
	testsupport.Eventually(t, 10*time.Second, "the orphaned sleep becoming a child of pause", func() error {
		if n := len(children(t, pid, "")); n == 0 {
			return fmt.Errorf("pause has no child")
		}
		return nil
	})
	testsupport.Eventually(t, 20*time.Second, "pause reaping the sleep", func() error {
		if c := children(t, pid, ""); len(c) > 0 {
			return fmt.Errorf("pause still has children %v (states)", c)
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("pause on SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pause did not stop on SIGTERM")
	}
}

// children returns "pid:state" of the processes whose parent is ppid (state filters when set).
func children(t *testing.T, ppid int, state string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state, ppid, ...
		if len(f) > 1 && f[1] == fmt.Sprint(ppid) && (state == "" || f[0] == state) {
			out = append(out, e.Name()+":"+f[0])
		}
	}
	return out
}

// TestBackendImage builds the test backend's image for both platforms and runs its binary on
// loopback: TCP, HTTP, gRPC and HTTPS answer with the Pod name from POD_NAME.
func TestBackendImage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	binDir := t.TempDir()
	built, err := BackendImage(ctx, testsupport.RepoRoot(), bothPlatforms, binDir, HostCABundle, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	for _, bi := range built.Images {
		cf, err := bi.Image.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(cf.Config.Entrypoint, " ") != "/usr/local/bin/backend" || cf.Config.User != "65532:65532" {
			t.Errorf("%s: config %+v", bi.Platform, cf.Config)
		}
		if f := flatten(t, bi.Image)["/usr/local/bin/backend"]; f.mode != 0o755 {
			t.Errorf("%s: /usr/local/bin/backend mode %o", bi.Platform, f.mode)
		}
	}
	ports := map[string]int{}
	var args []string
	for _, k := range []string{"tcp", "http", "grpc", "https"} {
		ports[k] = testsupport.FreePort(t)
		args = append(args, fmt.Sprintf("--%s-port=%d", k, ports[k]))
	}
	proc := testsupport.StartProcessWithEnv(t, "backend", filepath.Join(binDir, "linux-amd64", "backend"),
		[]string{"POD_NAME=web-0", "NODE_NAME=node-a", "BIND_ADDRESS=127.0.0.1"}, args...)
	testsupport.Eventually(t, time.Minute, "the HTTP backend", func() error {
		r, err := testsupport.HTTPRoundTrip(testsupport.Loopback(ports["http"]), "/x")
		if err == nil && (r.Pod != "web-0" || r.Node != "node-a") {
			err = fmt.Errorf("answered as %s", r.Identity)
		}
		return err
	})
	if r, err := testsupport.TCPRoundTrip(testsupport.Loopback(ports["tcp"]), "hello"); err != nil || r.Pod != "web-0" || r.Message != "hello" {
		t.Errorf("TCP: %+v, %v", r, err)
	}
	if r, err := testsupport.GRPCRoundTrip(testsupport.Loopback(ports["grpc"])); err != nil || r.Pod != "web-0" {
		t.Errorf("gRPC: %+v, %v", r, err)
	}
	// The certificate is self-signed at start; this checks the backend speaks HTTPS and names its Pod.
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test backend on loopback
	resp, err := c.Get("https://" + testsupport.Loopback(ports["https"]) + "/y")
	if err != nil {
		t.Fatalf("HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.TLS == nil || resp.Header.Get(testsupport.HeaderPod) != "web-0" {
		t.Errorf("HTTPS answer headers %v", resp.Header)
	}
	if code, err := proc.Stop(10 * time.Second); err != nil || code != 0 {
		t.Errorf("backend on SIGTERM: code %d, %v", code, err)
	}
}

// TestEnvoyImage packs the project's Envoy binary like envoyproxy/envoy:distroless-v1.40.0 and
// runs it from the unpacked image (chroot, as 65532): the shared libraries it needs are
// there, and no shell is.
func TestEnvoyImage(t *testing.T) {
	envoy := testsupport.EnvoyBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	built, err := EnvoyImage(ctx, envoy, LinuxAMD64, HostCABundle, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	bi := built.Images[0]
	cf, err := bi.Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/usr/local/bin/envoy" || strings.Join(cf.Config.Cmd, " ") != "-c /etc/envoy/envoy.yaml" ||
		cf.Config.User != "65532:65532" || !strings.Contains(cf.Config.Labels["dev.kubelb.debian-packages"], "libc6=") {
		t.Errorf("config %+v", cf.Config)
	}
	files := flatten(t, bi.Image)
	for _, sh := range shells {
		if _, ok := files[sh]; ok {
			t.Errorf("the image has a shell: %s", sh)
		}
	}
	root := unpack(t, bi.Image)
	out, err := exec.Command("chroot", "--userspec=65532:65532", root, "/usr/local/bin/envoy", "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1.40.0") {
		t.Fatalf("envoy --version in the image: %v\n%s", err, out)
	}
	out, err = exec.Command("chroot", "--userspec=65532:65532", root, "/usr/local/bin/envoy", "--mode", "validate", "-c", "/etc/envoy/envoy.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("the default config does not validate: %v\n%s", err, out)
	}
	s, err := Summarize(built)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", s)
}

// TestWriteTestImages writes the three test images' layouts: each tarball's index.json names
// its reference, and the built images are returned for a push.
func TestWriteTestImages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	tars, built, err := WriteTestImages(ctx, testsupport.RepoRoot(), dir, testsupport.EnvoyBinary(t), []Platform{LinuxAMD64}, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{PauseRef, BackendRef, EnvoyRef} {
		if built[ref] == nil {
			t.Fatalf("no image %s", ref)
		}
		lp, err := layout.FromPath(strings.TrimSuffix(tars[ref], ".oci.tar"))
		if err != nil {
			t.Fatal(err)
		}
		ii, err := lp.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		im, err := ii.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := built[ref].Index.Digest()
		if im.Manifests[0].Annotations[AnnotationContainerdName] != ref || im.Manifests[0].Digest != want {
			t.Errorf("layout of %s names %+v", ref, im.Manifests[0])
		}
		if fi, err := os.Stat(tars[ref]); err != nil || fi.Size() == 0 {
			t.Errorf("tarball of %s: %v", ref, err)
		}
	}
}
