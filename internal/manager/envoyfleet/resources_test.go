package envoyfleet

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/settings"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
)

func input(config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant) Input {
	return Input{Namespace: "tenant-a", Settings: settings.Resolve(config, tenant), Image: "flag/envoy:1", ShutdownManagerImage: "flag/kubelb:1", Bootstrap: []byte("node: {}\n")}
}

func TestBuildDeploymentFromConfigAndTenant(t *testing.T) {
	t.Parallel()
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}
	tenantRes := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{EnvoyProxy: kubelbv1alpha1.EnvoyProxy{
		Replicas:     3,
		NodeSelector: map[string]string{"role": "lb"},
		Tolerations:  []corev1.Toleration{{Key: "lb", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Resources:    &res,
	}}}
	tenant := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}

	for _, tc := range []struct {
		name      string
		tenant    *kubelbv1alpha1.TenantEnvoyProxy
		replicas  int32
		resources corev1.ResourceRequirements
	}{
		{name: "config", replicas: 3, resources: res},
		{name: "tenant overrides", tenant: &kubelbv1alpha1.TenantEnvoyProxy{Replicas: ptr.To[int32](5), Resources: &tenantRes}, replicas: 5, resources: tenantRes},
		{name: "tenant scales to zero", tenant: &kubelbv1alpha1.TenantEnvoyProxy{Replicas: ptr.To[int32](0)}, replicas: 0, resources: res},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tn := tenant.DeepCopy()
			if tc.tenant != nil {
				tn.Spec.EnvoyProxy = *tc.tenant
			}
			f := Build(input(config, tn))
			if f.DaemonSet != nil || f.Deployment == nil {
				t.Fatal("want a Deployment only")
			}
			d := f.Deployment
			if *d.Spec.Replicas != tc.replicas {
				t.Errorf("replicas %d, want %d", *d.Spec.Replicas, tc.replicas)
			}
			pod := d.Spec.Template.Spec
			if diff := cmp.Diff(tc.resources, pod.Containers[0].Resources); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			if pod.NodeSelector["role"] != "lb" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "lb" {
				t.Errorf("scheduling not from Config: %v %v", pod.NodeSelector, pod.Tolerations)
			}
		})
	}
}

func TestBuildPodContract(t *testing.T) {
	t.Parallel()
	f := Build(input(nil, nil))
	d := f.Deployment
	wantLabels := map[string]string{"app.kubernetes.io/name": "envoy", "kubelb.k8c.io/tenant": "a", "kubelb.k8c.io/managed-by": "kubelb"}
	if diff := cmp.Diff(wantLabels, d.Spec.Template.Labels); diff != "" {
		t.Errorf("pod labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"app.kubernetes.io/name": "envoy", "kubelb.k8c.io/tenant": "a"}, d.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("selector (-want +got):\n%s", diff)
	}
	// The product specification's defaults: 3 replicas, a 30 s drain, 60 s to terminate.
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas without Config: %d, want 3", *d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "flag/envoy:1" {
		t.Errorf("image %q, want the flag's", c.Image)
	}
	wantArgs := []string{"-c", "/etc/envoy/bootstrap.yaml", "--service-node", "$(POD_NAME)", "--service-cluster", "tenant-a"}
	if !slices.Equal(c.Args[:len(wantArgs)], wantArgs) {
		t.Errorf("args %q", c.Args)
	}
	if c.ReadinessProbe.HTTPGet.Path != "/ready" || c.ReadinessProbe.HTTPGet.Port.StrVal != "ready" || c.Ports[0].ContainerPort != ReadyPort {
		t.Errorf("readiness probe %+v", c.ReadinessProbe.HTTPGet)
	}
	if len(c.Ports) != 2 || c.Ports[1].Name != StatsPortName || c.Ports[1].ContainerPort != StatsPort {
		t.Errorf("ports %+v, want ready and the stats port %s:%d the PodMonitor scrapes", c.Ports, StatsPortName, StatsPort)
	}
	sc := c.SecurityContext
	if !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("security context %+v", sc)
	}
	checkShutdownManager(t, d.Spec.Template, 10*time.Second, 30*time.Second)
	if got := *d.Spec.Template.Spec.TerminationGracePeriodSeconds; got != 60 {
		t.Errorf("termination grace %d, want 60", got)
	}
	if i := slices.Index(c.Args, "--drain-time-s"); i < 0 || c.Args[i+1] != "30" {
		t.Errorf("args %q, want --drain-time-s 30", c.Args)
	}
	if i := slices.Index(c.Args, "--concurrency"); i < 0 || c.Args[i+1] != strconv.Itoa(DefaultWorkers) {
		t.Errorf("args %q, want --concurrency %d without CPU resources", c.Args, DefaultWorkers)
	}
	if f.ConfigMap.Name != BootstrapConfigMapName || f.ConfigMap.Data[BootstrapKey] != "node: {}\n" {
		t.Errorf("ConfigMap %+v", f.ConfigMap)
	}
	if d.Spec.Template.Spec.Volumes[0].ConfigMap.Name != BootstrapConfigMapName {
		t.Error("the pods do not mount the bootstrap ConfigMap")
	}
	if v := d.Spec.Template.Spec.Volumes[1]; v.Secret == nil || v.Secret.SecretName != pki.ClientSecretName ||
		c.VolumeMounts[1].Name != v.Name || c.VolumeMounts[1].MountPath != xdsbootstrap.DefaultTLSDir || !c.VolumeMounts[1].ReadOnly {
		t.Errorf("the pods do not mount the xDS client Secret at %s: %+v %+v", xdsbootstrap.DefaultTLSDir, d.Spec.Template.Spec.Volumes, c.VolumeMounts)
	}
}

