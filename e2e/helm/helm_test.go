package helm

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/manager/envoyfleet"

	"kubelb.dev/kubelb/internal/testsupport"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
)

const (
	ns         = "kubelb"
	tenantName = "shop"
)

// minimal are the values the ccm chart cannot default: the tenant name.
var minimalCCM = []string{"--set", "kubelb.tenantName=" + tenantName}

func TestLint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		chart string
		args  []string
	}{
		{"manager/defaults", ManagerChart, nil},
		{"manager/full", ManagerChart, []string{"-f", FullValues(ManagerChart)}},
		{"ccm/defaults", CCMChart, minimalCCM},
		{"ccm/full", CCMChart, []string{"-f", FullValues(CCMChart)}},
		{"ccm/standalone", CCMChart, []string{"--set", "mode=standalone"}},
		{"ccm/standalone-full", CCMChart, []string{"-f", CIValues(CCMChart, "standalone-values.yaml")}},
		{"ccm/standalone-ipam", CCMChart, []string{"--set", "mode=standalone", "--set", "standalone.addressProvider=ipam"}},
		{"manager/address-provider", ManagerChart, []string{"-f", CIValues(ManagerChart, "address-provider-values.yaml")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := MustRun(t, append([]string{"lint", "--strict", ChartDir(tc.chart)}, tc.args...)...)
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm lint: %s", out)
			}
		})
	}
}

// find returns the one object of a kind (and name, if given) among objs.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %q in the rendered chart, found %d", kind, name, len(found))
	}
	return found[0]
}

func count(objs []*unstructured.Unstructured, kind string) int {
	n := 0
	for _, o := range objs {
		if o.GetKind() == kind {
			n++
		}
	}
	return n
}

func str(t *testing.T, o *unstructured.Unstructured, path ...string) string {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := v.(string)
	if v != nil && s == "" {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	return s
}

// container returns the one container of a Deployment.
func container(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("Deployment %s has %d containers, want 1", d.GetName(), len(cs))
	}
	return cs[0].(map[string]any)
}

func args(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, a := range container(t, d)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

func wantArgs(t *testing.T, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("args lack %s: %v", w, got)
		}
	}
}

// checkHardened: non-root, read-only root file system, no capabilities, no privilege escalation.
func checkHardened(t *testing.T, d *unstructured.Unstructured) {
	t.Helper()
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec", "securityContext")
	if pod["runAsNonRoot"] != true {
		t.Errorf("pod securityContext %v lacks runAsNonRoot", pod)
	}
	sc, _ := container(t, d)["securityContext"].(map[string]any)
	caps, _ := sc["capabilities"].(map[string]any)
	if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false ||
		!slices.Equal(caps["drop"].([]any), []any{"ALL"}) {
		t.Errorf("container securityContext %v, want read-only root, no escalation, drop ALL", sc)
	}
}

