package helm

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// hubOnlyCCMFlags are the ccm flags of the hub mode, which a standalone ccm ignores with a
// warning: the chart must not pass them in the standalone mode.
var hubOnlyCCMFlags = []string{"--cluster-name", "--kubelb-kubeconfig", "--node-address-type", "--enable-cloud-provider",
	"--disable-", "--use-ingress-class", "--enable-gateway-api", "--use-gateway-class", "--install-gateway-api-crds",
	"--gateway-api-crds-channel", "--enable-secret-synchronizer", "--max-concurrent-reconciles"}

// addressProviderFlags are the flags of the address providers (both binaries).
var addressProviderFlags = []string{"--address-provider", "--reserved-ports", "--node-ip-nat"}

// withPrefix returns the arguments that start with one of prefixes.
func withPrefix(args []string, prefixes ...string) []string {
	var out []string
	for _, a := range args {
		for _, p := range prefixes {
			if strings.HasPrefix(a, p) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// rolePermissions are the permissions of the rendered ClusterRole and Roles named names.
func rolePermissions(t *testing.T, objs []*unstructured.Unstructured, names ...string) []Permission {
	t.Helper()
	var ps []Permission
	for _, o := range objs {
		if (o.GetKind() == "ClusterRole" || o.GetKind() == "Role") && slices.Contains(names, o.GetName()) {
			ps = append(ps, ruleSet(t, o)...)
		}
	}
	return ps
}

// checkExactly: got and want are the same set of permissions.
func checkExactly(t *testing.T, what string, got, want []Permission) {
	t.Helper()
	extra, missing := diffPermissions(got, want)
	for _, p := range extra {
		t.Errorf("%s grants %s, which it does not need", what, p)
	}
	for _, p := range missing {
		t.Errorf("%s lacks %s", what, p)
	}
}

// nodeIPMarkers are the permissions the node-IP controller declares (internal/nodeip), with
// those of the NAT shadow Services when nat.
func nodeIPMarkers(t *testing.T, nat bool) []Permission {
	t.Helper()
	files := []string{"controller.go"}
	if nat {
		files = append(files, "nat.go")
	}
	var out []Permission
	for _, f := range files {
		ps, err := MarkerPermissions(filepath.Join(testsupport.RepoRoot(), "internal", "nodeip", f))
		if err != nil || len(ps) == 0 {
			t.Fatalf("reading the node-IP controller's rbac markers in %s: %v (%d)", f, err, len(ps))
		}
		out = append(out, ps...)
	}
	return out
}

// TestCCMStandaloneTemplate: with mode=standalone the ccm chart renders no hub kubeconfig
// (no Secret volume or mount, no hub flag, no Role on a Secret), passes --mode=standalone and
// the provider's flags only when they differ from the ccm's defaults, and its ClusterRole and
// leader-election Role grant exactly what the standalone mode needs with each provider (and
// the node-IP controller's markers are part of it). Values it cannot honour fail the render.
func TestCCMStandaloneTemplate(t *testing.T) {
	t.Parallel()
	common := []string{"--leader-election-namespace=kubelb", "--enable-leader-election=true", "--metrics-addr=:9445",
		"--health-probe-bind-address=:8081"}
	for _, tc := range []struct {
		name     string
		values   []string
		provider string
		nat      bool
		// want are the provider's arguments, in order, right after --mode=standalone.
		want []string
	}{
		{"defaults", []string{"--set", "mode=standalone"}, ProviderNodeIP, false, nil},
		{"ci values", []string{"-f", CIValues(CCMChart, "standalone-values.yaml")}, ProviderNodeIP, true,
			[]string{"--reserved-ports=22/TCP,6443/TCP,30000-32767", "--node-ip-nat=true"}},
		{"no reserved port", []string{"--set", "mode=standalone", "--set-json", "standalone.reservedPorts=[]"}, ProviderNodeIP, false,
			[]string{"--reserved-ports="}},
		{"ipam", []string{"--set", "mode=standalone", "--set", "standalone.addressProvider=ipam"}, ProviderIPAM, false,
			[]string{"--address-provider=ipam"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := Template(t, CCMChart, "kubelb-ccm", ns, tc.values...)
			d := find(t, objs, "Deployment", "kubelb-ccm")
			a := args(t, d)
			if want := append([]string{"--mode=standalone"}, tc.want...); !slices.Equal(a[:min(len(a), len(want))], want) {
				t.Errorf("args begin %v, want %v", a, want)
			}
			wantArgs(t, a, common...)
			if got := withPrefix(a, addressProviderFlags...); !slices.Equal(got, tc.want) {
				t.Errorf("provider flags %v, want %v (only those that differ from the ccm's defaults)", got, tc.want)
			}
			if got := withPrefix(a, hubOnlyCCMFlags...); len(got) > 0 {
				t.Errorf("standalone mode passes hub flags %v", got)
			}
			pod := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			if pod["volumes"] != nil || container(t, d)["volumeMounts"] != nil {
				t.Errorf("standalone mode mounts %s %s; there is no hub kubeconfig", jsonString(pod["volumes"]), jsonString(container(t, d)["volumeMounts"]))
			}
			for _, o := range objs {
				if s := strings.ToLower(jsonString(o.Object)); strings.Contains(s, "kubeconfig") || strings.Contains(s, "kubelb-cluster") {
					t.Errorf("%s %s refers to the hub kubeconfig", o.GetKind(), o.GetName())
				}
			}
			got := rolePermissions(t, objs, "kubelb-ccm", "kubelb-ccm-leader-election")
			want := CCMStandalonePermissions(ns, tc.provider, tc.nat)
			checkExactly(t, "the standalone ccm's ClusterRole and Role", got, want)
			if tc.provider == ProviderNodeIP {
				if _, missing := diffPermissions(got, nodeIPMarkers(t, tc.nat)); len(missing) > 0 {
					t.Errorf("the node-IP controller's markers declare %v, which the chart does not grant", missing)
				}
			}
			if n := count(objs, "Role"); n != 2 || find(t, objs, "Role", "kubelb-ccm-release").GetAnnotations()["helm.sh/hook"] != "pre-delete" {
				t.Errorf("%d Roles, want only the leader-election Role and the release hook's", n)
			}
		})
	}

	for _, tc := range []struct {
		values []string
		err    string
	}{
		{[]string{"--set", "mode=cloud"}, "value must be one of 'hub', 'standalone'"},
		{[]string{"--set", "mode=standalone", "--set", "standalone.addressProvider=bgp"}, "value must be one of 'node-ip', 'ipam'"},
		{[]string{"--set", "mode=standalone", "--set", "standalone.reservedPorts[0]=80/ICMP"}, "standalone/reservedPorts/0"},
		{[]string{"--set", "mode=standalone", "--set", "standalone.natIP=true"}, "natIP"},
		{[]string{"--set", "mode=standalone", "--set", "kubelb.enableCloudProvider=false"}, "kubelb.enableCloudProvider=false cannot be used with mode=standalone"},
		{[]string{"--set", "mode=standalone", "--set", "standalone.addressProvider=ipam", "--set", "standalone.nodeIPNAT=true"}, "standalone.nodeIPNAT applies to standalone.addressProvider=node-ip only"},
		{[]string{"--set", "mode=standalone", "--set", "standalone.addressProvider=ipam", "--set", "standalone.reservedPorts[0]=22"}, "standalone.reservedPorts applies to standalone.addressProvider=node-ip only"},
	} {
		_, err := Run(t, append([]string{"template", "kubelb-ccm", ChartDir(CCMChart)}, tc.values...)...)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("helm template %v: %v, want an error with %q", tc.values, err, tc.err)
		}
	}

	// The ccm's alerts without the hub's: kubelb_ccm_kubelb_cluster_connected stays 0 in the
	// standalone mode, and KubeLBCCMHubUnreachable would fire for good.
	rule := jsonString(find(t, Template(t, CCMChart, "kubelb-ccm", ns, "--set", "mode=standalone", "--set", "prometheusRule.enabled=true"), "PrometheusRule", "kubelb-ccm").Object["spec"])
	if strings.Contains(rule, "KubeLBCCMHubUnreachable") || !strings.Contains(rule, `"alert":"KubeLBCCMDown"`) || !strings.Contains(rule, `"alert":"KubeLBCCMReconcileErrors"`) {
		t.Errorf("standalone PrometheusRule: %s; want the ccm's alerts but KubeLBCCMHubUnreachable", rule)
	}
	rule = jsonString(find(t, Template(t, CCMChart, "kubelb-ccm", ns, append(slices.Clone(minimalCCM), "--set", "prometheusRule.enabled=true")...), "PrometheusRule", "kubelb-ccm").Object["spec"])
	if !strings.Contains(rule, `"alert":"KubeLBCCMHubUnreachable"`) {
		t.Errorf("hub-mode PrometheusRule lacks KubeLBCCMHubUnreachable: %s", rule)
	}

	// The hub mode is unchanged by the standalone values: they are not passed.
	a := args(t, find(t, Template(t, CCMChart, "kubelb-ccm", ns, append(slices.Clone(minimalCCM), "--set", "standalone.nodeIPNAT=true")...), "Deployment", "kubelb-ccm"))
	if got := withPrefix(a, append([]string{"--mode"}, addressProviderFlags...)...); len(got) > 0 {
		t.Errorf("hub mode passes %v", got)
	}
}

// TestCCMStandaloneChartInstall installs the ccm chart in the standalone mode into a real API
// server, with no hub kubeconfig Secret, three times (node-ip with reserved ports, node-ip
// with NAT, ipam), checks as each release's ServiceAccount that it holds exactly what its
// mode needs (access reviews and rules reviews) and none of the hub mode's rights, then runs
// the real ccm with the arguments of the installed node-ip Deployment and exactly the
// permissions the chart granted: it leads, gives a Service the labelled node's address,
// leaves a Service on a reserved port pending with a Warning Event, logs no refused request
// and no ignored flag, and exits 0 on SIGTERM.
func TestCCMStandaloneChartInstall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.Start(t, "standalone", testenv.Options{WithoutKubelbCRDs: true})
	for _, tc := range []struct {
		release, namespace, provider string
		nat                          bool
		values                       []string
	}{
		{"kubelb-ccm", ns, ProviderNodeIP, false, []string{"--set", "mode=standalone", "--set-json", `standalone.reservedPorts=["22/TCP","8443/TCP"]`}},
		{"nat", "kubelb-nat", ProviderNodeIP, true, []string{"-f", CIValues(CCMChart, "standalone-values.yaml")}},
		{"ipam", "kubelb-ipam", ProviderIPAM, false, []string{"--set", "mode=standalone", "--set", "standalone.addressProvider=ipam"}},
	} {
		out := Install(t, c, CCMChart, tc.release, tc.namespace, tc.values...)
		if !strings.Contains(out, "STATUS: deployed") || !strings.Contains(out, "standalone mode") {
			t.Fatalf("helm install %s:\n%s", tc.release, out)
		}
		sa := tc.release
		if sa != "kubelb-ccm" {
			sa += "-kubelb-ccm"
		}
		t.Logf("%s (%s, NAT %v):", tc.release, tc.provider, tc.nat)
		want := CCMStandalonePermissions(tc.namespace, tc.provider, tc.nat)
		need := want
		if tc.provider == ProviderNodeIP {
			need = append(slices.Clone(want), nodeIPMarkers(t, tc.nat)...)
		}
		checkRBAC(t, ImpersonatedConfig(c, tc.namespace, sa), need, CCMStandaloneForbidden(tc.namespace, tc.provider, tc.nat))
		checkExactRules(t, c, tc.namespace, sa, want, tc.namespace, "default", "kube-system")
	}

	// The installed Deployment, as the API server holds it.
	dep := &appsv1.Deployment{}
	must(t, "getting the Deployment", c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubelb-ccm"}, dep))
	if v := dep.Spec.Template.Spec.Volumes; len(v) > 0 {
		t.Errorf("the standalone Deployment has volumes %v", v)
	}
	chartArgs := dep.Spec.Template.Spec.Containers[0].Args
	wantArgs(t, chartArgs, "--mode=standalone", "--reserved-ports=22/TCP,8443/TCP", "--leader-election-namespace="+ns)

	// A labelled Ready node, a Service it serves, and one on a reserved port.
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lb-0", Labels: map[string]string{ccm.LabelUseAsLoadBalancer: "true"}}}
	must(t, "creating the node", c.Client.Create(ctx, n))
	n.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.31"}},
	}
	must(t, "making the node Ready", c.Client.Status().Update(ctx, n))
	lbService := func(name string, port int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: port, Protocol: corev1.ProtocolTCP}}}}
	}
	web, admin := lbService("web", 8080), lbService("admin", 8443)
	must(t, "creating Service web", c.Client.Create(ctx, web))
	must(t, "creating Service admin", c.Client.Create(ctx, admin))

	// The chart's arguments, but for the listen addresses (loopback ports of this test), and
	// the kubeconfig of the chart's ServiceAccount (in a pod: the in-cluster config).
	metricsPort, probePort := testsupport.FreePort(t), testsupport.FreePort(t)
	var runArgs []string
	for _, a := range chartArgs {
		switch {
		case strings.HasPrefix(a, "--metrics-addr="):
			a = "--metrics-addr=" + testsupport.Loopback(metricsPort)
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=" + testsupport.Loopback(probePort)
		}
		runArgs = append(runArgs, a)
	}
	runArgs = append(runArgs, "--kubeconfig="+ImpersonatedKubeconfig(t, c, ns, "kubelb-ccm"))
	proc := testsupport.StartProcess(t, "ccm", testsupport.BuildBinary(t, "./cmd/ccm"), runArgs...)
	testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(probePort)+"/readyz", time.Minute)
	t.Logf("leader: %s", c.WaitLeaseHolder(t, ns, "kubelb-ccm.kubelb.k8c.io", time.Minute))
	testsupport.Eventually(t, time.Minute, "Service web to get the node's address", func() error {
		cur := &corev1.Service{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		if in := cur.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "127.0.0.31" {
			return fmt.Errorf("ingress %v", in)
		}
		return nil
	})
	testsupport.Eventually(t, time.Minute, "a Warning Event on Service admin, whose port the chart reserved", func() error {
		evs := &eventsv1.EventList{}
		if err := c.Client.List(ctx, evs, client.InNamespace("default")); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "admin" && e.Type == corev1.EventTypeWarning && e.Reason == ccm.ReasonPortConflict {
				if !strings.Contains(e.Note, "8443") {
					return fmt.Errorf("event note %q does not name the port", e.Note)
				}
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(evs.Items))
	})
	// No hub: the hub gauge stays 0, which is why the chart leaves KubeLBCCMHubUnreachable out.
	metricsText := testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(metricsPort)+"/metrics", time.Minute)
	if !strings.Contains(metricsText, "\nkubelb_ccm_kubelb_cluster_connected 0\n") {
		t.Errorf("the standalone ccm does not export kubelb_ccm_kubelb_cluster_connected 0")
	}
	cur := &corev1.Service{}
	must(t, "getting Service admin", c.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "admin"}, cur))
	if in := cur.Status.LoadBalancer.Ingress; len(in) > 0 {
		t.Errorf("Service admin on the reserved port 8443 got %v", in)
	}
	code, err := proc.Stop(30 * time.Second)
	out := proc.Output()
	if err != nil || code != 0 {
		t.Errorf("exit code %d, err %v, want 0 on SIGTERM", code, err)
	}
	for _, bad := range []string{"forbidden", "not used in --mode", "is not allowed"} {
		if strings.Contains(strings.ToLower(out), bad) {
			t.Errorf("the ccm logged %q:\n%s", bad, out)
		}
	}
}

