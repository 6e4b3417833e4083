package install_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/e2e/realcluster"
	"kubelb.dev/kubelb/internal/ociimage"
	"kubelb.dev/kubelb/internal/testsupport"
)

func TestMain(m *testing.M) { realcluster.Main(m) }

const (
	// leaseName is the manager's leader-election Lease (cmd/kubelb).
	leaseName = "kubelb-manager.kubelb.k8c.io"
	// tenantNS is the hub namespace of the quick start's Tenant "shop".
	tenantNS = "tenant-shop"
	// cleanupFinalizer is the ccm's finalizer on the tenant objects it serves.
	cleanupFinalizer = "kubelb.k8c.io/cleanup"
	// addressCondition is the condition the ccm writes on the Services it serves.
	addressCondition = "kubelb.k8c.io/AddressAssigned"
)

// TestInstallQuickStart installs kubelb as docs/quickstart.md tells users, on a real hub
// and a real tenant cluster, by running the document's shell blocks in order: it builds and
// pushes the images and charts to a real registry in the lab (make images-push charts-push),
// installs the manager (2 replicas, leader election, node-IP addresses, the distroless-like
// Envoy image) and a Tenant, hands the kubeconfig over, installs the ccm, and exposes a
// 2-replica backend with a LoadBalancer Service, then a Gateway with an HTTPS HTTPRoute and
// a GRPCRoute. It then checks the traffic (both backend pods answer through kube-proxy → Envoy
// → the tenant NodePort → pod; HTTPS with the tenant's certificate; gRPC), deletes the
// leader's pod and rolls the Envoy Deployment while requests flow (no request may fail),
// checks every kubelb pod's security settings, runs the uninstall section and checks that
// nothing of kubelb is left.
func TestInstallQuickStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real clusters need real root (kubelet and runc need real cgroups and namespaces): run the tests as root")
	}
	begin := time.Now()
	phase := func(name string, since time.Time) {
		t.Logf("TIMING %-40s %s", name, time.Since(since).Round(time.Millisecond))
	}
	root := testsupport.RepoRoot()
	prelude, sections := quickStart(t, filepath.Join(root, "docs", "quickstart.md"))
	envoyBin := testsupport.EnvoyBinary(t)
	helm := testsupport.HelmBinary(t)
	kubectlDir := filepath.Join(root, "bin", "k8s", realcluster.K8sVersion)
	if _, err := os.Stat(filepath.Join(kubectlDir, "kubectl")); err != nil {
		t.Fatalf("kubectl is missing (%v): run `make tools`", err)
	}

	// The registry, on the lab address: both clusters' containerd pull from it over HTTP.
	start := time.Now()
	reg := testsupport.StartRegistry(t, realcluster.LabAddress+":5000")
	phase("registry start", start)

	// The test images (backend, Envoy) are built while the clusters boot.
	type built struct {
		refs map[string]*ociimage.Built
		took time.Duration
		err  error
	}
	imagesDone := make(chan built, 1)
	imagesDir := t.TempDir()
	go func() {
		s := time.Now()
		_, refs, err := ociimage.WriteTestImages(context.Background(), root, imagesDir, envoyBin,
			[]ociimage.Platform{ociimage.LinuxAMD64}, ociimage.Metadata{Created: time.Unix(0, 0).UTC()})
		imagesDone <- built{refs: refs, took: time.Since(s), err: err}
	}()

	start = time.Now()
	hub := realcluster.Start(t, realcluster.Options{Name: "hub", Registry: reg.Addr})
	shop := realcluster.Start(t, realcluster.Options{Name: "shop", Registry: reg.Addr})
	phase("boot of both clusters", start)

	b := <-imagesDone
	if b.err != nil {
		t.Fatalf("building the test images: %v", b.err)
	}
	t.Logf("TIMING %-40s %s", "test images build (backend, Envoy)", b.took.Round(time.Millisecond))
	start = time.Now()
	backendRef := reg.Addr + "/e2e/backend:test"
	envoyRef := reg.Addr + "/envoyproxy/envoy:distroless-v" + testsupport.EnvoyVersion
	for from, to := range map[string]string{ociimage.BackendRef: backendRef, ociimage.EnvoyRef: envoyRef} {
		if _, err := ociimage.Push(context.Background(), b.refs[from], to, true); err != nil {
			t.Fatalf("pushing %s as %s: %v", from, to, err)
		}
	}
	phase("test images push", start)

	work := t.TempDir()
	home := filepath.Join(work, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	kubeconfig := mergedKubeconfig(t, work, map[string]*realcluster.Cluster{"hub": hub, "shop": shop})
	xdsIP := serviceIP(t, hub.ServiceCIDR, 80)
	env := []string{
		"PATH=" + kubectlDir + ":" + filepath.Dir(helm) + ":" + os.Getenv("PATH"),
		"HOME=" + home,
		"KUBECONFIG=" + kubeconfig,
		"GOCACHE=" + goEnv(t, "GOCACHE"), "GOMODCACHE=" + goEnv(t, "GOMODCACHE"), "GOPATH=" + goEnv(t, "GOPATH"),
		"GOFLAGS=" + os.Getenv("GOFLAGS"), "GOPROXY=" + goEnv(t, "GOPROXY"), "GOTOOLCHAIN=local",
		"TMPDIR=" + work,
		// The quick start's variables.
		"REGISTRY=" + reg.Addr, "PLAIN_HTTP=1", "ENVOY_IMAGE=" + envoyRef, "BACKEND_IMAGE=" + backendRef, "XDS_IP=" + xdsIP,
		// make's outputs go to the test's folder, not the shared bin/.
		"IMAGES_OUT=" + filepath.Join(work, "images"), "CHARTS_OUT=" + filepath.Join(work, "charts"),
	}
	r := &runner{t: t, root: root, prelude: prelude, env: env, logDir: work}
	t.Cleanup(func() {
		if t.Failed() {
			dumpState(t, hub, shop)
		}
	})

	var uninstall *section
	for i := range sections {
		s := &sections[i]
		if strings.HasPrefix(s.title, "7. Uninstall") {
			uninstall = s
			continue
		}
		if !sectionNumber.MatchString(s.title) {
			continue
		}
		start := time.Now()
		for _, block := range s.blocks {
			r.run(s.title, block, blockTimeout(s.title))
		}
		phase("quick start: "+s.title, start)
	}
	if uninstall == nil {
		t.Fatal("docs/quickstart.md has no section \"7. Uninstall\"")
	}
	installed := time.Since(begin)
	t.Logf("TIMING %-40s %s", "from nothing to the Gateway's address", installed.Round(time.Millisecond))

	ctx := context.Background()
	// Traffic: the LoadBalancer's address, both backend pods through it.
	start = time.Now()
	svc, err := shop.Client.CoreV1().Services("default").Get(ctx, "backend", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Status.LoadBalancer.Ingress) == 0 || svc.Status.LoadBalancer.Ingress[0].IP == "" {
		t.Fatalf("the tenant Service has no address: %+v", svc.Status.LoadBalancer)
	}
	lbAddr := fmt.Sprintf("%s:%d", svc.Status.LoadBalancer.Ingress[0].IP, svc.Spec.Ports[0].Port)
	if !containsString(hub.NodeIPs, svc.Status.LoadBalancer.Ingress[0].IP) {
		t.Errorf("the LoadBalancer's address %s is not a hub node's (%v)", lbAddr, hub.NodeIPs)
	}
	backendPods := podNames(t, shop.Client, "default", "app=backend")
	if len(backendPods) != 2 {
		t.Fatalf("backend pods %v, want 2", backendPods)
	}
	seen := map[string]bool{}
	for i := 0; i < 200 && len(seen) < 2; i++ {
		rep, err := testsupport.HTTPRoundTrip(lbAddr, "/")
		if err != nil {
			t.Logf("GET http://%s/: %v", lbAddr, err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		seen[rep.Pod] = true
	}
	for _, p := range backendPods {
		if !seen[p] {
			t.Errorf("backend pod %s never answered through %s (seen %v)", p, lbAddr, seen)
		}
	}
	envoyPods := podNames(t, hub.Client, tenantNS, "")
	t.Logf("LoadBalancer %s answered by %v; the tenant's hub pods: %v", lbAddr, keys(seen), envoyPods)

	// The Gateway: HTTPS with the tenant's certificate, and gRPC.
	gwAddr := gatewayAddress(t, shop)
	secret, err := shop.Client.CoreV1().Secrets("default").Get(ctx, "shop-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(secret.Data[corev1.TLSCertKey]) {
		t.Fatal("the tenant's certificate does not parse")
	}
	httpsAddr, grpcAddr := gwAddr+":8443", gwAddr+":8080"
	// One client that keeps its connections alive, as browsers do; the URL's host is the
	// HTTPRoute's hostname (SNI and Host), dialled at the Gateway's address.
	httpsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, httpsAddr)
		},
	}}
	t.Cleanup(httpsClient.CloseIdleConnections)
	https := func() (testsupport.Reply, error) {
		resp, err := httpsClient.Get("https://web.shop.example.com:8443/tls")
		if err != nil {
			return testsupport.Reply{}, err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return testsupport.Reply{}, fmt.Errorf("reading the answer: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return testsupport.Reply{}, fmt.Errorf("GET https://web.shop.example.com:8443/tls: %s", resp.Status)
		}
		pod := resp.Header.Get(testsupport.HeaderPod)
		if pod == "" {
			return testsupport.Reply{}, fmt.Errorf("no %s header in the answer", testsupport.HeaderPod)
		}
		return testsupport.Reply{Identity: testsupport.Identity{Pod: pod}, Proto: resp.Proto}, nil
	}
	grpcCall := func() (testsupport.Reply, error) { return testsupport.GRPCRoundTrip(grpcAddr) }
	for name, call := range map[string]func() (testsupport.Reply, error){"HTTPS " + httpsAddr: https, "gRPC " + grpcAddr: grpcCall} {
		var rep testsupport.Reply
		var err error
		for i := 0; i < 60; i++ {
			if rep, err = call(); err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s through the Gateway: %v", name, err)
		}
		t.Logf("%s answered by %s over %s", name, rep.Pod, rep.Proto)
	}
	phase("traffic checks", start)

	// The kubectl plugin, as each persona runs it, against this installation.
	checkPlugin(t, hub, kubeconfig, home)

	// Disruptions while traffic flows: the leader's pod is deleted, then the Envoy
	// Deployment rolls.
	start = time.Now()
	loads := startLoads(map[string]func() (testsupport.Reply, error){
		"LoadBalancer HTTP": func() (testsupport.Reply, error) { return testsupport.HTTPRoundTrip(lbAddr, "/") },
		"Gateway HTTPS":     https,
		"Gateway gRPC":      grpcCall,
	})
	leader := leaderPod(t, hub)
	t.Logf("deleting the leader's pod %s", leader)
	if err := hub.Client.CoreV1().Pods("kubelb").Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 2*time.Minute, "a new leader and 2 ready manager replicas", func() error {
		if l := leaderPod(t, hub); l == leader || l == "" {
			return fmt.Errorf("the leader is still %q", l)
		}
		return deploymentRolledOut(ctx, hub.Client, "kubelb", "kubelb-manager")
	})
	t.Logf("new leader: %s", leaderPod(t, hub))
	leaderStats := loads.snapshot()
	phase("leader pod deletion", start)

	start = time.Now()
	envoyDeploy := envoyDeployment(t, hub)
	before, err := hub.Client.AppsV1().Deployments(tenantNS).Get(ctx, envoyDeploy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := `{"spec":{"envoyProxy":{"resources":{"requests":{"cpu":"20m","memory":"64Mi"}}}}}`
	if _, err := realclusterDynamic(t, hub).Resource(configGVR).Namespace("kubelb").Patch(ctx, "default", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching Config default: %v", err)
	}
	// When each old pod was deleted (its deletionTimestamp less its grace period, to the
	// second) and when it was first seen gone: its termination, drain included.
	deleted, gone := map[string]time.Time{}, map[string]time.Time{}
	testsupport.Eventually(t, 4*time.Minute, "the Envoy Deployment rolled to the new resources", func() error {
		pods, err := hub.Client.CoreV1().Pods(tenantNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		now, present := time.Now(), map[string]bool{}
		for _, p := range pods.Items {
			present[p.Name] = true
			if _, ok := deleted[p.Name]; !ok && containsString(envoyPods, p.Name) && p.DeletionTimestamp != nil {
				grace := time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second
				deleted[p.Name] = p.DeletionTimestamp.Add(-grace)
			}
		}
		for _, name := range envoyPods {
			if _, ok := gone[name]; !ok && !present[name] {
				gone[name] = now
			}
		}
		d, err := hub.Client.AppsV1().Deployments(tenantNS).Get(ctx, envoyDeploy, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Generation == before.Generation {
			return fmt.Errorf("generation still %d", d.Generation)
		}
		if err := deploymentRolledOut(ctx, hub.Client, tenantNS, envoyDeploy); err != nil {
			return err
		}
		// Until the old pods are gone, not only terminating: their drain is what the
		// requests go through.
		for _, name := range envoyPods {
			if present[name] {
				return fmt.Errorf("old Envoy pod %s is still there", name)
			}
		}
		return nil
	})
	for _, name := range envoyPods {
		if at, ok := deleted[name]; ok {
			t.Logf("old Envoy pod %s: gone %s after its deletion (to the second; the drain waits at least minDrainDuration, 10 s)", name, gone[name].Sub(at).Round(100*time.Millisecond))
		} else {
			t.Logf("old Envoy pod %s: never seen terminating", name)
		}
	}
	phase("Envoy Deployment roll", start)
	total := loads.stop()
	for name, st := range total {
		l := leaderStats[name]
		t.Logf("REQUESTS %-18s leader deletion: %d ok, %d failed; whole disruption run: %d ok, %d failed (%d pods answered)",
			name, l.ok, l.failed, st.ok, st.failed, len(st.pods))
		if st.failed > 0 || st.ok == 0 {
			t.Errorf("%s: %d of %d requests failed while the leader was deleted and the Envoy pods rolled; first errors: %v",
				name, st.failed, st.ok+st.failed, st.errors)
		}
	}

	// Every kubelb pod: non-root, read-only root, no capabilities, RuntimeDefault seccomp.
	checkPodSecurity(t, hub, "kubelb", "")
	checkPodSecurity(t, hub, tenantNS, "")
	checkPodSecurity(t, shop, "kubelb", "")

	// Uninstall, in the documented order; nothing of kubelb is left.
	start = time.Now()
	for _, block := range uninstall.blocks {
		r.run(uninstall.title, block, 5*time.Minute)
	}
	phase("quick start: "+uninstall.title, start)
	checkNothingLeft(t, hub, shop)
	t.Logf("TIMING %-40s %s", "whole test", time.Since(begin).Round(time.Millisecond))
}

var configGVR = schema.GroupVersionResource{Group: "kubelb.k8c.io", Version: "v1alpha1", Resource: "configs"}

func realclusterDynamic(t *testing.T, c *realcluster.Cluster) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// podNames lists the names of the pods of namespace ns matching selector that are not
// being deleted.
func podNames(t *testing.T, c kubernetes.Interface, ns, selector string) []string {
	t.Helper()
	pods, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("listing pods in %s: %v", ns, err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// gatewayAddress is the quick start's Gateway's address.
func gatewayAddress(t *testing.T, shop *realcluster.Cluster) string {
	t.Helper()
	out, err := shop.Kubectl("get", "gateway", "shop", "-n", "default", "-o", "jsonpath={.status.addresses[0].value}")
	if err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("the Gateway's address: %q, %v", out, err)
	}
	return strings.TrimSpace(out)
}

// leaderPod is the pod holding the manager's Lease ("" when none does).
func leaderPod(t *testing.T, hub *realcluster.Cluster) string {
	t.Helper()
	l, err := hub.Client.CoordinationV1().Leases("kubelb").Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	// controller-runtime's identity is <hostname>_<uuid>; the hostname is the pod's name.
	return strings.SplitN(*l.Spec.HolderIdentity, "_", 2)[0]
}

// envoyDeployment is the name of the tenant's Envoy Deployment on the hub.
func envoyDeployment(t *testing.T, hub *realcluster.Cluster) string {
	t.Helper()
	ds, err := hub.Client.AppsV1().Deployments(tenantNS).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(ds.Items) != 1 {
		t.Fatalf("the Envoy Deployment of %s: %v (%d Deployments)", tenantNS, err, len(ds.Items))
	}
	return ds.Items[0].Name
}

// deploymentRolledOut says why Deployment ns/name is not rolled out (nil when it is): every
// replica updated and available, no other replica left.
func deploymentRolledOut(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
		return fmt.Errorf("%s/%s: generation %d observed %d, replicas %d updated %d available %d, want %d",
			ns, name, d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, want)
	}
	return nil
}

// loadStats counts one load's requests.
type loadStats struct {
	ok, failed int
	errors     []string
	pods       map[string]bool
}

// loads sends requests in a loop per target, 20 ms apart, until stopped (at most 10 minutes
// and 30000 requests each).
type loads struct {
	mu    sync.Mutex
	stats map[string]*loadStats
	done  atomic.Bool
	wg    sync.WaitGroup
}

func startLoads(targets map[string]func() (testsupport.Reply, error)) *loads {
	l := &loads{stats: map[string]*loadStats{}}
	deadline := time.Now().Add(10 * time.Minute)
	for name, call := range targets {
		st := &loadStats{pods: map[string]bool{}}
		l.stats[name] = st
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; i < 30000 && !l.done.Load() && time.Now().Before(deadline); i++ {
				rep, err := call()
				l.mu.Lock()
				if err != nil {
					st.failed++
					if len(st.errors) < 5 {
						st.errors = append(st.errors, time.Now().UTC().Format("15:04:05.000")+" "+err.Error())
					}
				} else {
					st.ok++
					st.pods[rep.Pod] = true
				}
				l.mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return l
}

func (l *loads) snapshot() map[string]loadStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]loadStats{}
	for k, v := range l.stats {
		out[k] = loadStats{ok: v.ok, failed: v.failed}
	}
	return out
}

func (l *loads) stop() map[string]*loadStats {
	l.done.Store(true)
	l.wg.Wait()
	return l.stats
}

// checkPodSecurity checks every container of every pod in ns: runAsNonRoot, a read-only
// root file system, all capabilities dropped, no privilege escalation and the RuntimeDefault
// seccomp profile, from the container's settings or the pod's.
func checkPodSecurity(t *testing.T, c *realcluster.Cluster, ns, selector string) {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Errorf("%s: no pod in %s to check", c.Name, ns)
	}
	for _, p := range pods.Items {
		psc := p.Spec.SecurityContext
		if psc == nil {
			psc = &corev1.PodSecurityContext{}
		}
		for _, ctr := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			sc := ctr.SecurityContext
			if sc == nil {
				sc = &corev1.SecurityContext{}
			}
			where := fmt.Sprintf("%s: pod %s/%s container %s", c.Name, ns, p.Name, ctr.Name)
			nonRoot := sc.RunAsNonRoot
			if nonRoot == nil {
				nonRoot = psc.RunAsNonRoot
			}
			if nonRoot == nil || !*nonRoot {
				t.Errorf("%s: runAsNonRoot is not set", where)
			}
			if uid := sc.RunAsUser; uid != nil && *uid == 0 || sc.RunAsUser == nil && psc.RunAsUser != nil && *psc.RunAsUser == 0 {
				t.Errorf("%s: runs as uid 0", where)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: the root file system is writable", where)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: privilege escalation is allowed", where)
			}
			if sc.Capabilities == nil || !containsCap(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: capabilities %+v, want drop ALL and add none", where, sc.Capabilities)
			}
			seccomp := sc.SeccompProfile
			if seccomp == nil {
				seccomp = psc.SeccompProfile
			}
			if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s: seccomp profile %+v, want RuntimeDefault", where, seccomp)
			}
		}
		// The kubelet ran it: every container is running and ready.
		for _, st := range p.Status.ContainerStatuses {
			if st.State.Running == nil || !st.Ready {
				t.Errorf("%s: pod %s/%s container %s is not running and ready: %+v", c.Name, ns, p.Name, st.Name, st.State)
			}
		}
	}
	t.Logf("%s: %d pod(s) in %s: non-root, read-only root, no capabilities, RuntimeDefault seccomp", c.Name, len(pods.Items), ns)
}

