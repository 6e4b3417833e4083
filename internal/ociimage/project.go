package ociimage

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// NonRoot is the user and group kubelb's images run as, distroless's "nonroot".
const NonRoot = 65532

// CABundlePath is where the images hold the CA bundle (Debian's and distroless's path).
const CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

// HostCABundle is the CA bundle `make images` takes by default: the host's, which Debian's
// ca-certificates package writes.
const HostCABundle = CABundlePath

// Binaries are the two binaries of kubelb: the manager and the ccm.
var Binaries = []Binary{
	{Name: "kubelb", Image: "kubelb-manager", Package: "./cmd/kubelb",
		Description: "kubelb manager for the management cluster: allocates ports, serves Envoy xDS, runs the per-tenant Envoy fleets."},
	{Name: "ccm", Image: "kubelb-ccm", Package: "./cmd/ccm",
		Description: "kubelb ccm for tenant clusters: mirrors load balancing objects into the hub, or is a standalone load balancer."},
}

// Binary is one of kubelb's binaries and its image.
type Binary struct {
	// Name is the binary's name, installed as /usr/local/bin/<Name>.
	Name string
	// Image is the last element of the image's repository (the charts' default).
	Image string
	// Package is the Go package, relative to the repository root.
	Package string
	// Description is the image's org.opencontainers.image.description.
	Description string
}

// BinaryPath is where an image holds binary name, as the Dockerfiles put it.
func BinaryPath(name string) string { return "/usr/local/bin/" + name }

// BaseFiles are the files of distroless's static nonroot base that a static Go binary needs:
// /etc/passwd and /etc/group with root and nonroot (65532), /etc/nsswitch.conf, the CA
// bundle from caBundle, /tmp (1777) and nonroot's home. There is no shell.
func BaseFiles(caBundle string) []File {
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: CABundlePath, Mode: 0o644, Source: caBundle},
		Dir("/tmp", fs.ModeSticky|0o777, 0, 0),
		Dir("/root", 0o700, 0, 0),
		Dir("/home/nonroot", 0o700, NonRoot, NonRoot),
	}
}

// StaticImage is the spec of one platform's image of a static binary run as nonroot: a base
// layer (BaseFiles) and a layer with the binary at BinaryPath(name), the entrypoint.
func StaticImage(p Platform, name, binary, caBundle string) ImageSpec {
	return ImageSpec{
		Platform: p,
		Layers: []LayerSpec{
			{Comment: "base: /etc/passwd, /etc/group (nonroot 65532), CA bundle, /tmp", Files: BaseFiles(caBundle)},
			{Comment: "COPY " + name + " " + BinaryPath(name), Files: []File{{Path: BinaryPath(name), Mode: 0o755, Source: binary}}},
		},
		Config: Config{
			Entrypoint: []string{BinaryPath(name)},
			User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
			WorkingDir: "/home/nonroot",
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + CABundlePath},
		},
		SBOMBinary: binary,
	}
}

// ProjectImage is the spec of the image of one of kubelb's binaries, for each platform whose
// binary binaries holds (platform → path of the static binary).
func ProjectImage(b Binary, binaries map[Platform]string, caBundle string, meta Metadata) IndexSpec {
	meta.Title = b.Image
	meta.Description = b.Description
	spec := IndexSpec{Name: b.Image, Metadata: meta}
	for _, p := range sortedPlatforms(binaries) {
		spec.Images = append(spec.Images, StaticImage(p, b.Name, binaries[p], caBundle))
	}
	return spec
}

func sortedPlatforms(m map[Platform]string) []Platform {
	ps := make([]Platform, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].String() < ps[j].String() })
	return ps
}

// GoBuild cross-compiles the Go package pkg of the module in dir for linux/<p.Architecture>
// into out: a static binary (CGO_ENABLED=0), -trimpath, with ldflags (the Makefile's).
func GoBuild(ctx context.Context, dir, pkg string, p Platform, ldflags, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Variant != "" && p.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", pkg, p, err, b)
	}
	return nil
}

// BuildProjectImage cross-compiles binary b of the module in root for every platform into
// binDir/<os>-<arch>/<name> (see GoBuild) and builds its image (see ProjectImage).
func BuildProjectImage(ctx context.Context, root string, b Binary, platforms []Platform, ldflags, binDir, caBundle string, meta Metadata) (*Built, error) {
	bins := map[Platform]string{}
	for _, p := range platforms {
		out := filepath.Join(binDir, p.OS+"-"+p.Architecture+p.Variant, b.Name)
		if !filepath.IsAbs(out) {
			out = filepath.Join(root, out)
		}
		if err := GoBuild(ctx, root, b.Package, p, ldflags, out); err != nil {
			return nil, err
		}
		bins[p] = out
	}
	return Build(ProjectImage(b, bins, caBundle, meta))
}
