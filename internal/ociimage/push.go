package ociimage

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Pushed is where Push put an image.
type Pushed struct {
	// Index is the reference of the multi-platform index by digest.
	Index name.Digest
	// SBOMs are the SBOM artifacts by digest, in the order of Built.Images.
	SBOMs []name.Digest
}

// Push pushes b's index (with every platform's manifest and layers) to ref, then each SBOM
// artifact by digest to the same repository. The registry lists an artifact among the
// referrers of its subject (the OCI 1.1 referrers API); when it does not implement that API
// the artifact is added to the fallback tag sha256-<subject digest> (go-containerregistry
// does both). plainHTTP speaks HTTP instead of HTTPS, as a test registry on loopback needs
// (for loopback, RFC 1918 and .local registries go-containerregistry tries HTTP after HTTPS
// anyway). Credentials come from the Docker config
// (~/.docker/config.json, $DOCKER_CONFIG), as `docker login` writes them; none: anonymous.
func Push(ctx context.Context, b *Built, ref string, plainHTTP bool) (Pushed, error) {
	var opts []name.Option
	if plainHTTP {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return Pushed{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if err := remote.WriteIndex(r, b.Index, ropts...); err != nil {
		return Pushed{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := b.Index.Digest()
	if err != nil {
		return Pushed{}, err
	}
	out := Pushed{Index: r.Context().Digest(d.String())}
	for _, bi := range b.Images {
		if bi.SBOM == nil {
			continue
		}
		sd, err := partial.Digest(bi.SBOM)
		if err != nil {
			return out, err
		}
		sref := r.Context().Digest(sd.String())
		if err := remote.Write(sref, bi.SBOM, ropts...); err != nil {
			return out, fmt.Errorf("pushing the SBOM of %s for %s: %w", ref, bi.Platform, err)
		}
		out.SBOMs = append(out.SBOMs, sref)
	}
	return out, nil
}
