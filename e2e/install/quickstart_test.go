package install_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kubelb.dev/kubelb/e2e/realcluster"
)

// section is one "## " section of docs/quickstart.md and its ```sh blocks, in order.
type section struct {
	title  string
	blocks []string
}

// quickStart reads the quick start's sections; the first block of the document (the
// variables) is returned apart, as the prelude of every other block.
func quickStart(t *testing.T, path string) (prelude string, sections []section) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("reading the quick start: %v", err)
	}
	defer f.Close()
	var (
		in    bool
		block strings.Builder
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.HasPrefix(line, "## "):
			sections = append(sections, section{title: strings.TrimPrefix(line, "## ")})
		case !in && line == "```sh":
			in = true
			block.Reset()
		case in && line == "```":
			in = false
			if prelude == "" {
				prelude = block.String()
				continue
			}
			if len(sections) == 0 {
				t.Fatalf("%s: a command block before the first section", path)
			}
			s := &sections[len(sections)-1]
			s.blocks = append(s.blocks, block.String())
		case in:
			block.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	if prelude == "" || in {
		t.Fatalf("%s: no variables block, or an unterminated block", path)
	}
	return prelude, sections
}

// sectionNumber is the leading "N." of a numbered section title, or "" for none.
var sectionNumber = regexp.MustCompile(`^(\d+)\. `)

// runner runs quick-start blocks with bash in the lab, from the repository's root, with
// the variables the test sets.
type runner struct {
	t       *testing.T
	root    string
	prelude string
	env     []string
	logDir  string
	n       int
}

// run runs one block after the prelude (set -euo pipefail) and fails the test with its
// output when it fails or runs longer than timeout.
func (r *runner) run(title, block string, timeout time.Duration) time.Duration {
	r.t.Helper()
	r.n++
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	script := "set -euo pipefail\n" + r.prelude + block
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = r.root, r.env
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	logPath := filepath.Join(r.logDir, fmt.Sprintf("block-%02d.log", r.n))
	_ = os.WriteFile(logPath, append([]byte(block+"\n---\n"), out.Bytes()...), 0o600)
	if err != nil {
		r.t.Fatalf("quick start %q, block %d failed after %s (%v):\n%s\n--- output:\n%s", title, r.n, took.Round(time.Millisecond), err, block, lastLines(out.String(), 60))
	}
	first := strings.SplitN(strings.TrimSpace(block), "\n", 2)[0]
	r.t.Logf("quick start %q block %d (%s...): %s", title, r.n, first, took.Round(time.Millisecond))
	return took
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// mergedKubeconfig writes one kubeconfig with the contexts the quick start names: "hub"
// and "shop" (the tenant cluster).
func mergedKubeconfig(t *testing.T, dir string, clusters map[string]*realcluster.Cluster) string {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for ctxName, c := range clusters {
		cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
		if err != nil {
			t.Fatalf("loading %s: %v", c.Kubeconfig, err)
		}
		cur := cfg.Contexts[cfg.CurrentContext]
		if cur == nil {
			t.Fatalf("%s has no current context", c.Kubeconfig)
		}
		cluster, user := cfg.Clusters[cur.Cluster].DeepCopy(), cfg.AuthInfos[cur.AuthInfo].DeepCopy()
		// Inline the files, so that the merged kubeconfig stands alone.
		if err := clientcmdapi.FlattenConfig(&clientcmdapi.Config{
			Clusters: map[string]*clientcmdapi.Cluster{"c": cluster}, AuthInfos: map[string]*clientcmdapi.AuthInfo{"u": user},
		}); err != nil {
			t.Fatalf("flattening %s: %v", c.Kubeconfig, err)
		}
		merged.Clusters[ctxName] = cluster
		merged.AuthInfos[ctxName] = user
		merged.Contexts[ctxName] = &clientcmdapi.Context{Cluster: ctxName, AuthInfo: ctxName}
	}
	merged.CurrentContext = "hub"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
	return path
}

// serviceIP is the host address n of an IPv4 Service CIDR ("10.96.0.0/16", 80 → 10.96.0.80).
func serviceIP(t *testing.T, cidr string, n byte) string {
	t.Helper()
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil || ip.To4() == nil {
		t.Fatalf("the hub's Service CIDR %q: %v", cidr, err)
	}
	v4 := ip.To4()
	v4[3] = n
	return v4.String()
}

// goEnv returns `go env NAME` (the build caches the quick start's make must keep using
// under a HOME of its own).
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
