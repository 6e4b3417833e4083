package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer.
type File struct {
	// Path is the absolute path in the image, e.g. /usr/local/bin/kubelb.
	Path string
	// Mode holds the permission bits and the type (fs.ModeDir, fs.ModeSymlink; none for a
	// regular file). The file on disk's own mode is never used.
	Mode fs.FileMode
	// UID and GID own the entry (0 is root).
	UID, GID int
	// Source is a file on disk whose content the entry gets; Data is used when it is empty.
	Source string
	// Data is the content of a regular file without Source.
	Data []byte
	// Linkname is the target of a symlink.
	Linkname string
}

// Dir returns a directory entry.
func Dir(p string, perm fs.FileMode, uid, gid int) File {
	return File{Path: p, Mode: fs.ModeDir | perm, UID: uid, GID: gid}
}

// name is the entry's name in the tar: relative, without a leading slash, as the OCI layer
// format and docker write it.
func (f File) name() string {
	n := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
	if f.Mode.IsDir() {
		n += "/"
	}
	return n
}

// LayerTar returns the uncompressed tar of files: entries sorted by path, every parent
// directory present (missing ones are added as root-owned 0755), times set to mtime, no user
// or group names and no host metadata. Two files with the same path are an error.
func LayerTar(files []File, mtime time.Time) ([]byte, error) {
	byName := map[string]File{}
	for _, f := range files {
		if !strings.HasPrefix(f.Path, "/") || path.Clean(f.Path) == "/" {
			return nil, fmt.Errorf("layer entry %q: want an absolute path below /", f.Path)
		}
		n := f.name()
		if _, dup := byName[strings.TrimSuffix(n, "/")]; dup {
			return nil, fmt.Errorf("layer entry %q appears twice", f.Path)
		}
		byName[strings.TrimSuffix(n, "/")] = f
	}
	for key := range byName {
		for dir := path.Dir(key); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if d, ok := byName[dir]; ok {
				if !d.Mode.IsDir() {
					return nil, fmt.Errorf("layer entry /%s is a parent of /%s but not a directory", dir, key)
				}
				continue
			}
			byName[dir] = Dir("/"+dir, 0o755, 0, 0)
		}
	}
	keys := make([]string, 0, len(byName))
	for k := range byName {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mtime = mtime.UTC().Truncate(time.Second)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, k := range keys {
		f := byName[k]
		hdr := &tar.Header{
			Name: f.name(), Mode: tarMode(f.Mode), Uid: f.UID, Gid: f.GID, ModTime: mtime, Format: tar.FormatUSTAR,
		}
		var content []byte
		switch {
		case f.Mode.IsDir():
			hdr.Typeflag = tar.TypeDir
		case f.Mode&fs.ModeSymlink != 0:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, f.Linkname
		case f.Mode.IsRegular():
			hdr.Typeflag = tar.TypeReg
			content = f.Data
			if f.Source != "" {
				b, err := os.ReadFile(f.Source)
				if err != nil {
					return nil, fmt.Errorf("layer entry %s: %w", f.Path, err)
				}
				content = b
			}
			hdr.Size = int64(len(content))
		default:
			return nil, fmt.Errorf("layer entry %s: unsupported mode %v", f.Path, f.Mode)
		}
		if len(hdr.Name) > 100 || len(hdr.Linkname) > 100 {
			hdr.Format = tar.FormatPAX // long names only; PAX records then hold nothing else
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.Path, err)
		}
		if _, err := tw.Write(content); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing layer tar: %w", err)
	}
	return buf.Bytes(), nil
}

// tarMode is the tar header mode of an fs.FileMode: permission bits plus setuid, setgid and
// sticky in their Unix positions.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// Layer returns a gzip-compressed OCI layer of files (see LayerTar). gzip at a fixed level
// of a fixed input is deterministic, so the layer's digest depends only on files and mtime.
func Layer(files []File, mtime time.Time) (v1.Layer, error) {
	raw, err := LayerTar(files, mtime)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression))
	if err != nil {
		return nil, fmt.Errorf("compressing layer: %w", err)
	}
	return l, nil
}
