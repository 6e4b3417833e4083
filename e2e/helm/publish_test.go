package helm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/testsupport"
)

// TestChartsPushToRegistry runs `make charts-push` against a real OCI registry on loopback
// (helm package + helm push, over HTTP since the registry is loopback), then reads both
// charts back with `helm show chart` and `helm pull`: the version is the override, the
// appVersion the image tag, and the pulled chart given only image.registry points at the
// image `make images-push` pushes there.
func TestChartsPushToRegistry(t *testing.T) {
	reg := testsupport.StartRegistry(t, testsupport.Loopback(testsupport.FreePort(t)))
	const version, tag = "0.0.0-test.1", "v9.9.9-test"
	helmHome := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "charts-push", "REGISTRY="+reg.Addr, "IMAGE_TAG="+tag,
		"CHART_VERSION="+version, "CHARTS_OUT="+t.TempDir(), "HELM="+testsupport.HelmBinary(t))
	cmd.Dir = testsupport.RepoRoot()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"), "HELM_DATA_HOME="+filepath.Join(helmHome, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make charts-push: %v\n%s", err, out)
	} else {
		t.Logf("make charts-push:\n%s", out)
	}
	for _, tc := range []struct {
		chart, image string
		values       []string
	}{
		{ManagerChart, "kubelb-manager", nil},
		{CCMChart, "kubelb-ccm", []string{"--set", "mode=standalone"}},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			ref := "oci://" + reg.Addr + "/charts/" + tc.chart
			show := MustRun(t, "show", "chart", ref, "--version", version, "--plain-http")
			for _, want := range []string{"name: " + tc.chart + "\n", "version: " + version + "\n", "appVersion: " + tag + "\n"} {
				if !strings.Contains(show, want) {
					t.Errorf("helm show chart %s lacks %q:\n%s", ref, want, show)
				}
			}
			dir := t.TempDir()
			MustRun(t, "pull", ref, "--version", version, "--plain-http", "-d", dir)
			tgz := filepath.Join(dir, tc.chart+"-"+version+".tgz")
			out := MustRun(t, append([]string{"template", tc.chart, tgz, "--namespace", ns, "--set", "image.registry=" + reg.Addr}, tc.values...)...)
			objs, err := Decode(out)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := container(t, find(t, objs, "Deployment", tc.chart))["image"], reg.Addr+"/"+tc.image+":"+tag; got != want {
				t.Errorf("image %v, want %s (what make images-push REGISTRY=%s IMAGE_TAG=%s pushes)", got, want, reg.Addr, tag)
			}
		})
	}
}