func TestManagerTemplateDefaults(t *testing.T) {
	t.Parallel()
	objs := Template(t, ManagerChart, "kubelb-manager", ns)
	if n, want := count(objs, "CustomResourceDefinition"), len(generatedCRDKinds(t)); n != want {
		t.Errorf("%d CRDs, want kubelb's %d (config/crd/bases)", n, want)
	}
	for _, kind := range []string{"ServiceMonitor", "ConfigMap"} {
		if n := count(objs, kind); n != 0 {
			t.Errorf("%d %s rendered by default, want none", n, kind)
		}
	}
	find(t, objs, "ServiceAccount", "kubelb-manager")
	find(t, objs, "ClusterRole", "kubelb-manager")
	find(t, objs, "ClusterRoleBinding", "kubelb-manager")
	find(t, objs, "Role", "kubelb-manager-leader-election")
	find(t, objs, "RoleBinding", "kubelb-manager-leader-election")

	d := find(t, objs, "Deployment", "kubelb-manager")
	wantArgs(t, args(t, d), "--namespace=kubelb", "--listen-address=:8001", "--metrics-addr=:9443",
		"--health-probe-bind-address=:8081", "--enable-leader-election=true", "--enable-gateway-api=false",
		"--envoy-image=envoyproxy/envoy:v1.40.0", "--envoy-xds-address=kubelb.kubelb.svc:8001",
		"--envoy-xds-protocol=delta", "--envoy-listener-address=0.0.0.0", "--envoy-listener-address-ipv6=::", "--envoy-port-range=10000-19999",
		"--xds-max-connections-per-tenant=256", "--xds-max-streams-per-tenant=512", "--xds-max-streams-per-connection=8",
		"--xds-requests-per-second=100", "--xds-request-burst=1000", "--xds-tenant-requests-per-second=2000",
		"--xds-tenant-request-burst=20000", "--xds-max-request-bytes=4194304")
	for _, a := range args(t, d) {
		if strings.HasPrefix(a, "--tenant-kubeconfig-server") {
			t.Errorf("%s set by default; the manager reads kube-public/cluster-info", a)
		}
	}
	c := container(t, d)
	chart := chartMeta(t, ManagerChart)
	if c["image"] != "ghcr.io/kubelb/kubelb-manager:"+chart.AppVersion {
		t.Errorf("image %v, want the appVersion tag %s", c["image"], chart.AppVersion)
	}
	env, _ := json.Marshal(c["env"])
	if !strings.Contains(string(env), `{"name":"NAMESPACE","valueFrom":{"fieldRef":{"fieldPath":"metadata.namespace"}}}`) {
		t.Errorf("env %s lacks NAMESPACE from the downward API", env)
	}
	checkHardened(t, d)
	if sa := str(t, d, "spec", "template", "spec", "serviceAccountName"); sa != "kubelb-manager" {
		t.Errorf("serviceAccountName %q", sa)
	}

	svc := find(t, objs, "Service", "kubelb")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var got []string
	for _, p := range ports {
		pm := p.(map[string]any)
		got = append(got, pm["name"].(string)+":"+jsonString(pm["port"]))
	}
	if !slices.Equal(got, []string{"xds:8001", "webhook:8443", "metrics:9443"}) {
		t.Errorf("Service kubelb ports %v, want xds:8001 (the Envoy fleets dial kubelb.<ns>.svc:8001), webhook:8443 (the API server calls the admission webhook) and metrics:9443", got)
	}

	cfg := find(t, objs, "Config", "default")
	if cfg.GetNamespace() != ns || str(t, cfg, "spec", "envoyProxy", "image") != "" ||
		str(t, cfg, "spec", "envoyProxy", "topology") != "shared" {
		t.Errorf("Config default: %v", cfg.Object["spec"])
	}
}

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestManagerTemplateFullValues(t *testing.T) {
	t.Parallel()
	objs := Template(t, ManagerChart, "kubelb-manager", ns, "-f", FullValues(ManagerChart))
	d := find(t, objs, "Deployment", "kubelb-manager")
	wantArgs(t, args(t, d), "--enable-gateway-api=true", "--log-format=console", "--log-level=debug",
		"--kube-api-qps=100", "--kube-api-burst=200", "--debug",
		"--envoy-image=registry.example.com/envoyproxy/envoy:distroless-v1.40.0", "--envoy-shutdown-manager-image=registry.example.com/kubelb/kubelb-manager:v0.1.0",
		"--envoy-xds-address=kubelb-xds.example.com:8001",
		"--envoy-xds-protocol=sotw", "--envoy-listener-address=::", "--envoy-listener-address-ipv6=fd00::1", "--envoy-port-range=20000-29999", "--tenant-kubeconfig-server=https://hub.example.com:6443",
		"--xds-max-connections-per-tenant=64", "--xds-max-streams-per-tenant=128", "--xds-max-streams-per-connection=4",
		"--xds-requests-per-second=10.5", "--xds-request-burst=100", "--xds-tenant-requests-per-second=250",
		"--xds-tenant-request-burst=5000", "--xds-max-request-bytes=8388608")
	if r := jsonString(d.Object["spec"].(map[string]any)["replicas"]); r != "3" {
		t.Errorf("replicas %s", r)
	}
	checkFullValuesHA(t, objs)
	pod := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	for _, k := range []string{"nodeSelector", "tolerations", "affinity", "imagePullSecrets", "priorityClassName"} {
		if pod[k] == nil {
			t.Errorf("pod spec lacks %s", k)
		}
	}
	if c := container(t, d); c["image"] != "registry.example.com/kubelb/kubelb-manager:v0.1.0-test" || c["imagePullPolicy"] != "Always" {
		t.Errorf("image %v %v", c["image"], c["imagePullPolicy"])
	}
	if sa := find(t, objs, "ServiceAccount", "kubelb-manager"); sa.GetAnnotations()["example.com/role"] != "hub" {
		t.Errorf("ServiceAccount annotations %v", sa.GetAnnotations())
	}
	cfg := find(t, objs, "Config", "default")
	if str(t, cfg, "spec", "loadBalancer", "class") != "metallb" || jsonString(cfg.Object["spec"].(map[string]any)["envoyProxy"].(map[string]any)["replicas"]) != "2" {
		t.Errorf("Config spec %v", cfg.Object["spec"])
	}
	sm := find(t, objs, "ServiceMonitor", "kubelb-manager")
	if sm.GetLabels()["release"] != "prometheus" || !strings.Contains(jsonString(sm.Object["spec"]), `"port":"metrics"`) {
		t.Errorf("ServiceMonitor %v", sm.Object)
	}
	checkDashboards(t, objs, ns, ManagerChart, "kubelb-manager", "kubelb-envoy-control-plane", "kubelb-envoy-data-plane")
}