// TestClientSecretCurrent: the fleet's client Secret stays while it carries a certificate of
// the current CA for its namespace that is not due; anything else reissues it.
func TestClientSecretCurrent(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca, err := pki.NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	sds, err := xdsbootstrap.TLSFiles("")
	if err != nil {
		t.Fatal(err)
	}
	secret := func(ca *pki.CA, ns string) *corev1.Secret {
		cert, key, err := ca.IssueClient(ns, now, pki.ClientLifetime)
		if err != nil {
			t.Fatal(err)
		}
		return ClientSecret("tenant-a", cert, key, ca.CertPEM, sds)
	}
	good := secret(ca, "tenant-a")
	if good.Labels[pki.LabelXDSTLS] != "client" || good.Labels[kubelbv1alpha1.LabelTenantName] != "a" || good.Type != corev1.SecretTypeTLS {
		t.Errorf("client Secret %+v", good.ObjectMeta)
	}
	ok, at := ClientSecretCurrent(good, "tenant-a", ca, sds, now)
	if want := now.Add(time.Duration(float64(pki.ClientLifetime) * pki.RenewFraction)); !ok || at.Sub(want).Abs() > 10*time.Minute {
		t.Errorf("a fresh Secret: current %v, due at %v; want true, about %v", ok, at, want)
	}
	if ok, _ := ClientSecretCurrent(good, "tenant-a", ca, sds, now.Add(21*24*time.Hour)); ok {
		t.Error("a certificate past 2/3 of its lifetime is kept")
	}
	if ok, _ := ClientSecretCurrent(good, "tenant-a", other, sds, now); ok {
		t.Error("a certificate of the old CA is kept after a rotation")
	}
	if ok, _ := ClientSecretCurrent(secret(ca, "tenant-b"), "tenant-a", ca, sds, now); ok {
		t.Error("a certificate naming another tenant is kept")
	}
	if ok, _ := ClientSecretCurrent(nil, "tenant-a", ca, sds, now); ok {
		t.Error("no Secret counts as current")
	}
	unlabelled := good.DeepCopy()
	unlabelled.Labels = nil
	if ok, _ := ClientSecretCurrent(unlabelled, "tenant-a", ca, sds, now); ok {
		t.Error("a Secret without the labels is kept")
	}
	stale := good.DeepCopy()
	stale.Data[xdsbootstrap.CASDSFile] = []byte("old")
	if ok, _ := ClientSecretCurrent(stale, "tenant-a", ca, sds, now); ok {
		t.Error("a Secret with outdated SDS files is kept")
	}
}

