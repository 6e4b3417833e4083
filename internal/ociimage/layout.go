package ociimage

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
)

// WriteLayout writes b as an OCI image layout in dir (replacing what is there): index.json
// names the multi-platform index by ref (annotations io.containerd.image.name =
// ContainerdName(ref), org.opencontainers.image.ref.name = its tag, as BuildKit's OCI
// exporter does)
// and lists each SBOM artifact after it, unnamed, with its artifactType; every blob is under
// blobs/sha256/.
func WriteLayout(dir string, b *Built, ref string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clearing %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing OCI layout %s: %w", dir, err)
	}
	anns := map[string]string{AnnotationContainerdName: ContainerdName(r), AnnotationRefName: r.Identifier()}
	if err := p.AppendIndex(b.Index, layout.WithAnnotations(anns)); err != nil {
		return fmt.Errorf("writing image %s to %s: %w", ref, dir, err)
	}
	for _, bi := range b.Images {
		if bi.SBOM == nil {
			continue
		}
		if err := p.WriteImage(bi.SBOM); err != nil {
			return fmt.Errorf("writing the SBOM of %s for %s to %s: %w", ref, bi.Platform, dir, err)
		}
		d, err := partial.Descriptor(bi.SBOM)
		if err != nil {
			return err
		}
		if err := p.AppendDescriptor(v1.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size, ArtifactType: SPDXMediaType}); err != nil {
			return fmt.Errorf("listing the SBOM of %s for %s in %s: %w", ref, bi.Platform, dir, err)
		}
	}
	return nil
}

// ContainerdName is a reference as containerd and the kubelet name it: fully qualified, with
// Docker Hub as docker.io (go-containerregistry says index.docker.io), so that an imported
// image is found under the name a Pod spec's image normalizes to.
func ContainerdName(r name.Reference) string {
	reg := r.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	sep := ":"
	if _, ok := r.(name.Digest); ok {
		sep = "@"
	}
	return reg + "/" + r.Context().RepositoryStr() + sep + r.Identifier()
}

// TarDir writes the files under dir to w as a tar with sorted entries, mode 0644 files and
// 0755 directories owned by root, and every time mtime: the tarball of an OCI layout that
// `ctr images import` takes.
func TarDir(w io.Writer, dir string, mtime time.Time) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	sort.Strings(paths)
	mtime = mtime.UTC().Truncate(time.Second)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Mode: 0o644, Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		case fi.Mode().IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		default:
			return fmt.Errorf("%s: not a file or directory", p)
		}
		if len(hdr.Name) <= 100 {
			hdr.Format = tar.FormatUSTAR
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("tar %s: %w", p, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("tar %s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing tar of %s: %w", dir, err)
	}
	return nil
}

// WriteLayoutTar writes b as an OCI layout (see WriteLayout) into dir and its tarball
// (see TarDir) to tarPath.
func WriteLayoutTar(dir, tarPath string, b *Built, ref string, mtime time.Time) error {
	if err := WriteLayout(dir, b, ref); err != nil {
		return err
	}
	f, err := os.Create(tarPath)
	if err != nil {
		return fmt.Errorf("creating %s: %w", tarPath, err)
	}
	if err := TarDir(f, dir, mtime); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", tarPath, err)
	}
	return nil
}
