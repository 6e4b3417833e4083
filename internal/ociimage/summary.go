package ociimage

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
)

// PlatformSummary gives the digest and size of one platform's image.
type PlatformSummary struct {
	Platform Platform
	// Digest is the platform manifest's digest.
	Digest v1.Hash
	// Size is what a pull transfers: manifest, config and compressed layers, in bytes.
	Size int64
	// Uncompressed is the size of the layers' tars, about what the image takes on disk.
	Uncompressed int64
	// SBOM is the digest of the SBOM artifact (zero without one).
	SBOM v1.Hash
}

// Summary gives the digests and sizes of a built image.
type Summary struct {
	Name      string
	Index     v1.Hash
	Platforms []PlatformSummary
}

// Summarize computes the digests and sizes of b.
func Summarize(b *Built) (Summary, error) {
	d, err := b.Index.Digest()
	if err != nil {
		return Summary{}, err
	}
	s := Summary{Name: b.Name, Index: d}
	for _, bi := range b.Images {
		ps := PlatformSummary{Platform: bi.Platform}
		if ps.Digest, err = bi.Image.Digest(); err != nil {
			return s, err
		}
		m, err := bi.Image.Manifest()
		if err != nil {
			return s, err
		}
		raw, err := bi.Image.RawManifest()
		if err != nil {
			return s, err
		}
		ps.Size = int64(len(raw)) + m.Config.Size
		for _, l := range m.Layers {
			ps.Size += l.Size
		}
		layers, err := bi.Image.Layers()
		if err != nil {
			return s, err
		}
		for _, l := range layers {
			n, err := partial.UncompressedSize(l)
			if err != nil {
				return s, fmt.Errorf("sizing a layer of %s for %s: %w", b.Name, bi.Platform, err)
			}
			ps.Uncompressed += n
		}
		if bi.SBOM != nil {
			if ps.SBOM, err = bi.SBOM.Digest(); err != nil {
				return s, err
			}
		}
		s.Platforms = append(s.Platforms, ps)
	}
	return s, nil
}

// String renders the summary, one line per platform.
func (s Summary) String() string {
	out := fmt.Sprintf("%s index %s\n", s.Name, s.Index)
	for _, p := range s.Platforms {
		out += fmt.Sprintf("  %-12s %s  %6.1f MiB compressed, %6.1f MiB uncompressed", p.Platform, p.Digest,
			float64(p.Size)/(1<<20), float64(p.Uncompressed)/(1<<20))
		if p.SBOM != (v1.Hash{}) {
			out += "  sbom " + p.SBOM.String()
		}
		out += "\n"
	}
	return out
}
