package ociimage

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

type tarEntry struct {
	name     string
	typ      byte
	mode     int64
	uid, gid int
	body     string
	link     string
}

func readTar(t *testing.T, b []byte) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Uname != "" || h.Gname != "" || len(h.PAXRecords) > 0 || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s carries host metadata: uname %q gname %q pax %v", h.Name, h.Uname, h.Gname, h.PAXRecords)
		}
		out = append(out, tarEntry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, string(body), h.Linkname})
		if !h.ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s: mtime %v, want the fixed time", h.Name, h.ModTime)
		}
	}
}

func TestLayerTar(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(src, []byte("binary"), 0o600); err != nil { // its own mode must not count
		t.Fatal(err)
	}
	mtime := time.Unix(1700000000, 999) // sub-second part dropped
	cases := []struct {
		name    string
		files   []File
		want    []tarEntry
		wantErr string
	}{
		{
			name: "sorted, parents added, modes and owners as given",
			files: []File{
				{Path: "/usr/local/bin/kubelb", Mode: 0o755, Source: src},
				{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root\n")},
				Dir("/tmp", fs.ModeSticky|0o777, 0, 0),
				Dir("/home/nonroot", 0o700, 65532, 65532),
				{Path: "/etc/ssl/cert.pem", Mode: fs.ModeSymlink | 0o777, Linkname: "certs/ca-certificates.crt"},
			},
			want: []tarEntry{
				{name: "etc/", typ: tar.TypeDir, mode: 0o755},
				{name: "etc/passwd", typ: tar.TypeReg, mode: 0o644, body: "root\n"},
				{name: "etc/ssl/", typ: tar.TypeDir, mode: 0o755},
				{name: "etc/ssl/cert.pem", typ: tar.TypeSymlink, mode: 0o777, link: "certs/ca-certificates.crt"},
				{name: "home/", typ: tar.TypeDir, mode: 0o755},
				{name: "home/nonroot/", typ: tar.TypeDir, mode: 0o700, uid: 65532, gid: 65532},
				{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
				{name: "usr/", typ: tar.TypeDir, mode: 0o755},
				{name: "usr/local/", typ: tar.TypeDir, mode: 0o755},
				{name: "usr/local/bin/", typ: tar.TypeDir, mode: 0o755},
				{name: "usr/local/bin/kubelb", typ: tar.TypeReg, mode: 0o755, body: "binary"},
			},
		},
		{name: "a path twice", files: []File{{Path: "/a", Mode: 0o644}, {Path: "/a/", Mode: fs.ModeDir | 0o755}}, wantErr: "appears twice"},
		{name: "a relative path", files: []File{{Path: "a", Mode: 0o644}}, wantErr: "absolute path"},
		{name: "a file as a parent", files: []File{{Path: "/a", Mode: 0o644}, {Path: "/a/b", Mode: 0o644}}, wantErr: "not a directory"},
		{name: "a missing source", files: []File{{Path: "/a", Mode: 0o644, Source: src + ".missing"}}, wantErr: "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := LayerTar(tc.files, mtime)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := readTar(t, b)
			if len(got) != len(tc.want) {
				t.Fatalf("entries\n got %+v\nwant %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("entry %d\n got %+v\nwant %+v", i, got[i], tc.want[i])
				}
			}
			// The same files in another order give the same bytes.
			rev := append([]File(nil), tc.files...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			b2, err := LayerTar(rev, mtime)
			if err != nil || !bytes.Equal(b, b2) {
				t.Errorf("reordered input gave other bytes (err %v)", err)
			}
		})
	}
}

// TestLayerDigestIsStable: the compressed layer of the same files has the same digest.
func TestLayerDigestIsStable(t *testing.T) {
	t.Parallel()
	files := []File{{Path: "/etc/passwd", Mode: 0o644, Data: bytes.Repeat([]byte("root:x:0:0\n"), 1000)}}
	var digests []string
	for range 2 {
		l, err := Layer(files, time.Unix(1700000000, 0))
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Fatalf("digests differ: %v", digests)
	}
	l, _ := Layer(files, time.Unix(1700000001, 0))
	if d, _ := l.Digest(); d.String() == digests[0] {
		t.Fatal("another mtime gave the same digest")
	}
}

func TestContainerdName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"envoyproxy/envoy:v1.40.0":                "docker.io/envoyproxy/envoy:v1.40.0",
		"docker.io/envoyproxy/envoy:distroless-1": "docker.io/envoyproxy/envoy:distroless-1",
		"nginx":                               "docker.io/library/nginx:latest",
		"registry.k8s.io/pause:3.10.1":        "registry.k8s.io/pause:3.10.1",
		"127.0.0.1:5000/kubelb/kubelb-ccm:v1": "127.0.0.1:5000/kubelb/kubelb-ccm:v1",
		"127.0.0.1:5000/a@sha256:0000000000000000000000000000000000000000000000000000000000000000": "127.0.0.1:5000/a@sha256:0000000000000000000000000000000000000000000000000000000000000000",
	} {
		r, err := name.ParseReference(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := ContainerdName(r); got != want {
			t.Errorf("ContainerdName(%s) = %s, want %s", in, got, want)
		}
	}
}
