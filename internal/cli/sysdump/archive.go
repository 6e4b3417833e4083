package sysdump

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"sort"
	"time"
)

// Archive is the content of a sysdump: files by path, written sorted.
type Archive struct {
	files map[string][]byte
	// Errors are what could not be collected, one line each.
	Errors []string
}

// Add puts a file into the archive.
func (a *Archive) Add(path string, data []byte) {
	if a.files == nil {
		a.files = map[string][]byte{}
	}
	a.files[path] = data
}

// Failed records what could not be collected.
func (a *Archive) Failed(format string, args ...any) {
	a.Errors = append(a.Errors, fmt.Sprintf(format, args...))
}

// Paths are the files of the archive, sorted.
func (a *Archive) Paths() []string {
	paths := make([]string, 0, len(a.files))
	for p := range a.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// WriteTarGz writes the archive as a tar.gz under the directory dir, with the errors in
// dir/errors.txt.
func (a *Archive) WriteTarGz(w io.Writer, dir string, now time.Time) error {
	if len(a.Errors) > 0 {
		var b []byte
		for _, e := range a.Errors {
			b = append(b, e+"\n"...)
		}
		a.Add("errors.txt", b)
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, p := range a.Paths() {
		data := a.files[p]
		if err := tw.WriteHeader(&tar.Header{Name: dir + "/" + p, Mode: 0o644, Size: int64(len(data)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