func containsCap(caps []corev1.Capability, want corev1.Capability) bool {
	for _, c := range caps {
		if c == want {
			return true
		}
	}
	return false
}

// checkNothingLeft checks what the uninstall leaves: no object of kubelb's kinds on the hub,
// no namespace kubelb or tenant-shop, no pod in either cluster but the tenant's backend, no
// Service or Secret of the tenant carrying the ccm's finalizer, no NodePort twin, no hub
// address in a Service's status; the tenant's Services handed back are still there.
func checkNothingLeft(t *testing.T, hub, shop *realcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	d := realclusterDynamic(t, hub)
	crds, err := hub.Kubectl("api-resources", "--api-group=kubelb.k8c.io", "-o", "name")
	if err != nil {
		t.Fatalf("kubelb's API resources on the hub: %v\n%s", err, crds)
	}
	for _, res := range strings.Fields(crds) {
		name := strings.SplitN(res, ".", 2)[0]
		list, err := d.Resource(schema.GroupVersionResource{Group: "kubelb.k8c.io", Version: "v1alpha1", Resource: name}).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("listing %s: %v", res, err)
			continue
		}
		for _, o := range list.Items {
			t.Errorf("hub: %s %s/%s is left (finalizers %v)", res, o.GetNamespace(), o.GetName(), o.GetFinalizers())
		}
	}
	for _, c := range []struct {
		cluster *realcluster.Cluster
		ns      []string
	}{{hub, []string{"kubelb", tenantNS}}, {shop, []string{"kubelb"}}} {
		for _, ns := range c.ns {
			if _, err := c.cluster.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: namespace %s is left (%v)", c.cluster.Name, ns, err)
			}
		}
		pods, err := c.cluster.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			// The tenant's own backend keeps running; nothing else may be left.
			if c.cluster == shop && p.Namespace == "default" && p.Labels["app"] == "backend" {
				continue
			}
			t.Errorf("%s: pod %s/%s is left", c.cluster.Name, p.Namespace, p.Name)
		}
	}
	svcs, err := shop.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, s := range svcs.Items {
		kept[s.Namespace+"/"+s.Name] = true
		if containsString(s.Finalizers, cleanupFinalizer) {
			t.Errorf("shop: Service %s/%s still carries %s", s.Namespace, s.Name, cleanupFinalizer)
		}
		if strings.HasSuffix(s.Name, "-nodeport") {
			t.Errorf("shop: the ccm's NodePort twin %s/%s is left", s.Namespace, s.Name)
		}
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			t.Errorf("shop: Service %s/%s still shows the hub's address %v", s.Namespace, s.Name, s.Status.LoadBalancer.Ingress)
		}
		for _, c := range s.Status.Conditions {
			if c.Type == addressCondition {
				t.Errorf("shop: Service %s/%s still carries the condition %s (%s)", s.Namespace, s.Name, c.Type, c.Reason)
			}
		}
	}
	// The Services handed back stay.
	for _, name := range []string{"default/backend", "default/backend-l7"} {
		if !kept[name] {
			t.Errorf("shop: Service %s was deleted; the uninstall should hand it back", name)
		}
	}
	secrets, err := shop.Client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if containsString(s.Finalizers, cleanupFinalizer) {
			t.Errorf("shop: Secret %s/%s still carries %s", s.Namespace, s.Name, cleanupFinalizer)
		}
	}
	t.Logf("after the uninstall: no kubelb object, namespace or pod in either cluster; %d tenant Services kept, none with %s", len(svcs.Items), cleanupFinalizer)
}

