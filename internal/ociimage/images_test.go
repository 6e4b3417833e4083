package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"kubelb.dev/kubelb/internal/testsupport"
)

// Stamped into the test builds as `make images` stamps the real ones.
const (
	testVersion = "v9.9.9-test"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
)

var (
	testCreated = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	testLDFlags = "-s -w -X kubelb.dev/kubelb/internal/version.gitVersion=" + testVersion +
		" -X kubelb.dev/kubelb/internal/version.gitCommit=" + testCommit +
		" -X kubelb.dev/kubelb/internal/version.buildDate=" + testCreated.Format(time.RFC3339)
	testMeta = Metadata{Version: testVersion, Revision: testCommit, Source: "https://github.com/kubelb/kubelb",
		Licenses: "Apache-2.0", Created: testCreated}
	bothPlatforms = []Platform{LinuxAMD64, LinuxARM64}
)

var (
	projectOnce   sync.Once
	projectImages map[string]*Built
	projectErr    error
	projectDir    string // the binaries' temporary folder, removed when the tests end
)

// TestMain removes the folder buildProjectImages shares between the tests (about 200 MB of
// binaries) once they end: a t.TempDir would go with the first test that used it.
func TestMain(m *testing.M) {
	code := m.Run()
	if projectDir != "" {
		_ = os.RemoveAll(projectDir)
	}
	os.Exit(code)
}

// buildProjectImages builds kubelb's two images for both platforms once per test process,
// as `make images` does (cross-compiled, stamped), with binaries in a temporary folder.
func buildProjectImages(t *testing.T) map[string]*Built {
	t.Helper()
	projectOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ociimage-test-")
		if err != nil {
			projectErr = err
			return
		}
		projectDir = dir
		projectImages, projectErr = buildAll(dir)
	})
	if projectErr != nil {
		t.Fatal(projectErr)
	}
	return projectImages
}

func buildAll(binDir string) (map[string]*Built, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	out := map[string]*Built{}
	for _, b := range Binaries {
		built, err := BuildProjectImage(ctx, testsupport.RepoRoot(), b, bothPlatforms, testLDFlags, binDir, HostCABundle, testMeta)
		if err != nil {
			return nil, err
		}
		out[b.Image] = built
	}
	return out, nil
}

// TestProjectImagesReproducible builds both images for both platforms twice, compiling the
// binaries again into another folder, and wants the same digests: index, every platform's
// manifest, every SBOM.
func TestProjectImagesReproducible(t *testing.T) {
	first := buildProjectImages(t)
	again, err := buildAll(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range Binaries {
		s1, err := Summarize(first[b.Image])
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Summarize(again[b.Image])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s", s1)
		if s1.String() != s2.String() {
			t.Errorf("two builds of %s differ:\n%s\n%s", b.Image, s1, s2)
		}
		if len(s1.Platforms) != 2 || s1.Platforms[0].Platform != LinuxAMD64 || s1.Platforms[1].Platform != LinuxARM64 {
			t.Errorf("%s platforms %+v, want linux/amd64 and linux/arm64", b.Image, s1.Platforms)
		}
	}
}

// imageFile is a file of an image's flattened file system.
type imageFile struct {
	typ      byte
	mode     int64
	uid, gid int
	body     []byte
	link     string
}

// flatten reads the image's layers applied in order.
func flatten(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimSuffix(h.Name, "/")] = imageFile{h.Typeflag, h.Mode, h.Uid, h.Gid, body, h.Linkname}
	}
}

// shells are the programs a shell-less image must not have.
var shells = []string{"/bin/sh", "/bin/bash", "/bin/ash", "/bin/dash", "/usr/bin/sh", "/usr/bin/bash", "/bin/busybox"}