// checkDashboards: one ConfigMap per dashboard file, with the sidecar label, holding the file
// byte for byte.
func checkDashboards(t *testing.T, objs []*unstructured.Unstructured, namespace, chart string, names ...string) {
	t.Helper()
	if n := count(objs, "ConfigMap"); n != len(names) {
		t.Errorf("%d ConfigMaps, want one per dashboard %v", n, names)
	}
	for _, name := range names {
		cm := find(t, objs, "ConfigMap", name+"-dashboard")
		if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetNamespace() != namespace {
			t.Errorf("dashboard ConfigMap %s: labels %v, namespace %s", cm.GetName(), cm.GetLabels(), cm.GetNamespace())
		}
		want, err := os.ReadFile(filepath.Join(ChartDir(chart), "dashboards", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		got := str(t, cm, "data", name+".json")
		if got != strings.TrimRight(string(want), "\n") {
			t.Errorf("ConfigMap %s does not hold dashboards/%s.json as is", cm.GetName(), name)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("ConfigMap %s holds invalid JSON", cm.GetName())
		}
	}
}

type chartYAML struct {
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func chartMeta(t *testing.T, chart string) chartYAML {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ChartDir(chart), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c chartYAML
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// rules flattens a ClusterRole's rules into "verb resource.group" strings.
func rules(t *testing.T, role *unstructured.Unstructured) []string {
	t.Helper()
	rs, _, _ := unstructured.NestedSlice(role.Object, "rules")
	var out []string
	for _, r := range rs {
		rm := r.(map[string]any)
		for _, g := range rm["apiGroups"].([]any) {
			for _, res := range rm["resources"].([]any) {
				for _, v := range rm["verbs"].([]any) {
					s := v.(string) + " " + res.(string)
					if g != "" {
						s += "." + g.(string)
					}
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func TestCCMTemplateDefaults(t *testing.T) {
	t.Parallel()
	objs := Template(t, CCMChart, "kubelb-ccm", ns, minimalCCM...)
	if n := count(objs, "CustomResourceDefinition"); n != 0 {
		t.Errorf("ccm chart renders %d CRDs; kubelb's kinds live on the hub", n)
	}
	for _, kind := range []string{"ServiceMonitor", "ConfigMap"} {
		if n := count(objs, kind); n != 0 {
			t.Errorf("%d %s rendered by default, want none", n, kind)
		}
	}
	d := find(t, objs, "Deployment", "kubelb-ccm")
	wantArgs(t, args(t, d), "--cluster-name=tenant-shop", "--kubelb-kubeconfig=/etc/kubelb/kubeconfig",
		"--leader-election-namespace=kubelb", "--enable-leader-election=true", "--metrics-addr=:9445",
		"--node-address-type=ExternalIP", "--use-loadbalancer-class=false", "--use-ingress-class=true",
		"--disable-ingress-controller=false", "--enable-gateway-api=false", "--enable-secret-synchronizer=false",
		"--kubelb-kubeconfig-secret=kubelb/kubelb-cluster", "--kubelb-kubeconfig-secret-key=kubelb")
	checkHardened(t, d)
	vols := jsonString(d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["volumes"])
	if !strings.Contains(vols, `"secretName":"kubelb-cluster"`) || !strings.Contains(vols, `{"key":"kubelb","path":"kubeconfig"}`) {
		t.Errorf("volumes %s: want Secret kubelb-cluster, key kubelb, mounted as kubeconfig", vols)
	}
	env := jsonString(container(t, d)["env"])
	if !strings.Contains(env, `"name":"POD_NAMESPACE"`) {
		t.Errorf("env %s lacks POD_NAMESPACE", env)
	}
	got := rules(t, find(t, objs, "ClusterRole", "kubelb-ccm"))
	for _, w := range []string{"list nodes", "update services", "update services/status", "update services/finalizers",
		"create events", "create events.events.k8s.io", "update ingresses.networking.k8s.io",
		"list secrets", "patch secrets", // the TLS Secrets of Ingresses are mirrored
		"watch endpointslices.discovery.k8s.io", "create endpointslices.discovery.k8s.io", // the twins' slices
		"create ingressclasses.networking.k8s.io"} { // the IngressClass kubelb
		if !slices.Contains(got, w) {
			t.Errorf("ClusterRole lacks %q", w)
		}
	}
	for _, no := range []string{"list gateways.gateway.networking.k8s.io", "create customresourcedefinitions.apiextensions.k8s.io", "update secrets"} {
		if slices.Contains(got, no) {
			t.Errorf("ClusterRole grants %q with the feature off", no)
		}
	}
	// Without Ingresses, Gateways and labelled Secrets the ccm reads no Secret.
	noIngress := rules(t, find(t, Template(t, CCMChart, "kubelb-ccm", ns, append(slices.Clone(minimalCCM), "--set", "kubelb.ingress.enabled=false")...), "ClusterRole", "kubelb-ccm"))
	if slices.Contains(noIngress, "list secrets") {
		t.Error("ClusterRole grants list secrets without Ingresses, Gateways or the Secret synchronizer")
	}
	if slices.Contains(noIngress, "create endpointslices.discovery.k8s.io") {
		t.Error("ClusterRole grants create endpointslices without Ingresses or Gateways (no twins)")
	}
	find(t, objs, "Role", "kubelb-ccm-leader-election")
	find(t, objs, "Service", "kubelb-ccm")
	checkHubKubeconfigRole(t, objs, "kubelb-cluster")

	// kubelb.persistRenewedToken=false: renewal in memory only, no Secret access.
	objs = Template(t, CCMChart, "kubelb-ccm", ns, append(slices.Clone(minimalCCM), "--set", "kubelb.persistRenewedToken=false")...)
	for _, a := range args(t, find(t, objs, "Deployment", "kubelb-ccm")) {
		if strings.HasPrefix(a, "--kubelb-kubeconfig-secret") {
			t.Errorf("persistRenewedToken=false still passes %s", a)
		}
	}
	for _, o := range objs {
		if strings.HasSuffix(o.GetName(), "-hub-kubeconfig") {
			t.Errorf("persistRenewedToken=false still renders %s %s", o.GetKind(), o.GetName())
		}
	}
}

// checkHubKubeconfigRole: the ccm may get and update the one Secret its hub kubeconfig comes
// from (to write renewed tokens back), nothing else, in the release namespace.
func checkHubKubeconfigRole(t *testing.T, objs []*unstructured.Unstructured, secret string) {
	t.Helper()
	role := find(t, objs, "Role", "kubelb-ccm-hub-kubeconfig")
	if role.GetNamespace() != ns {
		t.Errorf("Role %s in namespace %q, want %q", role.GetName(), role.GetNamespace(), ns)
	}
	if got, want := jsonString(role.Object["rules"]), `[{"apiGroups":[""],"resourceNames":["`+secret+`"],"resources":["secrets"],"verbs":["get","update"]}]`; got != want {
		t.Errorf("Role rules %s, want %s", got, want)
	}
	rb := find(t, objs, "RoleBinding", "kubelb-ccm-hub-kubeconfig")
	if got := jsonString(rb.Object["roleRef"]) + jsonString(rb.Object["subjects"]); !strings.Contains(got, `"name":"kubelb-ccm-hub-kubeconfig"`) ||
		!strings.Contains(got, `"kind":"ServiceAccount"`) {
		t.Errorf("RoleBinding %s", got)
	}
}

func TestCCMTemplateFullValues(t *testing.T) {
	t.Parallel()
	objs := Template(t, CCMChart, "kubelb-ccm", ns, "-f", FullValues(CCMChart))
	d := find(t, objs, "Deployment", "kubelb-ccm")
	wantArgs(t, args(t, d), "--cluster-name=tenant-shop", "--node-address-type=InternalIP",
		"--use-loadbalancer-class=true", "--use-ingress-class=false", "--enable-gateway-api=true",
		"--use-gateway-class=false", "--install-gateway-api-crds=true", "--gateway-api-crds-channel=experimental",
		"--disable-grpcroute-controller=true", "--disable-httproute-controller=false", "--enable-secret-synchronizer=true", "--disable-gateway-services=true",
		"--kubelb-kubeconfig-secret=kubelb/kubelb-hub", "--kubelb-kubeconfig-secret-key=kubelb")
	vols := jsonString(d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["volumes"])
	if !strings.Contains(vols, `"secretName":"kubelb-hub"`) {
		t.Errorf("volumes %s: want Secret kubelb-hub", vols)
	}
	got := rules(t, find(t, objs, "ClusterRole", "kubelb-ccm"))
	for _, w := range []string{"list secrets", "update gateways.gateway.networking.k8s.io", "patch httproutes/status.gateway.networking.k8s.io",
		"create customresourcedefinitions.apiextensions.k8s.io"} {
		if !slices.Contains(got, w) {
			t.Errorf("ClusterRole lacks %q", w)
		}
	}
	find(t, objs, "ServiceMonitor", "kubelb-ccm")
	checkDashboards(t, objs, "monitoring", CCMChart, "kubelb-ccm")
	checkHubKubeconfigRole(t, objs, "kubelb-hub")
}

func TestCCMTemplateRequiresTenantName(t *testing.T) {
	t.Parallel()
	_, err := Run(t, "template", "kubelb-ccm", ChartDir(CCMChart))
	if err == nil || !strings.Contains(err.Error(), "kubelb.tenantName is required") {
		t.Errorf("helm template without a tenant name: %v", err)
	}
	_, err = Run(t, "template", "kubelb-ccm", ChartDir(CCMChart), "--set", "kubelb.tenantName=shop", "--set", "kubelb.nodeAddressType=PublicIP")
	if err == nil || !strings.Contains(err.Error(), "nodeAddressType") {
		t.Errorf("helm template with a bad node address type: %v", err)
	}
}

// generatedCRDKinds are the kinds of kubelb's CRDs as make generate writes them
// (config/crd/bases), sorted.
func generatedCRDKinds(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testsupport.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	var kinds []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &crd); err != nil || crd.Spec.Names.Kind == "" {
			t.Fatalf("%s: no CRD kind (%v)", f, err)
		}
		kinds = append(kinds, crd.Spec.Names.Kind)
	}
	slices.Sort(kinds)
	return kinds
}

// TestChartCRDsMatchGenerated: the manager chart ships exactly config/crd/bases (copied by
// make generate); the ccm chart ships none.
func TestChartCRDsMatchGenerated(t *testing.T) {
	t.Parallel()
	bases := filepath.Join(testsupport.RepoRoot(), "config", "crd", "bases")
	want, _ := filepath.Glob(filepath.Join(bases, "*.yaml"))
	got, _ := filepath.Glob(filepath.Join(ChartDir(ManagerChart), "crds", "*.yaml"))
	names := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if !slices.Equal(names(want), names(got)) || len(want) == 0 {
		t.Fatalf("charts/%s/crds has %v, config/crd/bases has %v: run make generate", ManagerChart, names(got), names(want))
	}
	for i := range want {
		a, _ := os.ReadFile(want[i])
		b, _ := os.ReadFile(got[i])
		if !bytes.Equal(a, b) {
			t.Errorf("charts/%s/crds/%s differs from config/crd/bases: run make generate", ManagerChart, filepath.Base(got[i]))
		}
	}
	if _, err := os.Stat(filepath.Join(ChartDir(CCMChart), "crds")); err == nil {
		t.Errorf("charts/%s/crds exists; the ccm's kinds live on the hub", CCMChart)
	}
}

// TestChartArgsAreBinaryFlags runs the real binaries with the arguments each chart renders
// (default and full values, the standalone ccm, the hub's address provider) followed by
// --help: the flag parser accepts every argument before --help, so exit 0 proves the chart
// passes only flags the binary knows, with valid values.
func TestChartArgsAreBinaryFlags(t *testing.T) {
	t.Parallel()
	standaloneFull := []string{"-f", CIValues(CCMChart, "standalone-values.yaml")}
	for _, tc := range []struct {
		name, chart, release, pkg string
		values                    []string
	}{
		{"manager/defaults", ManagerChart, "kubelb-manager", "./cmd/kubelb", nil},
		{"manager/full", ManagerChart, "kubelb-manager", "./cmd/kubelb", []string{"-f", FullValues(ManagerChart)}},
		{"ccm/defaults", CCMChart, "kubelb-ccm", "./cmd/ccm", minimalCCM},
		{"ccm/full", CCMChart, "kubelb-ccm", "./cmd/ccm", []string{"-f", FullValues(CCMChart)}},
		{"ccm/standalone", CCMChart, "kubelb-ccm", "./cmd/ccm", []string{"--set", "mode=standalone", "--set-json", `standalone.reservedPorts=["22/TCP","30000-32767"]`}},
		{"ccm/standalone-full", CCMChart, "kubelb-ccm", "./cmd/ccm", standaloneFull},
		{"ccm/standalone-ipam", CCMChart, "kubelb-ccm", "./cmd/ccm", []string{"--set", "mode=standalone", "--set", "standalone.addressProvider=ipam"}},
		{"manager/address-provider", ManagerChart, "kubelb-manager", "./cmd/kubelb", []string{"-f", CIValues(ManagerChart, "address-provider-values.yaml")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := testsupport.BuildBinary(t, tc.pkg)
			d := find(t, Template(t, tc.chart, tc.release, ns, tc.values...), "Deployment", tc.release)
			a := args(t, d)
			out, err := exec.Command(bin, append(a, "--help")...).CombinedOutput()
			if err != nil {
				t.Errorf("%s rejects the chart's arguments %v: %v\n%s", tc.pkg, a, err, out)
			}
		})
	}
}

// TestManagerChartEnvoyImageDrains: the fleets drain through the shutdown manager sidecar,
// which runs the manager's binary, so the chart gives --envoy-shutdown-manager-image the
// manager's own image (image.repository:image.tag) unless envoy.shutdownManagerImage pins
// one; the chart's default Envoy image is the manager's default.
func TestManagerChartEnvoyImageDrains(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(ChartDir(ManagerChart), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Envoy struct {
			Image string `json:"image"`
		} `json:"envoy"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	if values.Envoy.Image != envoyfleet.DefaultEnvoyImage {
		t.Errorf("the chart's envoy.image is %q, want the manager's default %q", values.Envoy.Image, envoyfleet.DefaultEnvoyImage)
	}
	for _, tc := range []struct {
		name   string
		values []string
		want   string
	}{
		{"defaults", nil, "--envoy-shutdown-manager-image=ghcr.io/kubelb/kubelb-manager:" + chartAppVersion(t, ManagerChart)},
		{"manager image", []string{"--set", "image.registry=mirror.example", "--set", "image.repository=kubelb", "--set", "image.tag=v9.9.9"}, "--envoy-shutdown-manager-image=mirror.example/kubelb:v9.9.9"},
		{"pinned", []string{"--set", "image.tag=v9.9.9", "--set", "envoy.shutdownManagerImage=mirror.example/kubelb:v1.0.0"}, "--envoy-shutdown-manager-image=mirror.example/kubelb:v1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := find(t, Template(t, ManagerChart, "kubelb-manager", "kubelb", tc.values...), "Deployment", "kubelb-manager")
			if got := withPrefix(args(t, d), "--envoy-shutdown-manager-image="); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("args %q, want %q", got, tc.want)
			}
		})
	}
}

// chartAppVersion is the appVersion of a chart's Chart.yaml.
func chartAppVersion(t *testing.T, chart string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ChartDir(chart), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("the appVersion of %s: %q %v", chart, c.AppVersion, err)
	}
	return c.AppVersion
}

// TestManagerServiceClusterIP checks service.clusterIP: unset, the API server picks the
// address; set (with envoy.xdsAddress, as docs/quickstart.md does on a hub without cluster
// DNS), the Service has that address and the fleets dial it.
func TestManagerServiceClusterIP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		wantIP  string
		wantXDS string
	}{
		{name: "default", wantXDS: "--envoy-xds-address=kubelb.kubelb.svc:8001"},
		{name: "empty, as the quick start passes it without XDS_IP", args: []string{"--set", "service.clusterIP=", "--set", "envoy.xdsAddress="}, wantXDS: "--envoy-xds-address=kubelb.kubelb.svc:8001"},
		{name: "pinned", args: []string{"--set", "service.clusterIP=10.96.0.80", "--set", "envoy.xdsAddress=10.96.0.80:8001"}, wantIP: "10.96.0.80", wantXDS: "--envoy-xds-address=10.96.0.80:8001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := Template(t, ManagerChart, "kubelb-manager", ns, tc.args...)
			svc := find(t, objs, "Service", "kubelb")
			if got := str(t, svc, "spec", "clusterIP"); got != tc.wantIP {
				t.Errorf("spec.clusterIP %q, want %q", got, tc.wantIP)
			}
			wantArgs(t, args(t, find(t, objs, "Deployment", "kubelb-manager")), tc.wantXDS)
		})
	}
}

// TestManagerPodMonitor: config.envoyProxy.podMonitor.enabled renders a PodMonitor that
// scrapes every tenant's Envoy pods (any namespace, the fleet's labels) on their stats port,
// only where the PodMonitor CRD exists; none by default.
func TestManagerPodMonitor(t *testing.T) {
	t.Parallel()
	const hasCRD = "--api-versions=monitoring.coreos.com/v1/PodMonitor"
	if n := count(Template(t, ManagerChart, "kubelb-manager", ns, hasCRD), "PodMonitor"); n != 0 {
		t.Errorf("%d PodMonitors by default, want none", n)
	}
	if n := count(Template(t, ManagerChart, "kubelb-manager", ns, "-f", FullValues(ManagerChart)), "PodMonitor"); n != 0 {
		t.Errorf("%d PodMonitors without the PodMonitor CRD, want none", n)
	}
	pm := find(t, Template(t, ManagerChart, "kubelb-manager", ns, "-f", FullValues(ManagerChart), hasCRD), "PodMonitor", "kubelb-manager-envoy")
	spec := jsonString(pm.Object["spec"])
	for _, want := range []string{`"namespaceSelector":{"any":true}`, `"app.kubernetes.io/name":"envoy"`, `"kubelb.k8c.io/managed-by":"kubelb"`,
		`"key":"kubelb.k8c.io/tenant","operator":"Exists"`, `"port":"` + envoyfleet.StatsPortName + `"`, `"path":"` + xdsbootstrap.StatsPath + `"`,
		`"targetLabel":"tenant"`} {
		if !strings.Contains(spec, want) {
			t.Errorf("PodMonitor spec lacks %s:\n%s", want, spec)
		}
	}
	if pm.GetLabels()["release"] != "prometheus" {
		t.Errorf("PodMonitor labels %v, want serviceMonitor.labels", pm.GetLabels())
	}
}