// dumpState logs what helps to find why the test failed.
func dumpState(t *testing.T, hub, shop *realcluster.Cluster) {
	t.Helper()
	for _, c := range []*realcluster.Cluster{hub, shop} {
		out, _ := c.Kubectl("get", "pods,svc,deploy,events", "-A", "-o", "wide")
		t.Logf("%s:\n%s", c.Name, lastLines(out, 120))
	}
	for _, args := range [][]string{
		{"-n", "kubelb", "logs", "deploy/kubelb-manager", "--tail=60", "--all-containers"},
		{"get", "loadbalancers,routes,tenants", "-A", "-o", "yaml"},
	} {
		out, _ := hub.Kubectl(args...)
		t.Logf("hub: kubectl %v:\n%s", args, lastLines(out, 150))
	}
	out, _ := shop.Kubectl("-n", "kubelb", "logs", "deploy/kubelb-ccm", "--tail=60")
	t.Logf("shop: ccm log:\n%s", lastLines(out, 60))
}

// blockTimeout is how long a block of a quick-start section may run before the test gives up
// on it (a hang guard, not a target): 8 minutes, and 20 for the section that builds and
// publishes the images, which compiles both binaries (and the SBOMs) from a build cache that
// holds none of them on a fresh machine, while `make test` runs other packages beside it (CI
// saw it take more than 8 minutes there).
func blockTimeout(title string) time.Duration {
	if strings.HasPrefix(title, "1. Build") {
		return 20 * time.Minute
	}
	return 8 * time.Minute
}
