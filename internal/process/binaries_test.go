package process_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/testsupport"
)

// TestBinariesReadWell runs both binaries: --version prints the build, --help lists every
// flag under a topic with the choices of each enum flag, --log-level=warn keeps warnings (at
// level warn, with RFC 3339 timestamps) and drops info lines, and a start-up error names what
// was being done, in one line.
func TestBinariesReadWell(t *testing.T) {
	for _, b := range []struct {
		program, pkg string
		enums        []string // "--flag a|b" as --help shows it
		args         []string // start-up that fails at the kubeconfig
		failure      string
	}{
		{"kubelb", "./cmd/kubelb",
			[]string{"--log-format json|console", "--address-provider none|node-ip|ipam", "--envoy-xds-protocol delta|sotw"},
			[]string{"--log-level=warn", "--enable-tenant-migration", "--kubeconfig=/nonexistent/kubeconfig"},
			"kubelb: loading the management cluster's kubeconfig (--kubeconfig): "},
		{"ccm", "./cmd/ccm",
			[]string{"--log-format json|console", "--mode hub|standalone", "--node-address-type ExternalIP|InternalIP|Hostname", "--gateway-api-crds-channel standard|experimental"},
			[]string{"--log-level=warn", "--enable-tenant-migration", "--cluster-name=a", "--kubeconfig=/nonexistent/kubeconfig"},
			"ccm: loading the tenant cluster's kubeconfig (--kubeconfig): "},
	} {
		t.Run(b.program, func(t *testing.T) {
			bin := testsupport.BuildBinary(t, b.pkg)

			out, err := exec.Command(bin, "--version").Output()
			if err != nil || !strings.HasPrefix(string(out), b.program+" ") || !strings.Contains(string(out), "commit") {
				t.Errorf("--version: %v, %q", err, out)
			}

			out, err = exec.Command(bin, "--help").Output()
			if err != nil {
				t.Fatalf("--help: %v", err)
			}
			help := string(out)
			for _, want := range append([]string{"\nLogging:\n", "\nCluster access and process:\n", "--log-level string\n      Log level: debug, info, warn"}, b.enums...) {
				if !strings.Contains(help, want) {
					t.Errorf("--help does not show %q:\n%s", want, help)
				}
			}
			if strings.Contains(help, "\nOther flags:\n") {
				t.Errorf("--help lists flags of no topic (add them to a fs.Topic):\n%s", help[strings.Index(help, "\nOther flags:"):])
			}

			cmd := exec.Command(bin, b.args...)
			stderr, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("start-up with a missing kubeconfig: %v, want exit 1\n%s", err, stderr)
			}
			lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, b.failure) {
				t.Errorf("last line = %q, want it to start with %q", last, b.failure)
			}
			warned := false
			for _, l := range lines[:len(lines)-1] {
				var entry struct {
					Level string `json:"level"`
					TS    string `json:"ts"`
					Msg   string `json:"msg"`
				}
				if err := json.Unmarshal([]byte(l), &entry); err != nil {
					t.Errorf("log line is not JSON with a string ts (%v): %s", err, l)
					continue
				}
				if _, err := time.Parse(time.RFC3339Nano, entry.TS); err != nil {
					t.Errorf("ts %q is not RFC 3339: %v", entry.TS, err)
				}
				switch entry.Level {
				case "warn":
					warned = warned || strings.Contains(entry.Msg, "--enable-tenant-migration")
				case "error":
				default:
					t.Errorf("--log-level=warn wrote a %s line: %s", entry.Level, l)
				}
			}
			if !warned {
				t.Errorf("no warn line about --enable-tenant-migration:\n%s", stderr)
			}
		})
	}
}