func TestBuildOptions(t *testing.T) {
	t.Parallel()
	cfg := func(e kubelbv1alpha1.EnvoyProxy) *kubelbv1alpha1.Config {
		return &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{EnvoyProxy: e}}
	}
	t.Run("image from Config", func(t *testing.T) {
		f := Build(input(cfg(kubelbv1alpha1.EnvoyProxy{Image: "mirror/envoy:2"}), nil))
		if got := f.Deployment.Spec.Template.Spec.Containers[0].Image; got != "mirror/envoy:2" {
			t.Errorf("image %q", got)
		}
	})
	t.Run("daemonset", func(t *testing.T) {
		f := Build(input(cfg(kubelbv1alpha1.EnvoyProxy{UseDaemonset: true, SinglePodPerNode: true}), nil))
		if f.Deployment != nil || f.DaemonSet == nil {
			t.Fatal("want a DaemonSet only")
		}
		if a := f.DaemonSet.Spec.Template.Spec.Affinity; a != nil {
			t.Errorf("a DaemonSet needs no anti-affinity: %+v", a)
		}
	})
	t.Run("single pod per node", func(t *testing.T) {
		user := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
		f := Build(input(cfg(kubelbv1alpha1.EnvoyProxy{SinglePodPerNode: true, Affinity: user}), nil))
		a := f.Deployment.Spec.Template.Spec.Affinity
		terms := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if a.NodeAffinity == nil || len(terms) != 1 || terms[0].TopologyKey != corev1.LabelHostname ||
			terms[0].LabelSelector.MatchLabels["kubelb.k8c.io/tenant"] != "a" {
			t.Errorf("affinity %+v", a)
		}
		if user.PodAntiAffinity != nil {
			t.Error("Build modified the Config's affinity")
		}
	})
	t.Run("graceful shutdown settings", func(t *testing.T) {
		f := Build(input(cfg(kubelbv1alpha1.EnvoyProxy{GracefulShutdown: &kubelbv1alpha1.GracefulShutdown{
			DrainTimeout: &metav1.Duration{Duration: 20 * time.Second}, MinDrainDuration: &metav1.Duration{Duration: 5 * time.Second},
			TerminationGracePeriodSeconds: ptr.To[int64](45),
		}}), nil))
		pod := f.Deployment.Spec.Template.Spec
		if *pod.TerminationGracePeriodSeconds != 45 || !slices.Contains(pod.Containers[0].Args, "20") {
			t.Errorf("grace %d args %q", *pod.TerminationGracePeriodSeconds, pod.Containers[0].Args)
		}
		checkShutdownManager(t, f.Deployment.Spec.Template, 5*time.Second, 20*time.Second)
	})
	t.Run("minimum longer than the timeout", func(t *testing.T) {
		f := Build(input(cfg(kubelbv1alpha1.EnvoyProxy{GracefulShutdown: &kubelbv1alpha1.GracefulShutdown{
			DrainTimeout: &metav1.Duration{Duration: 4 * time.Second}, MinDrainDuration: &metav1.Duration{Duration: 9 * time.Second},
		}}), nil))
		checkShutdownManager(t, f.Deployment.Spec.Template, 4*time.Second, 4*time.Second)
	})
	t.Run("graceful shutdown disabled", func(t *testing.T) {
		in := input(cfg(kubelbv1alpha1.EnvoyProxy{GracefulShutdown: &kubelbv1alpha1.GracefulShutdown{Disabled: true}}), nil)
		f := Build(in)
		pod := f.Deployment.Spec.Template.Spec
		if pod.Containers[0].Lifecycle != nil || len(pod.Containers) != 1 || *pod.TerminationGracePeriodSeconds != corev1.DefaultTerminationGracePeriodSeconds {
			t.Errorf("containers %+v grace %d, want Envoy alone without a hook", pod.Containers, *pod.TerminationGracePeriodSeconds)
		}
		if _, ok := f.Deployment.Spec.Template.Annotations[annotationDefaultContainer]; ok {
			t.Error("a default container with one container")
		}
		// Without the sidecar its image does not roll the pods.
		in.ShutdownManagerImage = "flag/kubelb:2"
		if a, b := f.Deployment.Annotations[AnnotationConfigHash], Build(in).Deployment.Annotations[AnnotationConfigHash]; a != b {
			t.Error("the shutdown manager's image changes the hash of a fleet without graceful shutdown")
		}
	})
}

