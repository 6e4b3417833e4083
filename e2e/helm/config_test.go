package helm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.AssetsDir(t), "kubectl"), args...)
	cmd.Dir = testsupport.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Decode(kubectl(t, "kustomize", filepath.Join("config", dir)))
	if err != nil {
		t.Fatalf("parsing kustomize output of config/%s: %v", dir, err)
	}
	return objs
}

// TestConfigRBACGenerated: config/rbac/role.yaml is what controller-gen makes from the
// controllers' +kubebuilder:rbac markers today, and every Role in it is bound to the
// manager's ServiceAccount.
func TestConfigRBACGenerated(t *testing.T) {
	t.Parallel()
	gen := filepath.Join(testsupport.RepoRoot(), "bin", "controller-gen", "v0.21.0", "controller-gen")
	if _, err := os.Stat(gen); err != nil {
		t.Fatalf("controller-gen not found at %s: run make tools", gen)
	}
	out := t.TempDir()
	cmd := exec.Command(gen, "rbac:roleName=kubelb", "paths=./internal/manager/...", "output:rbac:artifacts:config="+out)
	cmd.Dir = testsupport.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen rbac: %v\n%s", err, b)
	}
	want, err := os.ReadFile(filepath.Join(out, "role.yaml"))
	if os.IsNotExist(err) {
		want = nil // no markers yet
	} else if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(testsupport.RepoRoot(), "config", "rbac", "role.yaml"))
	if string(got) != string(want) {
		t.Fatalf("config/rbac/role.yaml is stale: run make generate")
	}
	roles, err := Decode(string(got))
	if err != nil {
		t.Fatal(err)
	}
	bindings := map[string]bool{}
	for _, o := range kustomize(t, "rbac") {
		if o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "RoleBinding" {
			ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
			name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				sm := s.(map[string]any)
				if sm["kind"] == "ServiceAccount" && sm["name"] == "kubelb" && sm["namespace"] == "kubelb" {
					bindings[fmt.Sprintf("%s %s/%s", ref, o.GetNamespace(), name)] = true
				}
			}
		}
	}
	for _, r := range roles {
		if key := fmt.Sprintf("%s %s/%s", r.GetKind(), r.GetNamespace(), r.GetName()); !bindings[key] {
			t.Errorf("generated %s is not bound to ServiceAccount kubelb/kubelb in config/rbac/role_binding.yaml", key)
		}
	}
}

// TestConfigManifestsApply applies config/default to a real API server without kubelb's CRDs
// (server-side apply, strict field validation), then config/samples, and proves the manager's
// ServiceAccount holds every permission its controllers' markers declare.
func TestConfigManifestsApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hub := testenv.Start(t, "hub", testenv.Options{WithoutKubelbCRDs: true})
	kubectl(t, "--kubeconfig", hub.Kubeconfig, "apply", "--server-side", "--field-manager=kubelb-test", "-k", "config/default")
	testsupport.Eventually(t, 30*time.Second, "kubelb CRDs to be established", func() error {
		list := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := hub.Client.List(ctx, list); err != nil {
			return err
		}
		n := 0
		for _, c := range list.Items {
			for _, cond := range c.Status.Conditions {
				if c.Spec.Group == kubelbv1alpha1.GroupVersion.Group && cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					n++
				}
			}
		}
		if want := len(generatedCRDKinds(t)); n != want {
			return fmt.Errorf("%d of %d established", n, want)
		}
		return nil
	})
	// The LoadBalancer sample lives in a tenant namespace, which the manager makes for a Tenant.
	kubectl(t, "--kubeconfig", hub.Kubeconfig, "create", "namespace", "tenant-shop")
	out := kubectl(t, "--kubeconfig", hub.Kubeconfig, "apply", "--server-side", "--field-manager=kubelb-test", "-k", "config/samples")
	for _, want := range []string{"config.kubelb.k8c.io/default serverside-applied", "tenant.kubelb.k8c.io/shop serverside-applied", "loadbalancer.kubelb.k8c.io/"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k config/samples: %q lacks %q", out, want)
		}
	}
	cfg := &kubelbv1alpha1.Config{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: "kubelb", Name: "default"}, cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Spec.EnvoyProxy.Replicas != 2 || cfg.Spec.EnvoyProxy.GracefulShutdown.DrainTimeout.Duration != 30*time.Second {
		t.Errorf("Config from the sample: %+v", cfg.Spec.EnvoyProxy)
	}
	lbs := &kubelbv1alpha1.LoadBalancerList{}
	if err := hub.Client.List(ctx, lbs, client.InNamespace("tenant-shop")); err != nil || len(lbs.Items) != 1 || lbs.Items[0].Spec.Endpoints[0].Ports[0].Port != 30080 {
		t.Errorf("LoadBalancer from the sample: %v %+v", err, lbs.Items)
	}

	markers, err := MarkerPermissions(filepath.Join(testsupport.RepoRoot(), "internal", "manager"))
	if err != nil {
		t.Fatal(err)
	}
	need := append(markers, Permissions("coordination.k8s.io", []string{"leases"}, crud, "kubelb")...)
	checkRBAC(t, ImpersonatedConfig(hub, "kubelb", "kubelb"), need, nil)
}