// TestManagerChartAddressProvider: the manager chart passes the address provider's flags only
// when one is on, and only those that differ from the manager's defaults; its ClusterRole
// <fullname>-address-provider (bound to the manager's ServiceAccount) grants exactly what the
// provider needs and exists only then; the markers' ClusterRole is the same either way.
// Values the provider cannot honour fail the render.
func TestManagerChartAddressProvider(t *testing.T) {
	t.Parallel()
	const release = "kubelb-manager"
	markersRole := jsonString(find(t, Template(t, ManagerChart, release, ns), "ClusterRole", release).Object["rules"])
	for _, tc := range []struct {
		name     string
		values   []string
		provider string
		nat      bool
		want     []string
	}{
		{"none", nil, "none", false, nil},
		{"ci values", []string{"-f", CIValues(ManagerChart, "address-provider-values.yaml")}, ProviderNodeIP, true, []string{"--address-provider=node-ip",
			"--address-provider-class=kubelb-node-ip", "--reserved-ports=22/TCP,6443/TCP,10250/TCP,10256/TCP,30000-32767", "--node-ip-nat=true"}},
		{"node-ip", []string{"--set", "addressProvider.type=node-ip"}, ProviderNodeIP, false, []string{"--address-provider=node-ip"}},
		{"ipam", []string{"--set", "addressProvider.type=ipam", "--set", "addressProvider.class=pools"}, ProviderIPAM, false,
			[]string{"--address-provider=ipam", "--address-provider-class=pools"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := Template(t, ManagerChart, release, ns, tc.values...)
			a := args(t, find(t, objs, "Deployment", release))
			if got := withPrefix(a, append(addressProviderFlags, "--address-provider-class")...); !slices.Equal(got, tc.want) {
				t.Errorf("provider flags %v, want %v", got, tc.want)
			}
			if got := jsonString(find(t, objs, "ClusterRole", release).Object["rules"]); got != markersRole {
				t.Errorf("the markers' ClusterRole changed with the provider: %s", got)
			}
			role := release + "-address-provider"
			if tc.provider == "none" {
				for _, o := range objs {
					if strings.HasSuffix(o.GetName(), "-address-provider") {
						t.Errorf("%s %s rendered without a provider", o.GetKind(), o.GetName())
					}
				}
				return
			}
			checkExactly(t, "ClusterRole "+role, rolePermissions(t, objs, role), ManagerAddressProviderPermissions(tc.provider, tc.nat))
			b := find(t, objs, "ClusterRoleBinding", role)
			if got := jsonString(b.Object["roleRef"]) + jsonString(b.Object["subjects"]); !strings.Contains(got, `"name":"`+role+`"`) ||
				!strings.Contains(got, `{"kind":"ServiceAccount","name":"`+release+`","namespace":"`+ns+`"}`) {
				t.Errorf("ClusterRoleBinding %s: %s", role, got)
			}
		})
	}

	for _, tc := range []struct {
		values []string
		err    string
	}{
		{[]string{"--set", "addressProvider.type=metallb"}, "value must be one of 'none', 'node-ip', 'ipam'"},
		{[]string{"--set", "addressProvider.nodeIPNAT=true"}, "addressProvider.nodeIPNAT applies to addressProvider.type=node-ip only"},
		{[]string{"--set", "addressProvider.type=ipam", "--set", "addressProvider.reservedPorts[0]=22"}, "addressProvider.reservedPorts applies to addressProvider.type=node-ip only"},
		{[]string{"--set", "addressProvider.class=x"}, "addressProvider.class needs addressProvider.type node-ip or ipam"},
		{[]string{"--set", "addressProvider.type=node-ip", "--set", "addressProvider.reservedPorts[0]=99999999"}, "addressProvider/reservedPorts/0"},
	} {
		_, err := Run(t, append([]string{"template", release, ChartDir(ManagerChart)}, tc.values...)...)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("helm template %v: %v, want an error with %q", tc.values, err, tc.err)
		}
	}
}

