package process

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestNotYetWarning(t *testing.T) {
	t.Parallel()
	notYet := []string{"enable-gateway-api", "use-ingress-class", "gateway-api-crds-channel"}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"nothing given", nil, ""},
		{"only implemented flags", []string{"--debug"}, ""},
		{"not-yet flags given with their defaults", []string{"--enable-gateway-api=false", "--use-ingress-class=true"}, ""},
		{"one set", []string{"--enable-gateway-api"},
			"WARNING: these flags are accepted but not implemented yet, and are ignored: --enable-gateway-api=true"},
		{"several, in the order of the list", []string{"--gateway-api-crds-channel=experimental", "--debug", "--use-ingress-class=false", "--enable-gateway-api"},
			"WARNING: these flags are accepted but not implemented yet, and are ignored: --enable-gateway-api=true, --use-ingress-class=false, --gateway-api-crds-channel=experimental"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewFlagSet("test")
			fs.Bool("enable-gateway-api", false, "")
			fs.Bool("use-ingress-class", true, "")
			fs.Var(&Enum{Value: "standard", Allowed: []string{"standard", "experimental"}}, "gateway-api-crds-channel", "")
			fs.Bool("debug", false, "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := fs.NotYetWarning(notYet); got != tc.want {
				t.Errorf("warning\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestNotYetUndocumented(t *testing.T) {
	t.Parallel()
	doc := "| flag | default | meaning |\n" +
		"| `--a` | `false` | **not yet**: accepted and ignored |\n" +
		"| `--b` | `false` | does b; see `--a` |\n" +
		"text mentioning `--c` not yet\n" +
		"| `--d` | `false` | not yet: accepted and ignored |\n" +
		"| `--d` | `false` | does d in the other binary |\n"
	got := NotYetUndocumented(doc, []string{"a", "b", "c", "d"})
	if !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Fatalf("got %v, want [b c d]", got)
	}
}

func TestDocSection(t *testing.T) {
	doc := "# T\n\n## `a`\n| `--x` | not yet |\n### sub\nmore\n## `b`\n| `--x` | works |\n"
	if got := DocSection(doc, "## `a`"); got != "## `a`\n| `--x` | not yet |\n### sub\nmore\n" {
		t.Errorf("section a: %q", got)
	}
	if got := DocSection(doc, "## `b`"); got != "## `b`\n| `--x` | works |\n" {
		t.Errorf("section b: %q", got)
	}
	if got := DocSection(doc, "## `c`"); got != "" {
		t.Errorf("missing section: %q", got)
	}
	if missing := NotYetUndocumented(DocSection(doc, "## `a`"), []string{"x"}); len(missing) != 0 {
		t.Errorf("flag x is marked in section a: %v", missing)
	}
}

// TestVersionFlag: --version makes Parse return ErrVersion whatever else is given (a required
// flag missing, a flag after it), and only a bad flag is reported first.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want error
	}{
		{"alone", []string{"--version"}, ErrVersion},
		{"with a required flag missing", []string{"--version", "--debug"}, ErrVersion},
		{"set to false", []string{"--version=false", "--name=x"}, nil},
		{"absent", []string{"--name=x"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewFlagSet("test")
			fs.String("name", "", "")
			fs.Bool("debug", false, "")
			fs.Required("name")
			if err := fs.Parse(tc.args); !errors.Is(err, tc.want) {
				t.Fatalf("Parse(%q) = %v, want %v", tc.args, err, tc.want)
			}
		})
	}
	if err := NewFlagSet("test").Parse([]string{"--version", "--nope"}); err == nil || errors.Is(err, ErrVersion) ||
		!strings.Contains(err.Error(), "--nope") {
		t.Errorf("an unknown flag with --version: %v, want the unknown flag named", err)
	}
	if got, want := VersionLine("kubelb"), "kubelb v0.0.0-dev (commit unknown, built unknown)"; got != want {
		t.Errorf("VersionLine = %q, want %q (the defaults of an unstamped test binary)", got, want)
	}
}

func TestUsageByTopic(t *testing.T) {
	t.Parallel()
	fs := NewFlagSet("test")
	fs.Var(&Enum{Value: "a", Allowed: []string{"a", "b"}}, "choice", "A choice.")
	fs.Bool("loose", false, "Of no topic.")
	fs.Topic("Choices", "choice")
	var b strings.Builder
	fs.Usage(&b, "Test.")
	want := "Test.\n\nUsage: test [flags]\n\nChoices:\n  --choice a|b\n      A choice. (default \"a\")\n\nOther flags:\n" +
		"  --loose\n      Of no topic. (default \"false\")\n  --version\n      Print the version, commit and build date, and exit. (default \"false\")\n"
	if b.String() != want {
		t.Errorf("usage:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := fs.Untopical(); !slices.Equal(got, []string{"loose", "version"}) {
		t.Errorf("Untopical() = %v", got)
	}
}

// A failing binary's last line says why: log lines written after it (controller-runtime's
// stop sequence logs from goroutines) are dropped once the log is closed.
func TestClosedLogDropsLaterLines(t *testing.T) {
	var b strings.Builder
	w := &closableWriter{w: &b}
	fmt.Fprintln(w, "INFO before")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := fmt.Fprintln(w, "INFO Stopping and waiting for caches"); err != nil || n == 0 {
		t.Fatalf("a write after Close returned %d, %v; want it accepted and dropped", n, err)
	}
	if got := b.String(); got != "INFO before\n" {
		t.Fatalf("log after Close = %q, want only the line before it", got)
	}
}
