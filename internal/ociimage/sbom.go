package ociimage

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the SBOM artifact (OCI image spec 1.1, "Guidelines for Artifact Usage").
const (
	// SPDXMediaType is the artifact type of an SBOM artifact and the media type of its blob.
	SPDXMediaType = "application/spdx+json"
	// EmptyMediaType is the config of an artifact that has none.
	EmptyMediaType = "application/vnd.oci.empty.v1+json"
)

// SPDXDocument is the part of an SPDX 2.3 JSON document the SBOMs use.
type SPDXDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      SPDXCreationInfo   `json:"creationInfo"`
	DocumentDescribes []string           `json:"documentDescribes"`
	Packages          []SPDXPackage      `json:"packages"`
	Relationships     []SPDXRelationship `json:"relationships"`
}

// SPDXCreationInfo says who made the document and when.
type SPDXCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

// SPDXPackage is one Go module (or the Go standard library) in the binary.
type SPDXPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	Checksums        []SPDXChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []SPDXExternalRef `json:"externalRefs,omitempty"`
	Comment          string            `json:"comment,omitempty"`
}

// SPDXChecksum is a checksum of a package.
type SPDXChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

// SPDXExternalRef is a package URL of a package.
type SPDXExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

// SPDXRelationship relates two SPDX elements.
type SPDXRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

// SPDXFromGoBinary returns the SPDX 2.3 JSON SBOM of a Go binary: the main module (with the
// binary's SHA-256), every dependency module (a replaced module is listed as its
// replacement) and the Go standard library, from the binary's debug/buildinfo. The document
// depends only on the binary, name and created.
func SPDXFromGoBinary(binary, name string, created time.Time) ([]byte, error) {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("reading the Go build information of %s: %w", binary, err)
	}
	f, err := os.Open(binary)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("hashing %s: %w", binary, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	doc := SPDXDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: name,
		DocumentNamespace: "https://kubelb.dev/spdx/" + name + "/sha256-" + sum,
		CreationInfo: SPDXCreationInfo{Created: created.UTC().Format(time.RFC3339),
			Creators: []string{"Organization: kubelb", "Tool: kubelb.dev/kubelb/internal/ociimage"}},
		DocumentDescribes: []string{"SPDXRef-Package-main"},
	}
	settings := make([]string, 0, len(bi.Settings))
	for _, s := range bi.Settings {
		settings = append(settings, s.Key+"="+s.Value)
	}
	doc.Packages = append(doc.Packages, SPDXPackage{
		Name: bi.Main.Path, SPDXID: "SPDXRef-Package-main", VersionInfo: bi.Main.Version, DownloadLocation: "NOASSERTION",
		Checksums:    []SPDXChecksum{{Algorithm: "SHA256", ChecksumValue: sum}},
		ExternalRefs: purl(bi.Main.Path, bi.Main.Version),
		Comment:      "Go binary " + bi.Path + " built with " + bi.GoVersion + " (" + strings.Join(settings, " ") + ")",
	}, SPDXPackage{
		Name: "stdlib", SPDXID: "SPDXRef-Package-stdlib", VersionInfo: bi.GoVersion, DownloadLocation: "https://go.dev/dl/",
		ExternalRefs: purl("stdlib", bi.GoVersion),
	})
	doc.Relationships = append(doc.Relationships,
		SPDXRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Package-main"},
		SPDXRelationship{"SPDXRef-Package-main", "DEPENDS_ON", "SPDXRef-Package-stdlib"})
	deps := bi.Deps
	sort.Slice(deps, func(i, j int) bool { return deps[i].Path < deps[j].Path })
	for i, d := range deps {
		if d.Replace != nil {
			d = d.Replace
		}
		id := fmt.Sprintf("SPDXRef-Package-%d", i+1)
		doc.Packages = append(doc.Packages, SPDXPackage{
			Name: d.Path, SPDXID: id, VersionInfo: d.Version, DownloadLocation: "https://proxy.golang.org/" + d.Path + "/@v/" + d.Version + ".zip",
			ExternalRefs: purl(d.Path, d.Version), Comment: sumComment(d.Sum),
		})
		doc.Relationships = append(doc.Relationships, SPDXRelationship{"SPDXRef-Package-main", "DEPENDS_ON", id})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the SBOM: %w", err)
	}
	return append(out, '\n'), nil
}

func purl(path, version string) []SPDXExternalRef {
	loc := "pkg:golang/" + path
	if version != "" && version != "(devel)" {
		loc += "@" + version
	}
	return []SPDXExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: loc}}
}

func sumComment(sum string) string {
	if sum == "" {
		return ""
	}
	return "go.sum hash " + sum
}

// SBOMArtifact returns the SPDX SBOM of binary (see SPDXFromGoBinary) as an OCI 1.1
// artifact: an image manifest of artifactType application/spdx+json, the empty config, one
// layer holding the document, and subject the manifest of img.
func SBOMArtifact(img v1.Image, name string, p Platform, binary string, created time.Time) (v1.Image, error) {
	doc, err := SPDXFromGoBinary(binary, name, created)
	if err != nil {
		return nil, err
	}
	subject, err := partial.Descriptor(img)
	if err != nil {
		return nil, fmt.Errorf("describing the subject: %w", err)
	}
	title := fmt.Sprintf("%s-%s-%s.spdx.json", name, p.OS, p.Architecture)
	return Artifact(SPDXMediaType, doc, title, v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		map[string]string{LabelCreated: created.UTC().Format(time.RFC3339)})
}

// emptyJSON is the content of the empty descriptor, "{}".
var emptyJSON = []byte("{}")

// Artifact returns an OCI 1.1 artifact manifest (an image manifest with artifactType, the
// empty config and one blob) that refers to subject.
func Artifact(artifactType string, blob []byte, title string, subject v1.Descriptor, annotations map[string]string) (v1.Image, error) {
	cfgHash, cfgSize, err := v1.SHA256(bytes.NewReader(emptyJSON))
	if err != nil {
		return nil, err
	}
	layer := static.NewLayer(blob, types.MediaType(artifactType))
	lh, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: artifactType,
		Config: v1.Descriptor{MediaType: EmptyMediaType, Digest: cfgHash, Size: cfgSize, Data: emptyJSON},
		Layers: []v1.Descriptor{{MediaType: types.MediaType(artifactType), Digest: lh, Size: int64(len(blob)),
			Annotations: map[string]string{LabelTitle: title}}},
		Subject: &subject, Annotations: annotations,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the artifact manifest: %w", err)
	}
	return partial.CompressedToImage(&artifact{manifest: raw, layer: layer, layerDigest: lh})
}

// artifact is the partial.CompressedImageCore of an Artifact.
type artifact struct {
	manifest    []byte
	layer       v1.Layer
	layerDigest v1.Hash
}

func (a *artifact) RawConfigFile() ([]byte, error)      { return emptyJSON, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }

func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if h == a.layerDigest {
		return a.layer, nil
	}
	return nil, fmt.Errorf("artifact has no blob %s", h)
}