// TestManagerChartAddressProviderInstall installs the manager chart with the hub's address
// provider on into a real API server twice (node-ip with NAT; ipam, as a second release) and
// checks, as each release's ServiceAccount, that it holds exactly the markers' permissions,
// leader election and the provider's (rules reviews per namespace), and none of what the
// manager must not do but the hub Services' status patch the provider needs. With real
// requests: the node-ip manager reads the nodes and patches a hub Service's status in a
// tenant namespace, but may not update it, nor read AddressPools.
func TestManagerChartAddressProviderInstall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hub := testenv.Start(t, "hub", testenv.Options{WithoutKubelbCRDs: true})
	const tns = kubelbv1alpha1.TenantNamespacePrefix + "np"
	for name, labels := range map[string]map[string]string{
		tns: {kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}, "not-a-tenant": nil,
	} {
		must(t, "creating namespace "+name, hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}))
	}
	for _, tc := range []struct {
		release, namespace, provider string
		nat                          bool
		values                       []string
	}{
		{"kubelb-manager", ns, ProviderNodeIP, true, []string{"-f", CIValues(ManagerChart, "address-provider-values.yaml")}},
		// A second release in the same hub: the admission webhook's configuration is
		// cluster-scoped (kubelb-tenant-objects), one per hub, and the first release owns it.
		{"ipam", "hub-ipam", ProviderIPAM, false, []string{"--set", "addressProvider.type=ipam", "--set", "admissionWebhook.enabled=false"}},
	} {
		out := Install(t, hub, ManagerChart, tc.release, tc.namespace, tc.values...)
		if !strings.Contains(out, "STATUS: deployed") || !strings.Contains(out, "Address provider "+tc.provider) {
			t.Fatalf("helm install %s:\n%s", tc.release, out)
		}
		sa := tc.release
		if sa != "kubelb-manager" {
			sa += "-kubelb-manager"
		}
		t.Logf("%s (%s, NAT %v):", tc.release, tc.provider, tc.nat)
		want := append(append(ManagerPermissions(tc.namespace), managerMarkers(t, tc.namespace)...), ManagerAddressProviderPermissions(tc.provider, tc.nat)...)
		var forbidden []Permission
		for _, p := range ManagerForbidden("not-a-tenant", tns) {
			if p.Resource == "services" && p.Subresource == "status" && p.Verb == "patch" {
				continue // the provider writes the hub Services' status
			}
			forbidden = append(forbidden, p)
		}
		if tc.provider != ProviderIPAM {
			forbidden = append(forbidden, Permissions("kubelb.k8c.io", []string{"addresspools", "addresspools/status"}, []string{"get", "list", "update", "patch"}, "")...)
		}
		forbidden = append(forbidden, Permissions("kubelb.k8c.io", []string{"addresspools"}, []string{"create", "update", "delete"}, "")...)
		checkRBAC(t, ImpersonatedConfig(hub, tc.namespace, sa), want, forbidden)
		checkExactRules(t, hub, tc.namespace, sa, want, tc.namespace, "kube-public", tns, "not-a-tenant")
	}

	// Real requests as the node-ip manager.
	m := impersonatedClient(t, hub, ns, "kubelb-manager")
	must(t, "listing Nodes", m.List(ctx, &corev1.NodeList{}))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "lb-uid-1"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		Selector: map[string]string{"app": "envoy"}}}
	must(t, "creating the hub Service (as admin)", hub.Client.Create(ctx, svc))
	must(t, "getting the hub Service", m.Get(ctx, client.ObjectKeyFromObject(svc), svc))
	orig := svc.DeepCopy()
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	must(t, "patching the hub Service's status", m.Status().Patch(ctx, svc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
	got := &corev1.Service{}
	must(t, "reading the hub Service back", hub.Client.Get(ctx, client.ObjectKeyFromObject(svc), got))
	if in := got.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "192.0.2.10" {
		t.Errorf("hub Service status %v after the manager's patch", in)
	}
	got.Status.LoadBalancer.Ingress = nil
	mustForbid(t, "updating the hub Service's status (only patch is granted)", m.Status().Update(ctx, got))
	shadow := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "lb-uid-1-nat"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ExternalIPs: []string{"10.0.0.5"}, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		Selector: map[string]string{"app": "envoy"}}}
	must(t, "creating a NAT shadow Service", m.Create(ctx, shadow))
	must(t, "deleting the NAT shadow Service", m.Delete(ctx, shadow))
}
