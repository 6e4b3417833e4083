package translatecmd_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/cli/translatecmd"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

const goldenDir = "../../translate/testdata"

// run runs `kubectl kubelb translate args...` and returns its output and error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := cli.NewRoot(cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, translatecmd.Command)
	root.SetArgs(append([]string{"translate"}, args...))
	err := root.Execute()
	return out.String(), err
}

// manifests writes the objects of a golden case as the hub holds them: the hub Services
// and Secrets with the labels and owners the manager's controllers give them.
func manifests(t *testing.T, in translate.Input) string {
	t.Helper()
	var docs []client.Object
	gv := v1alpha1.GroupVersion.String()
	for i := range in.LoadBalancers {
		lb := in.LoadBalancers[i].DeepCopy()
		lb.APIVersion, lb.Kind = gv, "LoadBalancer"
		docs = append(docs, lb)
	}
	for name := range in.Addresses {
		a := in.Addresses[name]
		a.APIVersion, a.Kind = gv, "Addresses"
		docs = append(docs, &a)
	}
	for i := range in.Routes {
		r := in.Routes[i].DeepCopy()
		r.APIVersion, r.Kind = gv, "Route"
		docs = append(docs, r)
	}
	managed := func(o client.Object) {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[v1alpha1.LabelManagedBy] = v1alpha1.LabelManagedByValue
		o.SetLabels(l)
	}
	for _, svc := range translatetest.HubServicesFromStatus(in.LoadBalancers) {
		svc := svc.DeepCopy()
		svc.APIVersion, svc.Kind = "v1", "Service"
		svc.Namespace, svc.Labels[v1alpha1.LabelLoadBalancerNS] = in.Tenant, in.Tenant
		docs = append(docs, svc)
	}
	for i := range in.RouteServices {
		svc := in.RouteServices[i].DeepCopy()
		svc.APIVersion, svc.Kind = "v1", "Service"
		managed(svc)
		docs = append(docs, svc)
	}
	for i := range in.Secrets {
		s := in.Secrets[i].DeepCopy()
		s.APIVersion, s.Kind = "v1", "Secret"
		managed(s)
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: gv, Kind: "SyncSecret", Name: s.Name, UID: "u", Controller: ptr.To(true)}}
		docs = append(docs, s)
	}
	if in.OIDCCookieKeys != nil { // as the manager keeps them
		keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: hubnames.OIDCCookieKeysSecret, Namespace: in.Tenant}, Data: in.OIDCCookieKeys}
		keys.APIVersion, keys.Kind = "v1", "Secret"
		managed(keys)
		docs = append(docs, keys)
	}
	var b bytes.Buffer
	for _, d := range docs {
		raw, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(raw)
	}
	path := filepath.Join(t.TempDir(), "hub.yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// plainCase reports whether a golden case is only objects (no manager options, policy,
// settings or holds, which no manifest carries).
func plainCase(raw []byte) bool {
	var top map[string]any
	if err := yaml.Unmarshal(raw, &top); err != nil {
		return false
	}
	for k := range top {
		switch k {
		case "tenant", "addresses", "loadBalancers", "routes", "routeServices", "secrets", "oidcCookieKeys":
		default:
			return false
		}
	}
	return true
}

// TestGoldenCases runs translate on the golden inputs of internal/translate written as hub
// manifests: it prints the same problems and Envoy resources as the goldens.
func TestGoldenCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.in.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	ran := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !plainCase(raw) {
			continue
		}
		ran++
		name := strings.TrimSuffix(filepath.Base(file), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			in, _, err := translatetest.LoadCase(file)
			if err != nil {
				t.Fatal(err)
			}
			path := manifests(t, in)
			out, runErr := run(t, "-f", path, "-n", in.Tenant, "-o", "yaml")
			var got translatecmd.Document
			if err := yaml.UnmarshalStrict([]byte(out), &got); err != nil {
				t.Fatalf("output: %v\n%s", err, out)
			}
			wantIR := readYAML[translatetest.IRFile](t, filepath.Join(goldenDir, name+".ir.yaml"))
			if diff := cmp.Diff(wantIR.Problems, []ir.Problem(got.Problems)); diff != "" {
				t.Errorf("problems differ from the golden (-want +got):\n%s", diff)
			}
			hasError := false
			for _, p := range wantIR.Problems {
				hasError = hasError || p.Severity == ir.SeverityError
			}
			if (runErr != nil) != hasError {
				t.Errorf("error %v, want one only when a problem is an Error (%v)", runErr, hasError)
			}
			wantOut := readYAML[map[string][]any](t, filepath.Join(goldenDir, name+".out.yaml"))
			gotOut := map[string][]any{"listeners": got.Listeners, "clusters": got.Clusters, "endpoints": got.Endpoints}
			for k, v := range gotOut {
				if v == nil {
					gotOut[k] = wantOut[k][:0:0]
				}
			}
			if diff := cmp.Diff(wantOut, gotOut); diff != "" {
				t.Errorf("Envoy resources differ from the golden (-want +got):\n%s", diff)
			}
		})
	}
	if ran < 30 {
		t.Errorf("only %d golden cases are plain manifests; expected at least 30", ran)
	}
}

