package helm

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/internal/testsupport"
)

// hookAnnotations are the annotations every object of the release hook carries.
var hookAnnotations = map[string]string{"helm.sh/hook": "pre-delete", "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"}

// TestCCMReleaseHookTemplate: helm uninstall runs a pre-delete Job with the ccm's image,
// ServiceAccount, flags and hub kubeconfig and the ccm's hardening, bounded in time, which
// stops the ccm's Deployment first (its own hook Role: that one Deployment, pods listed);
// releaseOnUninstall=false renders none of it, and the standalone mode mounts no kubeconfig.
func TestCCMReleaseHookTemplate(t *testing.T) {
	t.Parallel()
	bin := testsupport.BuildBinary(t, "./cmd/ccm")
	for _, tc := range []struct {
		name       string
		values     []string
		standalone bool
		want       []string
	}{
		{name: "defaults", values: minimalCCM, want: []string{"--hub-wait=30s", "--timeout=285s"}},
		{name: "full", values: []string{"-f", FullValues(CCMChart), "--set", "release.hubWaitSeconds=5", "--set", "release.activeDeadlineSeconds=120"},
			want: []string{"--hub-wait=5s", "--timeout=105s", "--enable-gateway-api=true"}},
		{name: "standalone", values: []string{"-f", CIValues(CCMChart, "standalone-values.yaml")}, standalone: true, want: []string{"--mode=standalone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := Template(t, CCMChart, "kubelb-ccm", ns, tc.values...)
			job := find(t, objs, "Job", "kubelb-ccm-release")
			dep := find(t, objs, "Deployment", "kubelb-ccm")
			for _, o := range []*unstructured.Unstructured{job, find(t, objs, "Role", "kubelb-ccm-release"), find(t, objs, "RoleBinding", "kubelb-ccm-release")} {
				for k, v := range hookAnnotations {
					if o.GetAnnotations()[k] != v {
						t.Errorf("%s %s: annotation %s=%q, want %q", o.GetKind(), o.GetName(), k, o.GetAnnotations()[k], v)
					}
				}
			}
			checkHardened(t, job)
			a := args(t, job)
			if a[0] != "release" || !slices.Equal(a[1:len(a)-3], args(t, dep)) {
				t.Errorf("Job args %v, want release, the Deployment's %v and the release's own", a, args(t, dep))
			}
			wantArgs(t, a, append(tc.want, "--stop-deployment=kubelb/kubelb-ccm")...)
			if out, err := exec.Command(bin, append(a, "--help")...).CombinedOutput(); err != nil {
				t.Errorf("ccm rejects the Job's arguments %v: %v\n%s", a, err, out)
			}
			spec := job.Object["spec"].(map[string]any)
			pod := spec["template"].(map[string]any)["spec"].(map[string]any)
			if fmt.Sprint(spec["backoffLimit"]) != "0" || spec["activeDeadlineSeconds"] == nil || pod["restartPolicy"] != "Never" ||
				pod["serviceAccountName"] != "kubelb-ccm" || container(t, job)["image"] != container(t, dep)["image"] {
				t.Errorf("Job spec %s", jsonString(spec))
			}
			// The Job's pod is not one of the ccm's: it waits for those to go.
			labels := jsonString(spec["template"].(map[string]any)["metadata"].(map[string]any)["labels"])
			if !strings.Contains(labels, `"app.kubernetes.io/name":"kubelb-ccm-release"`) {
				t.Errorf("Job pod labels %s", labels)
			}
			vols := jsonString(pod["volumes"])
			if tc.standalone != (vols == "null") {
				t.Errorf("Job volumes %s (standalone %v)", vols, tc.standalone)
			}
			got := rolePermissions(t, objs, "kubelb-ccm-release")
			checkExactly(t, "the release hook's Role", got, []Permission{
				{Group: "apps", Resource: "deployments", Verb: "get", Namespace: ns, Name: "kubelb-ccm"},
				{Group: "apps", Resource: "deployments", Verb: "patch", Namespace: ns, Name: "kubelb-ccm"},
				{Group: "", Resource: "pods", Verb: "list", Namespace: ns},
			})
		})
	}

	objs := Template(t, CCMChart, "kubelb-ccm", ns, append(slices.Clone(minimalCCM), "--set", "releaseOnUninstall=false")...)
	for _, o := range objs {
		if strings.HasSuffix(o.GetName(), "-release") {
			t.Errorf("releaseOnUninstall=false still renders %s %s", o.GetKind(), o.GetName())
		}
	}
	if _, err := Run(t, "template", "kubelb-ccm", ChartDir(CCMChart), "--set", "kubelb.tenantName=shop", "--set", "release.activeDeadlineSeconds=30"); err == nil {
		t.Error("release.activeDeadlineSeconds=30 accepted; the release needs at least 60 s")
	}
}