// TestConfigKustomizations: every kustomization builds and config/default holds the pieces
// of a hub install.
func TestConfigKustomizations(t *testing.T) {
	t.Parallel()
	objs := kustomize(t, "default")
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"} {
		if count(objs, k) == 0 {
			t.Errorf("config/default has no %s", k)
		}
	}
	if n, want := count(objs, "CustomResourceDefinition"), len(generatedCRDKinds(t)); n != want {
		t.Errorf("config/default has %d CRDs, want the %d of config/crd/bases", n, want)
	}
	d := find(t, objs, "Deployment", "kubelb")
	wantArgs(t, args(t, d), "--namespace=$(NAMESPACE)", "--listen-address=:8001")
	checkHardened(t, d)
	if img := container(t, d)["image"]; img != "ghcr.io/kubelb/kubelb-manager:v0.1.0" {
		t.Errorf("image %v", img)
	}
	if n := len(kustomize(t, "samples")); n != 3 {
		t.Errorf("config/samples has %d objects, want 3", n)
	}
}

// TestConfigAddressProviderComponents: the kustomize components config/components/node-ip and
// config/components/ipam hold the roles controller-gen makes from the providers' markers
// today; an overlay of config/default with one of them builds with --address-provider set,
// applies to a real API server, and the manager's ServiceAccount then holds every permission
// the provider's markers declare.
func TestConfigAddressProviderComponents(t *testing.T) {
	t.Parallel()
	gen := filepath.Join(testsupport.RepoRoot(), "bin", "controller-gen", "v0.21.0", "controller-gen")
	if _, err := os.Stat(gen); err != nil {
		t.Fatalf("controller-gen not found at %s: run make tools", gen)
	}
	hub := testenv.Start(t, "hub", testenv.Options{WithoutKubelbCRDs: true})
	for _, p := range []struct{ mode, pkg string }{{"node-ip", "nodeip"}, {"ipam", "ipam"}} {
		out := t.TempDir()
		cmd := exec.Command(gen, "rbac:roleName=kubelb-"+p.mode, "paths=./internal/"+p.pkg+"/...", "output:rbac:artifacts:config="+out)
		cmd.Dir = testsupport.RepoRoot()
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("controller-gen rbac: %v\n%s", err, b)
		}
		want, err := os.ReadFile(filepath.Join(out, "role.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(testsupport.RepoRoot(), "config", "components", p.mode, "role.yaml")); string(got) != string(want) {
			t.Errorf("config/components/%s/role.yaml is stale: run make generate", p.mode)
		}

		// An overlay as a user writes it (the component and config/default by relative path).
		overlay := t.TempDir()
		rel := func(dir string) string {
			r, err := filepath.Rel(overlay, filepath.Join(testsupport.RepoRoot(), "config", dir))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		k := fmt.Sprintf("resources:\n  - %s\ncomponents:\n  - %s\n", rel("default"), rel(filepath.Join("components", p.mode)))
		if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		objs, err := Decode(kubectl(t, "kustomize", overlay))
		if err != nil {
			t.Fatal(err)
		}
		wantArgs(t, args(t, find(t, objs, "Deployment", "kubelb")), "--address-provider="+p.mode, "--namespace=$(NAMESPACE)")
		find(t, objs, "ClusterRole", "kubelb-"+p.mode)
		find(t, objs, "ClusterRoleBinding", "kubelb-"+p.mode)

		kubectl(t, "--kubeconfig", hub.Kubeconfig, "apply", "--server-side", "--field-manager=kubelb-test", "--force-conflicts", "-k", overlay)
		need, err := MarkerPermissions(filepath.Join(testsupport.RepoRoot(), "internal", p.pkg))
		if err != nil {
			t.Fatal(err)
		}
		if len(need) == 0 {
			t.Fatalf("no +kubebuilder:rbac markers in internal/%s", p.pkg)
		}
		checkRBAC(t, ImpersonatedConfig(hub, "kubelb", "kubelb"), need, nil)
	}
}