// checkShutdownManager checks the drain of a pod with graceful shutdown: no shell anywhere;
// Envoy's preStop hook is an HTTP GET of the sidecar's /drained; the sidecar runs the
// manager's image as a locked-down non-root user, with the drain times as flags, and its
// preStop hook execs the kubelb binary.
func checkShutdownManager(t *testing.T, template corev1.PodTemplateSpec, minDrain, drain time.Duration) {
	t.Helper()
	pod := template.Spec
	if len(pod.Containers) != 2 || pod.Containers[0].Name != "envoy" || pod.Containers[1].Name != ShutdownManagerContainerName {
		t.Fatalf("containers %+v, want envoy and %s", pod.Containers, ShutdownManagerContainerName)
	}
	if got := template.Annotations[annotationDefaultContainer]; got != "envoy" {
		t.Errorf("default container %q, want envoy", got)
	}
	envoy, sidecar := pod.Containers[0], pod.Containers[1]
	wantHook := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/drained", Port: intstr.FromInt32(9902), Scheme: corev1.URISchemeHTTP,
	}}}
	if diff := cmp.Diff(wantHook, envoy.Lifecycle); diff != "" {
		t.Errorf("Envoy's preStop hook (-want +got):\n%s", diff)
	}
	if sidecar.Image != "flag/kubelb:1" || !slices.Equal(sidecar.Command, []string{"/usr/local/bin/kubelb"}) {
		t.Errorf("sidecar image %q command %q", sidecar.Image, sidecar.Command)
	}
	wantArgs := []string{"envoy-shutdown-manager", "--admin-address=127.0.0.1:9901", "--listen-address=:9902",
		fmt.Sprintf("--min-drain-duration=%s", minDrain), fmt.Sprintf("--drain-timeout=%s", drain)}
	if diff := cmp.Diff(wantArgs, sidecar.Args); diff != "" {
		t.Errorf("sidecar args (-want +got):\n%s", diff)
	}
	if sidecar.Lifecycle == nil || sidecar.Lifecycle.PreStop.Exec == nil ||
		!slices.Equal(sidecar.Lifecycle.PreStop.Exec.Command, []string{"/usr/local/bin/kubelb", "envoy-shutdown-manager", "drain"}) {
		t.Errorf("sidecar preStop hook %+v", sidecar.Lifecycle)
	}
	for _, c := range pod.Containers {
		for _, cmd := range [][]string{c.Command, c.Args, execOf(c.Lifecycle)} {
			for _, arg := range cmd {
				if slices.Contains([]string{"sh", "bash", "dash", "ash"}, path.Base(arg)) || arg == "-c" && c.Name != "envoy" {
					t.Errorf("container %s runs a shell: %q", c.Name, cmd)
				}
			}
		}
	}
	sc := sidecar.SecurityContext
	if !*sc.RunAsNonRoot || *sc.RunAsUser != 65532 || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("sidecar security context %+v", sc)
	}
	if sidecar.Resources.Requests.Cpu().MilliValue() > 50 || sidecar.Resources.Requests.Memory().Value() > 96<<20 || sidecar.Resources.Limits.Memory().IsZero() {
		t.Errorf("sidecar resources %+v, want small requests and a memory limit", sidecar.Resources)
	}
}

