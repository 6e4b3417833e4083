package re2_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/re2"
	"kubelb.dev/kubelb/internal/testsupport"
)

// envoyBootstrap is a static Envoy configuration with one route whose path regex is REGEX,
// and re2.max_program_size.error_level 0: Envoy then refuses every regex and says the size of
// its RE2 program ("RE2 program size of N > max program size of 0").
const envoyBootstrap = `
layered_runtime:
  layers:
  - name: static
    static_layer:
      re2.max_program_size.error_level: 0
static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 1}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: x
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
          route_config:
            virtual_hosts:
            - name: v
              domains: ["*"]
              routes:
              - match: {safe_regex: {regex: REGEX}}
                direct_response: {status: 200}
`

var envoySizeRE = regexp.MustCompile(`RE2 program size of (\d+) > max program size of 0`)

// envoyVerdict runs "envoy --mode validate" on pattern: the RE2 program size Envoy computes,
// or (size -1) why Envoy refuses the pattern itself.
func envoyVerdict(t *testing.T, dir string, i int, pattern string) (int, string) {
	quoted, err := json.Marshal(pattern)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("b%d.yaml", i))
	if err := os.WriteFile(path, []byte(strings.Replace(envoyBootstrap, "REGEX", string(quoted), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _ := exec.CommandContext(ctx, testsupport.EnvoyBinary(t), "--mode", "validate", "-c", path, "--disable-hot-restart", "-l", "critical").CombinedOutput()
	if m := envoySizeRE.FindSubmatch(out); m != nil {
		n, _ := strconv.Atoi(string(m[1]))
		return n, ""
	}
	msg := string(out)
	if _, after, ok := strings.Cut(msg, "error initializing configuration"); ok {
		msg = after
	}
	return -1, strings.TrimSpace(msg)
}

// borderline are regexes chosen to sit near the limits, or on constructs where Go's syntax and
// RE2's (as Envoy runs it: Latin-1) differ.
var borderline = []string{
	// Escapes and syntax.
	`\x{100}`, `\777`, `\377`, `\x{ff}`, `[\x{0}-\x{ff}]`, `[^\x00-\xff]`, `\p{Greek}`, `\p{^Greek}`, `\PL`, `\pN`,
	`(?<name>a)`, `(?P<n>a)`, `(?U)a+`, `[[:alpha:]]`, `[[:^alpha:]]`, `\Q.*\E`, `\z`, `\A`, `(?m)^a$`, `a{1000}`,
	`a{1001}`, `(a{500}){3}`, `(?i)é`, `(?i)µ`, `(?i)ÿ`, `(?i)[k-s]`, `(?i)[^k]`, `é`, `[é-ü]`,
	// Shapes.
	`a|`, `()`, `(|a)*`, `(a*)*`, `(a|b)*c`, `x*?`, `(?s).*`, `.*x`, `^.*$`, `(?s)^.*$`, `a(?s).*`, `^(foo|bar)`,
	`^/v1/(users|groups)/[0-9]+$`, `(?i)^/API/`, `x{0}`, `(a|ab)(c|bcd)(d*)`, `[\d\s]`, `\D`, `\W`, `\S`, `\B`,
	`^ab|^ac`, `abc|abd|aef`, `((a))`, `\bfoo\b`, `(?:$){2,4}`,
	// Repeated branches, which Go's parser merges and RE2's does not.
	`(?:a|b|b)`, `(?:(?:a|b|b)){20}`, `(?:(?:a|b|b|c|c|d|d)){10}`, `(?:ab|ab|ac)`, `(?:[ab]|a|[ab]|b){3,9}`,
	`(?:(?:(?:x|x|y)){3}){3}`, `(a|[[:alpha:]]|[[:alpha:]]){2,4}`, `[|(]a|b\|c\Q|\E`, `(?:a|(?:b|b)|(?:c|c|d)){5}`,
	// What the translation itself writes (gRPC methods, Ingress wildcard hosts, prefix rewrites).
	`^/(?:[a-z.]+)/(?:Get|List)$`, `(?i)^[^.:]+\.apps\.example\.com(:[0-9]+)?$`, `^/api(/.*)?$`,
}

// generated are seeded random regexes over the constructs tenants use.
func generated(n int) []string {
	atoms := []string{`a`, `b`, `z`, `Z`, `.`, `\d`, `\w`, `\s`, `[a-f]`, `[^/]`, `[A-Za-z0-9_]`, `é`, `(?i:x)`, `(?i:é)`,
		`\b`, `^`, `$`, `[[:alpha:]]`, `\pL`, `[^a-c]`, `/`, `-`, `\.`, `(?s:.)`, `\x{ff}`, `k`, `[\x80-\xff]`}
	rng := rand.New(rand.NewPCG(26, 6))
	var gen func(d int) string
	gen = func(d int) string {
		r := rng.Float64()
		switch {
		case d > 3 || r < 0.3:
			return atoms[rng.IntN(len(atoms))]
		case r < 0.5:
			var b strings.Builder
			for range 2 + rng.IntN(3) {
				b.WriteString(gen(d + 1))
			}
			return b.String()
		case r < 0.65:
			alts := make([]string, 2+rng.IntN(2))
			for i := range alts {
				alts[i] = gen(d + 1)
			}
			return "(" + strings.Join(alts, "|") + ")"
		case r < 0.75:
			return "(?:" + gen(d+1) + ")" + []string{"*", "+", "?", "*?", "+?", "??"}[rng.IntN(6)]
		case r < 0.85:
			lo := rng.IntN(5)
			return fmt.Sprintf("(?:%s){%d,%d}", gen(d+1), lo, lo+rng.IntN(5))
		}
		return []string{"^", "", "(?i)"}[rng.IntN(3)] + gen(d+1) + []string{"$", ""}[rng.IntN(2)]
	}
	out := make([]string, n)
	for i := range out {
		out[i] = gen(0)
	}
	// Near the limit: counted repetitions and alternations whose size crosses 80 and 100.
	for k := 60; k <= 110; k += 5 {
		out = append(out, fmt.Sprintf("^/p/x{%d}$", k), fmt.Sprintf("/(a|b)[0-9]{%d}", k-10), fmt.Sprintf("(?i)[a-z]{%d}", k))
	}
	// The one-label check of a wildcard Ingress host (translate's wildcardAuthority), with
	// suffixes around Envoy's limit: it is held to Envoy's limit itself, so ProgramSize must be
	// exact on it.
	for n := 70; n <= 95; n += 5 {
		suffix := strings.Repeat("a", n/2) + `\.` + strings.Repeat("b", n-n/2-1)
		out = append(out, `(?i)^[^.:]+\.`+suffix+`(:[0-9]+)?$`)
	}
	return out
}

// TestProgramSizeMatchesEnvoy checks ProgramSize against the real Envoy, which reports the size
// of every regex's RE2 program: every regex Envoy refuses to parse, ProgramSize refuses too;
// every regex Check lets through (ProgramSize up to MaxProgramSize) has a program Envoy
// accepts at its default limit (EnvoyMaxProgramSize). It reports how close ProgramSize is.
func TestProgramSizeMatchesEnvoy(t *testing.T) {
	patterns := append(append([]string(nil), borderline...), generated(250)...)
	type verdict struct {
		size int
		err  string
	}
	envoy := make([]verdict, len(patterns))
	dir := t.TempDir()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				envoy[i].size, envoy[i].err = envoyVerdict(t, dir, i, patterns[i])
			}
		}()
	}
	for i := range patterns {
		work <- i
	}
	close(work)
	wg.Wait()

	exact, over, under, weRefuse, tooStrict, maxUnder := 0, 0, 0, 0, 0, 0.0
	for i, p := range patterns {
		ours, err := re2.ProgramSize(p)
		e := envoy[i]
		switch {
		case e.size < 0 && err == nil:
			t.Errorf("%q: Envoy refuses it (%s), ProgramSize gives %d", p, e.err, ours)
		case e.size < 0:
		case err != nil:
			weRefuse++
			t.Logf("%q: refused (%v), Envoy accepts it (program size %d)", p, err, e.size)
		default:
			switch {
			case ours == e.size:
				exact++
			case ours > e.size:
				over++
			default:
				under++
				t.Logf("%q: ProgramSize %d, Envoy's %d", p, ours, e.size)
				maxUnder = max(maxUnder, float64(e.size)/float64(ours))
			}
			if strings.HasPrefix(p, `(?i)^[^.:]+\.`) && ours != e.size {
				t.Errorf("%q: ProgramSize %d, Envoy's %d: the wildcard host check must be exact", p, ours, e.size)
			}
			if ours <= re2.MaxProgramSize && e.size > re2.EnvoyMaxProgramSize {
				t.Errorf("%q: ProgramSize %d lets it through, Envoy's program size %d is above %d", p, ours, e.size, re2.EnvoyMaxProgramSize)
			}
			if ours > re2.MaxProgramSize && e.size <= re2.EnvoyMaxProgramSize {
				tooStrict++
			}
			if (re2.Check(p) == nil) != (ours <= re2.MaxProgramSize) {
				t.Errorf("%q: Check disagrees with ProgramSize %d", p, ours)
			}
		}
	}
	t.Logf("%d regexes: ProgramSize equal to Envoy's %d, above %d, below %d (at most %.2f times); refused though Envoy parses them: %d; "+
		"refused as too large though Envoy's program size is within %d: %d", len(patterns), exact, over, under, maxUnder, weRefuse, re2.EnvoyMaxProgramSize, tooStrict)
	if maxUnder*float64(re2.MaxProgramSize) > re2.EnvoyMaxProgramSize {
		t.Errorf("ProgramSize is below Envoy's by up to %.2f times: MaxProgramSize %d is not margin enough for Envoy's %d", maxUnder, re2.MaxProgramSize, re2.EnvoyMaxProgramSize)
	}
}
