// Package helm installs kubelb's Helm charts with the real Helm CLI into real API servers and
// proves their RBAC: it impersonates the ServiceAccount a chart creates and checks, with
// SelfSubjectAccessReviews and real requests, that every permission a binary uses is granted
// and that what it must not do is denied. The e2e uses ImpersonatedKubeconfig to run the
// binaries with exactly the permissions a chart grants.
package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// Chart names under charts/.
const (
	ManagerChart = "kubelb-manager"
	CCMChart     = "kubelb-ccm"
)

// ChartDir is the folder of one of kubelb's charts.
func ChartDir(chart string) string { return filepath.Join(testsupport.RepoRoot(), "charts", chart) }

// FullValues is the chart's values file that sets every option (ci/full-values.yaml).
func FullValues(chart string) string { return filepath.Join(ChartDir(chart), "ci", "full-values.yaml") }

// CIValues is one of the chart's values files under ci/, by name ("standalone-values.yaml").
func CIValues(chart, name string) string { return filepath.Join(ChartDir(chart), "ci", name) }

// Run runs the real Helm CLI with its cache, config and data folders in the test's temporary
// folder, and returns combined output.
func Run(t testenv.TB, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(testsupport.HelmBinary(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), err
}

// MustRun is Run failing the test on an error.
func MustRun(t testenv.TB, args ...string) string {
	t.Helper()
	out, err := Run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Template renders a chart (with its CRDs) and returns the objects.
func Template(t testenv.TB, chart, release, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out := MustRun(t, append([]string{"template", release, ChartDir(chart), "--namespace", namespace, "--include-crds"}, args...)...)
	objs, err := Decode(out)
	if err != nil {
		t.Fatalf("parsing helm template output: %v", err)
	}
	return objs
}

// Decode parses a multi-document YAML stream into objects, skipping empty documents.
func Decode(s string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// Install runs `helm install` of a chart into the cluster (creating the namespace) and
// returns Helm's output. Nothing waits for pods: envtest runs none.
func Install(t testenv.TB, c *testenv.Cluster, chart, release, namespace string, args ...string) string {
	t.Helper()
	return MustRun(t, append([]string{"install", release, ChartDir(chart), "--namespace", namespace,
		"--create-namespace", "--kubeconfig", c.Kubeconfig, "--timeout", "2m"}, args...)...)
}

// ServiceAccountUser is the user name of a ServiceAccount.
func ServiceAccountUser(namespace, sa string) string {
	return "system:serviceaccount:" + namespace + ":" + sa
}

// serviceAccountGroups are the groups a ServiceAccount's token authenticates with.
func serviceAccountGroups(namespace string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

// ImpersonatedConfig is a rest config that acts as the ServiceAccount namespace/sa (user and
// groups), through the cluster's admin credentials.
func ImpersonatedConfig(c *testenv.Cluster, namespace, sa string) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: ServiceAccountUser(namespace, sa), Groups: serviceAccountGroups(namespace)}
	return cfg
}

// ImpersonatedKubeconfig writes a kubeconfig that uses the cluster's admin certificate to
// impersonate the ServiceAccount namespace/sa, so a binary started with it has exactly the
// permissions granted to that ServiceAccount.
func ImpersonatedKubeconfig(t testenv.TB, c *testenv.Cluster, namespace, sa string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = ServiceAccountUser(namespace, sa)
		ai.ImpersonateGroups = serviceAccountGroups(namespace)
	}
	p := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%s-%s.kubeconfig", c.Name, namespace, sa))
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Permission is one verb on one resource (optionally a subresource, namespace, name).
// Namespace "" means every namespace for namespaced resources.
type Permission struct {
	Group, Resource, Subresource, Verb, Namespace, Name string
}

func (p Permission) String() string {
	r := p.Resource
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	if p.Group != "" {
		r += "." + p.Group
	}
	s := p.Verb + " " + r
	if p.Name != "" {
		s += " " + p.Name
	}
	if p.Namespace != "" {
		s += " in " + p.Namespace
	}
	return s
}

// Permissions expands verbs × group/resources into permissions; a resource may carry a
// subresource ("services/status").
func Permissions(group string, resources, verbs []string, namespace string) []Permission {
	var out []Permission
	for _, r := range resources {
		res, sub, _ := strings.Cut(r, "/")
		for _, v := range verbs {
			out = append(out, Permission{Group: group, Resource: res, Subresource: sub, Verb: v, Namespace: namespace})
		}
	}
	return out
}

// Allowed asks the API server, as the identity of cfg, which of perms it holds
// (SelfSubjectAccessReview) and returns the ones it does and does not.
func Allowed(ctx context.Context, cfg *rest.Config, perms []Permission) (allowed, denied []Permission, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range perms {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Verb: p.Verb,
				Namespace: p.Namespace, Name: p.Name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("access review for %s: %w", p, err)
		}
		if r.Status.Allowed {
			allowed = append(allowed, p)
		} else {
			denied = append(denied, p)
		}
	}
	return allowed, denied, nil
}

// Rules asks the API server, as the identity of cfg, for every resource rule it holds in
// namespace (SelfSubjectRulesReview: its ClusterRoles and that namespace's Roles) and expands
// them into permissions in that namespace, one per verb, resource and name.
func Rules(ctx context.Context, cfg *rest.Config, namespace string) ([]Permission, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	r, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("rules review in %s: %w", namespace, err)
	}
	if r.Status.Incomplete {
		return nil, fmt.Errorf("rules review in %s is incomplete: %s", namespace, r.Status.EvaluationError)
	}
	var out []Permission
	for _, rule := range r.Status.ResourceRules {
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range rule.APIGroups {
			for _, p := range Permissions(g, rule.Resources, rule.Verbs, namespace) {
				for _, n := range names {
					p.Name = n
					out = append(out, p)
				}
			}
		}
	}
	return out, nil
}
