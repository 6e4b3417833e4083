package ociimage

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/testsupport"
)

// finalStage is what the last stage of a Dockerfile says about the image it makes.
type finalStage struct {
	User       string
	Entrypoint []string
	// Copies maps each COPY destination to the base name of its source.
	Copies map[string]string
}

// parseFinalStage reads the instructions after a Dockerfile's last FROM: USER, ENTRYPOINT
// (exec form) and the destinations of COPY. Continuation lines are joined; comments are
// dropped. Any other instruction there is an error, so the test notices a Dockerfile that
// grows one the image builder does not do.
func parseFinalStage(dockerfile string) (finalStage, error) {
	var lines []string
	cur := ""
	for _, l := range strings.Split(dockerfile, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") || (t == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		lines = append(lines, cur+t)
		cur = ""
	}
	last := -1
	for i, l := range lines {
		if strings.EqualFold(strings.Fields(l)[0], "FROM") {
			last = i
		}
	}
	if last < 0 {
		return finalStage{}, errorf("no FROM")
	}
	st := finalStage{Copies: map[string]string{}}
	for _, l := range lines[last+1:] {
		f := strings.Fields(l)
		switch strings.ToUpper(f[0]) {
		case "USER":
			st.User = f[1]
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(l, f[0]))), &st.Entrypoint); err != nil {
				return st, errorf("ENTRYPOINT not in exec form: %q", l)
			}
		case "COPY":
			var args []string
			for _, a := range f[1:] {
				if !strings.HasPrefix(a, "--") {
					args = append(args, a)
				}
			}
			if len(args) != 2 {
				return st, errorf("COPY with %d paths: %q", len(args), l)
			}
			st.Copies[args[1]] = path.Base(args[0])
		default:
			return st, errorf("instruction the image builder does not do: %q", l)
		}
	}
	return st, nil
}

func errorf(format string, args ...any) error { return fmt.Errorf("Dockerfile: "+format, args...) }

func TestParseFinalStage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     finalStage
		wantErr  string
	}{
		{"two stages", "FROM a AS build\nUSER 1\nCOPY x /y\nFROM b:c\n# note\nCOPY --from=build /out/kubelb \\\n  /usr/local/bin/kubelb\nUSER 65532:65532\nENTRYPOINT [\"/usr/local/bin/kubelb\"]\n",
			finalStage{User: "65532:65532", Entrypoint: []string{"/usr/local/bin/kubelb"}, Copies: map[string]string{"/usr/local/bin/kubelb": "kubelb"}}, ""},
		{"shell form", "FROM b\nENTRYPOINT /bin/x\n", finalStage{}, "exec form"},
		{"unknown instruction", "FROM b\nRUN true\n", finalStage{}, "does not do"},
		{"no FROM", "USER 1\n", finalStage{}, "no FROM"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseFinalStage(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.User != tc.want.User || strings.Join(got.Entrypoint, " ") != strings.Join(tc.want.Entrypoint, " ") ||
				len(got.Copies) != len(tc.want.Copies) || got.Copies["/usr/local/bin/kubelb"] != "kubelb" {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestDockerfilesAgreeWithImages: Dockerfile.manager and Dockerfile.ccm (their final stage)
// and the images `make images` builds have the same user, entrypoint and files: every COPY
// destination is in the image as the binary of that name, executable.
func TestDockerfilesAgreeWithImages(t *testing.T) {
	images := buildProjectImages(t)
	for _, tc := range []struct{ dockerfile, image, binary string }{
		{"Dockerfile.manager", "kubelb-manager", "kubelb"},
		{"Dockerfile.ccm", "kubelb-ccm", "ccm"},
	} {
		t.Run(tc.dockerfile, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(testsupport.RepoRoot(), tc.dockerfile))
			if err != nil {
				t.Fatal(err)
			}
			st, err := parseFinalStage(string(b))
			if err != nil {
				t.Fatal(err)
			}
			for _, bi := range images[tc.image].Images {
				cf, err := bi.Image.ConfigFile()
				if err != nil {
					t.Fatal(err)
				}
				if cf.Config.User != st.User {
					t.Errorf("%s: USER %q, image user %q", bi.Platform, st.User, cf.Config.User)
				}
				if strings.Join(cf.Config.Entrypoint, "\x00") != strings.Join(st.Entrypoint, "\x00") {
					t.Errorf("%s: ENTRYPOINT %q, image entrypoint %q", bi.Platform, st.Entrypoint, cf.Config.Entrypoint)
				}
				files := flatten(t, bi.Image)
				if len(st.Copies) != 1 {
					t.Errorf("COPY destinations %v, want the one binary", st.Copies)
				}
				for dst, src := range st.Copies {
					f, ok := files[path.Clean(dst)]
					if !ok || f.typ != tar.TypeReg || f.mode&0o111 == 0 || src != tc.binary {
						t.Errorf("%s: COPY %s %s, image has type %c mode %o there", bi.Platform, src, dst, f.typ, f.mode)
					}
				}
			}
		})
	}
}