func readYAML[T any](t *testing.T, path string) T {
	t.Helper()
	var v T
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestTenantService translates a tenant Service of type LoadBalancer as the ccm mirrors it,
// and tells what it assumed and what is wrong, one line each.
func TestTenantService(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "svc.yaml")
	svc := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP},
			{Name: "sctp", Port: 90, NodePort: 30090, Protocol: corev1.ProtocolSCTP},
		}},
	}
	addrs := v1alpha1.Addresses{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Addresses"},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}}}}
	a, _ := yaml.Marshal(svc)
	b, _ := yaml.Marshal(addrs)
	if err := os.WriteFile(path, []byte(string(a)+"---\n"+string(b)+"---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"+
		// Another tenant's LoadBalancer: not this tenant's, left out.
		"---\napiVersion: kubelb.k8c.io/v1alpha1\nkind: LoadBalancer\nmetadata: {name: other, namespace: tenant-other}\n"+
		"spec: {ports: [{port: 81}], endpoints: [{addressesReference: {name: default}, ports: [{port: 30081}]}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "-f", path, "-n", "tenant-shop")
	if err != nil {
		t.Fatalf("translate: %v\n%s", err, out)
	}
	for _, want := range []string{
		"note: ignored " + path + ", document 3: Widget w (not a kind the manager reads)",
		"note: Service shop/web has no UID: its LoadBalancer is named \"web\"",
		"note: Service shop/web port sctp is not mirrored:",
		"note: LoadBalancer web port 80/TCP: listener port 10000 assumed",
		"tenant tenant-shop: 1 listeners, 1 clusters, 0 route configurations",
		"✓ no problems",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Without Addresses the LoadBalancer has no endpoints: an Error, exit non-zero.
	if err := os.WriteFile(path, a, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "-f", path, "-n", "tenant-shop")
	if err == nil || !strings.Contains(out, "✗ LoadBalancer tenant-shop/web: Error") {
		t.Errorf("want an Error line and a failure, got %v:\n%s", err, out)
	}
	// kubectl's List output, with managed fields; the same object twice is refused.
	list := `apiVersion: v1
kind: List
items:
- apiVersion: kubelb.k8c.io/v1alpha1
  kind: LoadBalancer
  metadata:
    name: web
    namespace: tenant-shop
    resourceVersion: "12345"
    managedFields: [{manager: ccm, operation: Apply, apiVersion: kubelb.k8c.io/v1alpha1}]
  spec:
    endpoints: [{addresses: [{ip: 10.0.0.1}], ports: [{port: 30080}]}]
    ports: [{port: 80}]
  status:
    service: {ports: [{port: 80, upstreamTargetPort: 10007}]}
`
	if err := os.WriteFile(path, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "-f", path); err != nil || !strings.Contains(out, "tenant tenant-shop: 1 listeners") {
		t.Errorf("a List: %v\n%s", err, out)
	}
	if _, err := run(t, "-f", path, "-f", path); err == nil || err.Error() != "LoadBalancer tenant-shop/web appears twice in the manifests" {
		t.Errorf("the same object twice: %v", err)
	}
	if _, err := run(t, "-f", filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "reading the manifests") {
		t.Errorf("a missing file: %v", err)
	}
}

var update = flag.Bool("update", false, "rewrite the golden outputs of TestTenantManifests")

// TestTenantManifests translates tenant manifests (Services, a TLS Secret, Ingresses, a
// GatewayClass, a Gateway, an HTTPRoute and a GRPCRoute, Addresses) as the ccm mirrors them
// and the manager translates them; the output, for people and as YAML, matches the goldens
// (go test -run TestTenantManifests -update rewrites them).
func TestTenantManifests(t *testing.T) {
	in := filepath.Join("testdata", "tenant.in.yaml")
	for _, c := range []struct {
		golden string
		args   []string
	}{
		{"tenant.out.txt", nil},
		{"tenant.out.yaml", []string{"-o", "yaml"}},
	} {
		out, err := run(t, append([]string{"-f", in, "-n", "tenant-shop"}, c.args...)...)
		if err == nil {
			t.Errorf("%s: no error, though a backend is missing", c.golden)
		}
		path := filepath.Join("testdata", c.golden)
		if *update {
			if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), out); diff != "" {
			t.Errorf("%s differs (-want +got):\n%s", c.golden, diff)
		}
	}
}
