package realcluster

// The images a real cluster needs before the images of the project exist: the sandbox
// ("pause") image and a small HTTP test image. Each is one static Go binary in one layer,
// written as an OCI image layout tar that `ctr images import` reads. This file is the one
// to swap for internal/ociimage and e2e/images once those exist.

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

const (
	// PauseImage is the sandbox image containerd is configured with (its default name in
	// Kubernetes 1.36), built here from internal/pause.
	PauseImage = "registry.k8s.io/pause:3.10.1"
	// HelloImage is the test image (internal/hello): an HTTP server answering
	// "pod=$POD_NAME" on $PORT (8080), and `hello get URL` as a client for `kubectl exec`.
	HelloImage = "kubelb.dev/realcluster/hello:v1"
	// HelloUID is the user HelloImage runs as (not root).
	HelloUID = 65532
)

// imageSpec is one single-binary image: the Go package built into /<name>.
type imageSpec struct {
	ref  string // the name containerd stores it under
	pkg  string // the Go package of its only binary
	name string // the binary's name in the image's root
	uid  int
}

var (
	pauseSpec = imageSpec{ref: PauseImage, pkg: "kubelb.dev/kubelb/e2e/realcluster/internal/pause", name: "pause", uid: 65535}
	helloSpec = imageSpec{ref: HelloImage, pkg: "kubelb.dev/kubelb/e2e/realcluster/internal/hello", name: "hello", uid: HelloUID}
)

var (
	imagesOnce sync.Once
	imagesDir  string
	imagesErr  error
	imageTars  = map[string]string{}
)

// ImageTars builds the pause and hello images once per process and returns their OCI
// layout tars (keyed by PauseImage and HelloImage). The tars live in a folder that the
// process removes in Main when the tests end.
func ImageTars() (map[string]string, error) {
	imagesOnce.Do(func() {
		imagesDir, imagesErr = os.MkdirTemp("", "realcluster-"+hostPID()+"-images-")
		if imagesErr != nil {
			imagesErr = fmt.Errorf("making the images folder: %w", imagesErr)
			return
		}
		for _, spec := range []imageSpec{pauseSpec, helloSpec} {
			tarPath, err := buildImage(imagesDir, spec)
			if err != nil {
				imagesErr = err
				return
			}
			imageTars[spec.ref] = tarPath
		}
	})
	return imageTars, imagesErr
}

func removeImages() {
	if imagesDir != "" {
		_ = os.RemoveAll(imagesDir)
	}
}

// buildImage compiles spec's package statically and writes its image as an OCI layout tar.
func buildImage(dir string, spec imageSpec) (string, error) {
	bin := filepath.Join(dir, spec.name)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, spec.pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s for image %s: %w: %s", spec.pkg, spec.ref, err, out)
	}
	content, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("reading the %s binary: %w", spec.name, err)
	}
	layout, err := ociLayout(spec, content)
	if err != nil {
		return "", fmt.Errorf("writing the OCI layout of %s: %w", spec.ref, err)
	}
	tarPath := filepath.Join(dir, spec.name+".oci.tar")
	if err := os.WriteFile(tarPath, layout, 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", tarPath, err)
	}
	return tarPath, nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    map[string]string `json:"platform,omitempty"`
}

// ociLayout returns an OCI image layout, as a tar, holding one image whose only layer is
// the binary at /<spec.name>, run as spec.uid. Its index names the image for containerd.
func ociLayout(spec imageSpec, binary []byte) ([]byte, error) {
	epoch := time.Unix(0, 0).UTC()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: spec.name, Mode: 0o755, Size: int64(len(binary)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := lw.Write(binary); err != nil {
		return nil, err
	}
	if err := lw.Close(); err != nil {
		return nil, err
	}
	blobs := map[string][]byte{}
	add := func(mediaType string, b []byte) descriptor {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[d] = b
		return descriptor{MediaType: mediaType, Digest: d, Size: len(b)}
	}
	layerDesc := add("application/vnd.oci.image.layer.v1.tar", layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": []string{"/" + spec.name},
			"User":       fmt.Sprintf("%d:%d", spec.uid, spec.uid),
			"Env":        []string{"PATH=/"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDesc.Digest}},
	})
	if err != nil {
		return nil, err
	}
	configDesc := add("application/vnd.oci.image.config.v1+json", config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        configDesc,
		"layers":        []descriptor{layerDesc},
	})
	if err != nil {
		return nil, err
	}
	manifestDesc := add("application/vnd.oci.image.manifest.v1+json", manifest)
	manifestDesc.Platform = map[string]string{"architecture": "amd64", "os": "linux"}
	manifestDesc.Annotations = map[string]string{"io.containerd.image.name": spec.ref}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []descriptor{manifestDesc},
	})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	file := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return nil, err
	}
	if err := file("index.json", index); err != nil {
		return nil, err
	}
	for _, d := range []descriptor{layerDesc, configDesc, manifestDesc} {
		if err := file("blobs/sha256/"+d.Digest[len("sha256:"):], blobs[d.Digest]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
