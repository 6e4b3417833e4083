package helm

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// ruleSet expands the rules of a rendered ClusterRole or Role into permissions (in the Role's
// namespace; "" for a ClusterRole).
func ruleSet(t *testing.T, role *unstructured.Unstructured) []Permission {
	t.Helper()
	rs, _, _ := unstructured.NestedSlice(role.Object, "rules")
	strs := func(m map[string]any, k string) []string {
		v, _, _ := unstructured.NestedStringSlice(m, k)
		return v
	}
	var out []Permission
	for _, r := range rs {
		rm := r.(map[string]any)
		names := strs(rm, "resourceNames")
		if len(names) == 0 {
			names = []string{""}
		}
		if len(strs(rm, "nonResourceURLs")) > 0 {
			t.Errorf("%s %s grants non-resource URLs %v", role.GetKind(), role.GetName(), strs(rm, "nonResourceURLs"))
		}
		for _, g := range strs(rm, "apiGroups") {
			for _, p := range Permissions(g, strs(rm, "resources"), strs(rm, "verbs"), role.GetNamespace()) {
				for _, n := range names {
					p.Name = n
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// diffPermissions returns what got has beyond want, and what it lacks of want (as sets).
func diffPermissions(got, want []Permission) (extra, missing []Permission) {
	in := func(ps []Permission) map[Permission]bool {
		m := map[Permission]bool{}
		for _, p := range ps {
			m[p] = true
		}
		return m
	}
	g, w := in(got), in(want)
	for p := range g {
		if !w[p] {
			extra = append(extra, p)
		}
	}
	for p := range w {
		if !g[p] {
			missing = append(missing, p)
		}
	}
	byString := func(a, b Permission) int { return strings.Compare(a.String(), b.String()) }
	slices.SortFunc(extra, byString)
	slices.SortFunc(missing, byString)
	return extra, missing
}

// managerMarkers are the permissions the manager's controllers declare, a marker's
// namespace=kubelb standing for the manager's own namespace.
func managerMarkers(t *testing.T, namespace string) []Permission {
	t.Helper()
	ps, err := MarkerPermissions(filepath.Join(testsupport.RepoRoot(), "internal", "manager"))
	if err != nil {
		t.Fatalf("reading the manager's rbac markers: %v", err)
	}
	if len(ps) == 0 {
		t.Fatal("no +kubebuilder:rbac markers under internal/manager")
	}
	for i := range ps {
		if ps[i].Namespace == "kubelb" {
			ps[i].Namespace = namespace
		}
	}
	return ps
}

// TestManagerChartRBACIsTheMarkers: the manager chart's ClusterRole and Roles grant exactly
// what the +kubebuilder:rbac markers under internal/manager declare, no more, no less (the
// chart renders config/rbac/role.yaml, which make generate makes from the markers and copies
// into the chart), and each is bound to the manager's ServiceAccount. Leader election is
// the only hand-written Role. A marker added without `make generate`, or a rule added to the
// chart by hand, fails here.
func TestManagerChartRBACIsTheMarkers(t *testing.T) {
	t.Parallel()
	const release, namespace = "kubelb-manager", "hub-system"
	objs := Template(t, ManagerChart, release, namespace)
	var got []Permission
	bound := map[string]bool{}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			if o.GetName() == release+"-leader-election" {
				continue
			}
			if o.GetName() != release {
				t.Errorf("unexpected %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
			}
			got = append(got, ruleSet(t, o)...)
		case "ClusterRoleBinding", "RoleBinding":
			subjects := jsonString(o.Object["subjects"])
			if !strings.Contains(subjects, `"name":"`+release+`"`) || !strings.Contains(subjects, `"namespace":"`+namespace+`"`) {
				t.Errorf("%s %s/%s binds %s, not the manager's ServiceAccount", o.GetKind(), o.GetNamespace(), o.GetName(), subjects)
			}
			bound[str(t, o, "roleRef", "kind")+" "+o.GetNamespace()+"/"+str(t, o, "roleRef", "name")] = true
		}
	}
	for _, o := range objs {
		if (o.GetKind() == "ClusterRole" || o.GetKind() == "Role") && !bound[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] {
			t.Errorf("%s %s/%s is not bound", o.GetKind(), o.GetNamespace(), o.GetName())
		}
	}
	extra, missing := diffPermissions(got, managerMarkers(t, namespace))
	for _, p := range extra {
		t.Errorf("the chart grants %s, which no +kubebuilder:rbac marker under internal/manager declares", p)
	}
	for _, p := range missing {
		t.Errorf("a marker declares %s, which the chart does not grant: run make generate", p)
	}
	t.Logf("the chart grants the markers' %d permissions exactly", len(got))

	// The chart's copy is config/rbac/role.yaml as make generate wrote it.
	a, err := os.ReadFile(filepath.Join(testsupport.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(ChartDir(ManagerChart), "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("charts/%s/rbac/role.yaml differs from config/rbac/role.yaml: run make generate", ManagerChart)
	}

	// rbac.create=false renders none of it.
	for _, o := range Template(t, ManagerChart, release, namespace, "--set", "rbac.create=false") {
		if strings.HasPrefix(o.GetObjectKind().GroupVersionKind().Group, "rbac.authorization.k8s.io") {
			t.Errorf("rbac.create=false renders %s %s", o.GetKind(), o.GetName())
		}
	}
}

// TestManagerAdmissionPolicyTemplate: the admission policy is rendered by default for the
// manager's ServiceAccount (whatever its name), names the release namespace and the label and
// prefix the manager gives tenant namespaces (the Go constants), denies, and is absent when
// turned off. TestManagerChartInstallAndRBAC shows it at work on a real API server.
func TestManagerAdmissionPolicyTemplate(t *testing.T) {
	t.Parallel()
	const release, namespace = "kubelb-manager", "hub-system"
	for _, tc := range []struct {
		args []string
		sa   string
	}{
		{nil, release},
		{[]string{"--set", "serviceAccount.name=lb"}, "lb"},
	} {
		objs := Template(t, ManagerChart, release, namespace, tc.args...)
		p := find(t, objs, "ValidatingAdmissionPolicy", release+"-namespaces")
		spec := jsonString(p.Object["spec"])
		for _, want := range []string{
			`request.userInfo.username == 'system:serviceaccount:` + namespace + `:` + tc.sa + `'`,
			`'` + namespace + `'`,
			`'` + kubelbv1alpha1.LabelManagedBy + `'`,
			`== '` + kubelbv1alpha1.LabelManagedByValue + `'`,
			`startsWith('` + kubelbv1alpha1.TenantNamespacePrefix + `')`,
			`"failurePolicy":"Fail"`,
			`"operations":["CREATE","UPDATE","DELETE"]`,
			`"resources":["*/*"]`,
		} {
			if !strings.Contains(spec, want) {
				t.Errorf("policy spec lacks %s: %s", want, spec)
			}
		}
		b := find(t, objs, "ValidatingAdmissionPolicyBinding", release+"-namespaces")
		if got := jsonString(b.Object["spec"]); got != `{"policyName":"`+release+`-namespaces","validationActions":["Deny"]}` {
			t.Errorf("binding spec %s", got)
		}
	}
	objs := Template(t, ManagerChart, release, namespace, "--set", "admissionPolicy.enabled=false")
	if n := count(objs, "ValidatingAdmissionPolicy") + count(objs, "ValidatingAdmissionPolicyBinding"); n != 0 {
		t.Errorf("%d admission policy objects with admissionPolicy.enabled=false", n)
	}
}