// execOf is the command of a container's preStop exec hook.
func execOf(l *corev1.Lifecycle) []string {
	if l == nil || l.PreStop == nil || l.PreStop.Exec == nil {
		return nil
	}
	return l.PreStop.Exec.Command
}

func TestBuildHash(t *testing.T) {
	t.Parallel()
	hash := func(in Input) string { return Build(in).Deployment.Annotations[AnnotationConfigHash] }
	base := input(nil, nil)
	if hash(base) == "" || hash(base) != hash(input(nil, nil)) {
		t.Fatal("the hash is not stable")
	}
	more := input(&kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{EnvoyProxy: kubelbv1alpha1.EnvoyProxy{Replicas: 4}}}, nil)
	if hash(more) == hash(base) {
		t.Error("replicas do not change the hash")
	}
	boot := base
	boot.Bootstrap = []byte("node: {id: x}\n")
	if hash(boot) == hash(base) {
		t.Error("the bootstrap does not change the hash (pods would not roll)")
	}
	// --envoy-xds-protocol changes the bootstrap, so the fleets roll onto the other protocol.
	hashes := map[string]xdsbootstrap.Protocol{}
	for _, p := range []xdsbootstrap.Protocol{xdsbootstrap.ProtocolDelta, xdsbootstrap.ProtocolSotW} {
		b, err := xdsbootstrap.Generate(xdsbootstrap.Options{Tenant: "tenant-a", XDSAddress: "kubelb.kubelb.svc:8001", Protocol: p})
		if err != nil {
			t.Fatal(err)
		}
		in := base
		in.Bootstrap = b
		hashes[hash(in)] = p
	}
	if len(hashes) != 2 {
		t.Errorf("the xDS protocol does not change the hash: %v", hashes)
	}
}

func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	o, err := Options{Namespace: "kubelb"}.withDefaults()
	if err != nil || o.XDSAddress != "kubelb.kubelb.svc:8001" || o.EnvoyImage != DefaultEnvoyImage || o.XDSProtocol != xdsbootstrap.ProtocolDelta ||
		o.ShutdownManagerImage != "ghcr.io/kubelb/kubelb-manager:v0.0.0-dev" {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range []Options{{}, {Namespace: "x", XDSAddress: "nohost"}, {Namespace: "x", XDSAddress: ":80"}, {Namespace: "x", XDSAddress: "h:0"},
		{Namespace: "x", XDSProtocol: "rest"}} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestWorkers: Envoy gets as many workers as its container's CPU limit, rounded up, else its
// request, else DefaultWorkers, never Envoy's own default of one per core of the node (each
// worker holds a descriptor per listener).
func TestWorkers(t *testing.T) {
	t.Parallel()
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	for _, c := range []struct {
		name string
		r    *corev1.ResourceRequirements
		want int
	}{
		{"none", nil, DefaultWorkers},
		{"memory only", &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}, DefaultWorkers},
		{"request 500m", &corev1.ResourceRequirements{Requests: cpu("500m")}, 1},
		{"request 4", &corev1.ResourceRequirements{Requests: cpu("4")}, 4},
		{"limit 2500m over request 1", &corev1.ResourceRequirements{Requests: cpu("1"), Limits: cpu("2500m")}, 3},
		{"limit 1m", &corev1.ResourceRequirements{Limits: cpu("1m")}, 1},
	} {
		if got := Workers(c.r); got != c.want {
			t.Errorf("%s: %d workers, want %d", c.name, got, c.want)
		}
		f := Build(Input{Namespace: "tenant-a", Settings: settings.Tenant{Envoy: kubelbv1alpha1.EnvoyProxy{Resources: c.r, Replicas: 1}}, Bootstrap: []byte("node: {}\n")})
		args := f.Deployment.Spec.Template.Spec.Containers[0].Args
		if i := slices.Index(args, "--concurrency"); i < 0 || args[i+1] != strconv.Itoa(c.want) {
			t.Errorf("%s: args %q, want --concurrency %d", c.name, args, c.want)
		}
	}
}
