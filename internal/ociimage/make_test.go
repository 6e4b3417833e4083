package ociimage

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"kubelb.dev/kubelb/internal/testsupport"
)

// TestMakeImagesPush runs `make images-push` (one platform, to keep it short) against a real
// registry on loopback, as a user would: the digest it prints is what the registry serves
// under the tag, the OCI layout it leaves names the same index, and each image's SBOM is
// among the referrers of its manifest.
func TestMakeImagesPush(t *testing.T) {
	reg := testsupport.StartRegistry(t, testsupport.Loopback(testsupport.FreePort(t)))
	out := t.TempDir()
	const tag = "v9.9.9-make"
	cmd := exec.Command("make", "--no-print-directory", "images-push", "REGISTRY="+reg.Addr+"/kubelb",
		"IMAGE_TAG="+tag, "PLATFORMS=linux/amd64", "IMAGES_OUT="+out)
	cmd.Dir = testsupport.RepoRoot()
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make images-push: %v\n%s", err, b)
	}
	t.Logf("make images-push:\n%s", b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, bin := range Binaries {
		m := regexp.MustCompile(`(?m)^  pushed (\S+/` + bin.Image + `@sha256:[0-9a-f]{64})$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("make images-push printed no digest of %s", bin.Image)
		}
		printed, err := name.NewDigest(string(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		tagged, err := name.ParseReference(reg.Addr + "/kubelb/" + bin.Image + ":" + tag)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(tagged, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pulling %s: %v", tagged, err)
		}
		if d, _ := idx.Digest(); d.String() != printed.DigestStr() {
			t.Errorf("%s is %s, make printed %s", tagged, d, printed.DigestStr())
		}
		lp, err := layout.FromPath(filepath.Join(out, bin.Image))
		if err != nil {
			t.Fatal(err)
		}
		li, err := lp.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		lm, err := li.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if lm.Manifests[0].Digest.String() != printed.DigestStr() || lm.Manifests[0].Annotations[AnnotationContainerdName] != tagged.Name() {
			t.Errorf("layout %s names %+v, want %s at %s", bin.Image, lm.Manifests[0], tagged, printed.DigestStr())
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.Architecture != "amd64" {
			t.Fatalf("%s manifests %+v, want linux/amd64 alone", tagged, im.Manifests)
		}
		sub := tagged.Context().Digest(im.Manifests[0].Digest.String())
		refs, err := remote.Referrers(sub, remote.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		rm, err := refs.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(rm.Manifests) != 1 || rm.Manifests[0].ArtifactType != SPDXMediaType {
			t.Errorf("referrers of %s: %+v, want the SBOM", sub, rm.Manifests)
		}
	}
}