// TestProjectImageContents: each platform's image of kubelb and ccm runs its binary (built for
// that platform, stamped) as 65532:65532, as the entrypoint, with the OCI labels, the CA
// bundle, passwd and group naming nonroot, and no shell.
func TestProjectImageContents(t *testing.T) {
	images := buildProjectImages(t)
	hostCA, err := os.ReadFile(HostCABundle)
	if err != nil {
		t.Fatal(err)
	}
	elfMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, b := range Binaries {
		built := images[b.Image]
		ia, err := built.Index.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if ia.Annotations[LabelVersion] != testVersion || ia.Annotations[LabelRevision] != testCommit {
			t.Errorf("%s: index annotations %v", b.Image, ia.Annotations)
		}
		for _, bi := range built.Images {
			t.Run(b.Image+"/"+bi.Platform.String(), func(t *testing.T) {
				cf, err := bi.Image.ConfigFile()
				if err != nil {
					t.Fatal(err)
				}
				if cf.OS != bi.Platform.OS || cf.Architecture != bi.Platform.Architecture {
					t.Errorf("config platform %s/%s", cf.OS, cf.Architecture)
				}
				if !cf.Created.Time.Equal(testCreated) {
					t.Errorf("created %v, want %v", cf.Created, testCreated)
				}
				c := cf.Config
				if c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != BinaryPath(b.Name) || len(c.Cmd) != 0 {
					t.Errorf("user %q entrypoint %q cmd %q", c.User, c.Entrypoint, c.Cmd)
				}
				for k, v := range map[string]string{LabelTitle: b.Image, LabelVersion: testVersion, LabelRevision: testCommit,
					LabelSource: "https://github.com/kubelb/kubelb", LabelLicenses: "Apache-2.0", LabelCreated: "2026-01-02T03:04:05Z"} {
					if c.Labels[k] != v {
						t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
					}
				}
				files := flatten(t, bi.Image)
				bin := files[BinaryPath(b.Name)]
				if bin.typ != tar.TypeReg || bin.mode != 0o755 || bin.uid != 0 || bin.gid != 0 {
					t.Errorf("%s: type %c mode %o owner %d:%d", BinaryPath(b.Name), bin.typ, bin.mode, bin.uid, bin.gid)
				}
				ef, err := elf.NewFile(bytes.NewReader(bin.body))
				if err != nil {
					t.Fatalf("%s is not an ELF binary: %v", BinaryPath(b.Name), err)
				}
				if ef.Machine != elfMachine[bi.Platform.Architecture] {
					t.Errorf("%s is for %v", BinaryPath(b.Name), ef.Machine)
				}
				if interp := ef.Section(".interp"); interp != nil {
					t.Errorf("%s is dynamically linked", BinaryPath(b.Name))
				}
				if ca := files[CABundlePath]; !bytes.Equal(ca.body, hostCA) || ca.mode != 0o644 {
					t.Errorf("CA bundle: %d bytes mode %o, want the host's %d bytes, 0644", len(ca.body), ca.mode, len(hostCA))
				}
				if !strings.Contains(string(files["/etc/passwd"].body), "nonroot:x:65532:65532:") ||
					!strings.Contains(string(files["/etc/group"].body), "nonroot:x:65532:") {
					t.Errorf("passwd/group lack nonroot:\n%s%s", files["/etc/passwd"].body, files["/etc/group"].body)
				}
				if tmp := files["/tmp"]; tmp.typ != tar.TypeDir || tmp.mode != 0o1777 {
					t.Errorf("/tmp: type %c mode %o", tmp.typ, tmp.mode)
				}
				if home := files["/home/nonroot"]; home.uid != NonRoot || home.gid != NonRoot {
					t.Errorf("/home/nonroot owned by %d:%d", home.uid, home.gid)
				}
				for _, sh := range shells {
					if _, ok := files[sh]; ok {
						t.Errorf("the image has a shell: %s", sh)
					}
				}
				for p, f := range files {
					if f.typ == tar.TypeReg && f.mode&0o111 != 0 && p != BinaryPath(b.Name) {
						t.Errorf("executable %s besides the binary", p)
					}
				}
				if bi.SBOM == nil {
					t.Error("no SBOM artifact")
				}
			})
		}
	}
}

// TestProjectImageRuns unpacks the linux/amd64 image of each binary and runs its entrypoint
// with --version inside it (chroot, as the image's user): it starts from the image's files
// alone and prints the stamped version; a shell does not start there.
func TestProjectImageRuns(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("chroot needs root (the tests run as root here)")
	}
	images := buildProjectImages(t)
	for _, b := range Binaries {
		t.Run(b.Image, func(t *testing.T) {
			root := unpack(t, images[b.Image].Images[0].Image)
			out, err := exec.Command("chroot", "--userspec=65532:65532", root, BinaryPath(b.Name), "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version in the image: %v\n%s", b.Name, err, out)
			}
			want := fmt.Sprintf("%s %s (commit %s, built %s)\n", b.Name, testVersion, testCommit, testCreated.Format(time.RFC3339))
			if string(out) != want {
				t.Errorf("--version printed %q, want %q", out, want)
			}
			if out, err := exec.Command("chroot", root, "/bin/sh", "-c", "true").CombinedOutput(); err == nil {
				t.Errorf("a shell ran in the image: %s", out)
			}
		})
	}
}

// unpack writes an image's file system into a temporary folder (owners and modes kept).
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Fatalf("entry %q leaves the root", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, fs.FileMode(h.Mode).Perm())
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fs.FileMode(h.Mode).Perm()); err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		}
		if err == nil && h.Typeflag != tar.TypeSymlink {
			err = os.Chmod(p, fs.FileMode(h.Mode).Perm()|sticky(h.Mode))
		}
		if err == nil {
			err = os.Lchown(p, h.Uid, h.Gid)
		}
		if err != nil {
			t.Fatalf("unpacking %s: %v", h.Name, err)
		}
	}
}

func sticky(mode int64) fs.FileMode {
	if mode&0o1000 != 0 {
		return fs.ModeSticky
	}
	return 0
}
