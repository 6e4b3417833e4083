package ociimage

import (
	"fmt"
	"maps"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OCI annotation and label keys of the image metadata (OCI image spec, annotations.md).
const (
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelSource      = "org.opencontainers.image.source"
	LabelLicenses    = "org.opencontainers.image.licenses"
	LabelCreated     = "org.opencontainers.image.created"
	// AnnotationRefName is the tag of an image in an OCI layout's index.json.
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationContainerdName is the full reference `ctr images import` names the image by.
	AnnotationContainerdName = "io.containerd.image.name"
)

// Platform is an operating system and CPU architecture, e.g. linux/amd64.
type Platform struct {
	OS, Architecture, Variant string
}

// Linux/amd64 and linux/arm64, the platforms kubelb's images are built for.
var (
	LinuxAMD64 = Platform{OS: "linux", Architecture: "amd64"}
	LinuxARM64 = Platform{OS: "linux", Architecture: "arm64"}
)

// String returns os/arch[/variant].
func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// ParsePlatform parses os/arch[/variant].
func ParsePlatform(s string) (Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return Platform{}, fmt.Errorf("platform %q: want os/arch[/variant]", s)
	}
	p := Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

// Metadata describes an image: its OCI labels (in the config) and annotations (on the
// manifests and the index).
type Metadata struct {
	Title, Description, Version, Revision, Source, Licenses string
	// Created is the time of every timestamp in the image: the config's created, its
	// history, the layers' file times and the created label.
	Created time.Time
}

// Labels returns the org.opencontainers.image.* labels of the metadata that are set.
func (m Metadata) Labels() map[string]string {
	l := map[string]string{}
	for k, v := range map[string]string{LabelTitle: m.Title, LabelDescription: m.Description, LabelVersion: m.Version,
		LabelRevision: m.Revision, LabelSource: m.Source, LabelLicenses: m.Licenses} {
		if v != "" {
			l[k] = v
		}
	}
	if !m.Created.IsZero() {
		l[LabelCreated] = m.Created.UTC().Format(time.RFC3339)
	}
	return l
}

// Config is the runtime configuration of an image.
type Config struct {
	Entrypoint, Cmd, Env []string
	User, WorkingDir     string
	// StopSignal is the signal the runtime stops the container with ("": SIGTERM).
	StopSignal string
	// Labels are added to the metadata's labels.
	Labels map[string]string
}

// LayerSpec is one layer: its files, and the history line that says what it holds.
type LayerSpec struct {
	Comment string
	Files   []File
}

// ImageSpec is the image of one platform.
type ImageSpec struct {
	Platform Platform
	Layers   []LayerSpec
	Config   Config
	// SBOMBinary is a Go binary whose modules (debug/buildinfo) the image's SPDX SBOM lists;
	// "" attaches no SBOM.
	SBOMBinary string
}

// IndexSpec is a multi-platform image.
type IndexSpec struct {
	// Name is the image's short name, e.g. kubelb-manager (the last element of its repository).
	Name     string
	Metadata Metadata
	Images   []ImageSpec
}

// BuiltImage is the image of one platform and its SBOM artifact (nil without one).
type BuiltImage struct {
	Platform Platform
	Image    v1.Image
	SBOM     v1.Image
}

// Built is a built multi-platform image.
type Built struct {
	Name   string
	Index  v1.ImageIndex
	Images []BuiltImage
}

// Build builds every platform's image and the index over them, and the SBOM artifacts.
func Build(spec IndexSpec) (*Built, error) {
	if spec.Name == "" || len(spec.Images) == 0 {
		return nil, fmt.Errorf("image spec: want a name and at least one platform")
	}
	b := &Built{Name: spec.Name}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[Platform]bool{}
	for _, is := range spec.Images {
		if seen[is.Platform] {
			return nil, fmt.Errorf("image %s: platform %s given twice", spec.Name, is.Platform)
		}
		seen[is.Platform] = true
		img, err := buildImage(spec.Metadata, is)
		if err != nil {
			return nil, fmt.Errorf("image %s for %s: %w", spec.Name, is.Platform, err)
		}
		bi := BuiltImage{Platform: is.Platform, Image: img}
		if is.SBOMBinary != "" {
			if bi.SBOM, err = SBOMArtifact(img, spec.Name, is.Platform, is.SBOMBinary, spec.Metadata.Created); err != nil {
				return nil, fmt.Errorf("SBOM of image %s for %s: %w", spec.Name, is.Platform, err)
			}
		}
		b.Images = append(b.Images, bi)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: is.Platform.OS, Architecture: is.Platform.Architecture, Variant: is.Platform.Variant},
		}})
	}
	b.Index = mutate.Annotations(idx, spec.Metadata.Labels()).(v1.ImageIndex)
	if _, err := b.Index.Digest(); err != nil {
		return nil, fmt.Errorf("image %s: index: %w", spec.Name, err)
	}
	return b, nil
}

// buildImage builds the image of one platform.
func buildImage(meta Metadata, spec ImageSpec) (v1.Image, error) {
	created := v1.Time{Time: meta.Created.UTC().Truncate(time.Second)}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	adds := make([]mutate.Addendum, 0, len(spec.Layers))
	for _, ls := range spec.Layers {
		l, err := Layer(ls.Files, created.Time)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: l, MediaType: types.OCILayer,
			History: v1.History{Created: created, CreatedBy: ls.Comment, Comment: "kubelb.dev/kubelb/internal/ociimage"}})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("appending layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = spec.Platform.OS, spec.Platform.Architecture, spec.Platform.Variant
	cf.Created = created
	labels := meta.Labels()
	maps.Copy(labels, spec.Config.Labels)
	cf.Config = v1.Config{
		Entrypoint: spec.Config.Entrypoint, Cmd: spec.Config.Cmd, Env: spec.Config.Env,
		User: spec.Config.User, WorkingDir: spec.Config.WorkingDir, StopSignal: spec.Config.StopSignal, Labels: labels,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("writing config: %w", err)
	}
	return mutate.Annotations(img, meta.Labels()).(v1.Image), nil
}
