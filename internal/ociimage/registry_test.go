package ociimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"kubelb.dev/kubelb/internal/testsupport"
)

// TestPushAndPullByDigest pushes both images (index, platform manifests, layers, SBOMs) to a
// real registry on loopback, pulls them back by digest, and finds each platform's SBOM
// among the referrers of its manifest (the referrers API, or the tag fallback).
func TestPushAndPullByDigest(t *testing.T) {
	images := buildProjectImages(t)
	reg := testsupport.StartRegistry(t, testsupport.Loopback(testsupport.FreePort(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, b := range Binaries {
		built := images[b.Image]
		ref := reg.Addr + "/kubelb/" + b.Image + ":" + testVersion
		pushed, err := Push(ctx, built, ref, true)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := built.Index.Digest()
		if pushed.Index.DigestStr() != want.String() {
			t.Errorf("pushed %s, built %s", pushed.Index, want)
		}
		// By tag and by digest, the registry serves the index that was built.
		for _, r := range []string{ref, pushed.Index.String()} {
			pr, err := name.ParseReference(r, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			idx, err := remote.Index(pr, remote.WithContext(ctx))
			if err != nil {
				t.Fatalf("pulling %s: %v", r, err)
			}
			if d, _ := idx.Digest(); d != want {
				t.Errorf("%s has digest %s, want %s", r, d, want)
			}
		}
		for _, bi := range built.Images {
			d, _ := bi.Image.Digest()
			dref := pushed.Index.Context().Digest(d.String())
			img, err := remote.Image(dref, remote.WithContext(ctx))
			if err != nil {
				t.Fatalf("pulling %s: %v", dref, err)
			}
			pulledLayers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			builtLayers, _ := bi.Image.Layers()
			if len(pulledLayers) != len(builtLayers) {
				t.Fatalf("%s: %d layers, want %d", dref, len(pulledLayers), len(builtLayers))
			}
			for i, l := range pulledLayers {
				rc, err := l.Compressed()
				if err != nil {
					t.Fatal(err)
				}
				h := sha256.New()
				_, err = io.Copy(h, rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				bd, _ := builtLayers[i].Digest()
				if got := "sha256:" + hexString(h.Sum(nil)); got != bd.String() {
					t.Errorf("%s layer %d: content hashes to %s, want %s", dref, i, got, bd)
				}
			}
			checkSBOMReferrer(t, ctx, dref, bi)
		}
	}
}

func hexString(b []byte) string { return hex.EncodeToString(b) }

// checkSBOMReferrer finds the SPDX artifact among the referrers of a pushed platform
// manifest and reads the SBOM: SPDX 2.3 naming the binary's main module and its
// dependencies.
func checkSBOMReferrer(t *testing.T, ctx context.Context, subject name.Digest, bi BuiltImage) {
	t.Helper()
	idx, err := remote.Referrers(subject, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("referrers of %s: %v", subject, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	wantSBOM, _ := bi.SBOM.Digest()
	var found *v1.Descriptor
	for i, d := range im.Manifests {
		if d.ArtifactType == SPDXMediaType {
			found = &im.Manifests[i]
		}
	}
	if found == nil || found.Digest != wantSBOM {
		t.Fatalf("referrers of %s: %+v, want the SBOM %s", subject, im.Manifests, wantSBOM)
	}
	art, err := remote.Image(subject.Context().Digest(found.Digest.String()), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	m, err := art.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject == nil || m.Subject.Digest.String() != subject.DigestStr() || m.ArtifactType != SPDXMediaType ||
		m.Config.MediaType != EmptyMediaType || len(m.Layers) != 1 {
		t.Fatalf("SBOM manifest %+v", m)
	}
	layers, err := art.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var doc SPDXDocument
	if err := json.NewDecoder(rc).Decode(&doc); err != nil {
		t.Fatalf("SBOM is not JSON: %v", err)
	}
	checkSPDX(t, doc, "kubelb.dev/kubelb", "sigs.k8s.io/controller-runtime")
}

// checkSPDX checks an SBOM's shape and that it lists main as the described package and dep
// among the dependencies.
func checkSPDX(t *testing.T, doc SPDXDocument, main, dep string) {
	t.Helper()
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" ||
		len(doc.DocumentDescribes) != 1 || doc.DocumentNamespace == "" {
		t.Errorf("SPDX header %+v", doc)
	}
	ids := map[string]SPDXPackage{}
	for _, p := range doc.Packages {
		if _, dup := ids[p.SPDXID]; dup {
			t.Errorf("SPDXID %s twice", p.SPDXID)
		}
		ids[p.SPDXID] = p
	}
	if ids[doc.DocumentDescribes[0]].Name != main {
		t.Errorf("the SBOM describes %+v, want %s", ids[doc.DocumentDescribes[0]], main)
	}
	found := false
	for _, r := range doc.Relationships {
		if _, ok := ids[r.RelatedSPDXElement]; !ok {
			t.Errorf("relationship to unknown %s", r.RelatedSPDXElement)
		}
		if p := ids[r.RelatedSPDXElement]; r.RelationshipType == "DEPENDS_ON" && p.Name == dep && p.VersionInfo != "" &&
			len(p.ExternalRefs) == 1 && strings.HasPrefix(p.ExternalRefs[0].ReferenceLocator, "pkg:golang/"+dep+"@") {
			found = true
		}
	}
	if !found {
		t.Errorf("the SBOM lists no dependency %s", dep)
	}
}

// TestSPDXFromGoBinary reads this test binary's own build information.
func TestSPDXFromGoBinary(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, err := SPDXFromGoBinary(exe, "test", created)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SPDXFromGoBinary(exe, "test", created)
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("two SBOMs of one binary differ (err %v)", err)
	}
	var doc SPDXDocument
	if err := json.Unmarshal(a, &doc); err != nil {
		t.Fatal(err)
	}
	// A test binary records no dependencies (go version -m lists none); the Go standard
	// library is always there. TestPushAndPullByDigest checks the dependencies of kubelb's.
	checkSPDX(t, doc, "kubelb.dev/kubelb", "stdlib")
	if doc.CreationInfo.Created != "2026-01-02T03:04:05Z" {
		t.Errorf("created %q", doc.CreationInfo.Created)
	}
	if _, err := SPDXFromGoBinary("/etc/passwd", "x", created); err == nil {
		t.Error("an SBOM of a file that is no Go binary")
	}
}

// TestLayoutTarball writes an image as an OCI layout and its tarball twice: the tarballs are
// the same bytes, and the layout read back holds the named index and the SBOMs.
func TestLayoutTarball(t *testing.T) {
	images := buildProjectImages(t)
	built := images["kubelb-ccm"]
	dir := t.TempDir()
	ref := "registry.example.com/kubelb/kubelb-ccm:" + testVersion
	var sums [2][32]byte
	for i := range sums {
		tarPath := filepath.Join(dir, "ccm.oci.tar")
		if err := WriteLayoutTar(filepath.Join(dir, "layout"), tarPath, built, ref, testCreated); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(tarPath)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = sha256.Sum256(b)
	}
	if sums[0] != sums[1] {
		t.Error("two tarballs of one image differ")
	}
	p, err := layout.FromPath(filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := built.Index.Digest()
	if len(im.Manifests) != 3 || im.Manifests[0].Digest != want ||
		im.Manifests[0].Annotations[AnnotationContainerdName] != ref || im.Manifests[0].Annotations[AnnotationRefName] != testVersion {
		t.Fatalf("index.json %+v", im.Manifests)
	}
	for i, bi := range built.Images {
		d, _ := bi.SBOM.Digest()
		if m := im.Manifests[i+1]; m.Digest != d || m.ArtifactType != SPDXMediaType {
			t.Errorf("index.json entry %d: %+v, want the SBOM of %s", i+1, m, bi.Platform)
		}
	}
	idx, err := ii.ImageIndex(want)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d != want {
		t.Errorf("layout index digest %s, want %s", d, want)
	}
}
