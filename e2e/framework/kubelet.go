package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// PodCIDR is the range the played kubelet gives Pod IPs from. It is not loopback (the API
// server refuses loopback endpoints), so the harness that binds these addresses runs in its
// own network namespace (see e2e/conformance).
const PodCIDR = "10.244.0.0/16"

// KubeletOptions configure PlayKubelet.
type KubeletOptions struct {
	// Nodes are the names and addresses of the Ready nodes Pods are bound to (round robin).
	Nodes map[string]string
	// Images maps a container image (without tag) to the binary that stands in for it. A
	// container of another image is reported running without a process.
	Images map[string]string
	// Ports gives the ports of an image's stand-in (by image, without tag) from the
	// container's environment; an image not listed gets EchoBasicPorts.
	Ports map[string]func(env []string) []StandInPort
}

// StandInPort is a port a stand-in listens on in its Pod. The kubelet gives it a fresh
// loopback port, sets every variable of Vars to it, and forwards PodIP:<pod port> there (the
// Pod's network namespace); the pod port is the value of the first variable of Vars the
// container sets, else Default.
type StandInPort struct {
	Vars    []string
	Default int
	// UDP: the port is a UDP one (datagrams forwarded per flow), else TCP.
	UDP bool
	// Ready: the Pod is reported Ready only once the stand-in listens there (30 s at most).
	Ready bool
}

// EchoBasicPorts are the ports of echo-basic, the conformance suite's backend, by the
// environment variables that move them: HTTP and TCP mode share 3000, HTTPS and TLS mode
// share 8443, h2c listens on 3001; with UDP_ECHO_SERVER set it is a UDP echo on UDP_PORT
// (8080) only.
func EchoBasicPorts(env []string) []StandInPort {
	if v, ok := lookupEnv(env, "UDP_ECHO_SERVER"); ok && v != "" {
		return []StandInPort{{Vars: []string{"UDP_PORT"}, Default: 8080, UDP: true, Ready: true}}
	}
	return []StandInPort{
		{Vars: []string{"HTTP_PORT", "TCP_PORT"}, Default: 3000, Ready: true},
		{Vars: []string{"H2C_PORT"}, Default: 3001},
		{Vars: []string{"HTTPS_PORT", "TLS_PORT"}, Default: 8443},
	}
}

// Kubelet plays the kubelets of the tenant's nodes for Pods.
type Kubelet struct {
	t     testenv.TB
	c     client.Client
	cs    kubernetes.Interface
	opts  KubeletOptions
	nodes []string
	mu    sync.Mutex
	pods  map[types.UID]*playedPod
	ips   int
	ipOf  map[types.UID]string
	dir   string
	// log says each message once: a Pod waiting for its Secret is retried every pass.
	log *onceLogger
}

// playedPod is one running Pod: its IP, the stand-in processes and the forwarders from
// PodIP:containerPort to them (the Pod's network namespace).
type playedPod struct {
	ip              string
	namespace, name string
	procs           []*testsupport.Process
	logs            map[string]string // container → its process's output file
	fwd             forwarders
}

// PlayKubelet binds every Pod of the cluster to a node, gives it an IP from PodCIDR, starts
// the stand-in binary of each container with the container's environment (downward API
// fields resolved, Secret volumes written to files and paths rewritten to them), forwards
// PodIP:port to it and reports the Pod Running and Ready once its ports accept connections.
// The containers' output is served to the API server as their logs (serveLogs).
// A Pod being deleted is stopped and its deletion completed. Everything stops when the test
// ends.
func PlayKubelet(t testenv.TB, cfg *rest.Config, c client.Client, opts KubeletOptions) *Kubelet {
	k := &Kubelet{t: t, c: c, cs: kubernetes.NewForConfigOrDie(cfg), opts: opts, pods: map[types.UID]*playedPod{}, dir: t.TempDir(), log: newOnceLogger(t), ipOf: map[types.UID]string{}}
	for n := range opts.Nodes {
		k.nodes = append(k.nodes, n)
	}
	if len(k.nodes) == 0 {
		t.Fatalf("PlayKubelet needs at least one node")
	}
	t.Cleanup(func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		for uid, p := range k.pods {
			p.stop()
			delete(k.pods, uid)
		}
	})
	k.serveLogs()
	Every(t, PlayInterval, func(ctx context.Context) bool { k.syncOnce(ctx); return false })
	return k
}

func (p *playedPod) stop() {
	p.fwd.closeAll()
	for _, proc := range p.procs {
		proc.Kill()
	}
}

func (k *Kubelet) syncOnce(ctx context.Context) {
	var pods corev1.PodList
	if err := k.c.List(ctx, &pods); err != nil {
		return
	}
	seen := map[types.UID]bool{}
	var starting sync.WaitGroup
	for i := range pods.Items {
		pod := &pods.Items[i]
		seen[pod.UID] = true
		switch {
		case pod.DeletionTimestamp != nil:
			k.forget(pod.UID)
			// The kubelet confirms the deletion once the containers are gone.
			zero := int64(0)
			_ = k.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
				Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		case pod.Spec.NodeName == "":
			node := k.nodes[int(hash(string(pod.UID)))%len(k.nodes)]
			_ = k.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: node},
			}, metav1.CreateOptions{})
		default:
			k.mu.Lock()
			_, running := k.pods[pod.UID]
			k.mu.Unlock()
			if running {
				continue
			}
			if _, ok := k.opts.Nodes[pod.Spec.NodeName]; !ok {
				continue // another kubelet's
			}
			starting.Add(1)
			go func(pod *corev1.Pod) {
				defer starting.Done()
				k.start(ctx, pod)
			}(pod.DeepCopy())
		}
	}
	starting.Wait()
	k.mu.Lock()
	var gone []types.UID
	for uid := range k.pods {
		if !seen[uid] {
			gone = append(gone, uid)
		}
	}
	k.mu.Unlock()
	for _, uid := range gone {
		k.forget(uid)
	}
}

// podIP gives a Pod its IP from PodCIDR, the same on every attempt to start it.
func (k *Kubelet) podIP(uid types.UID) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ip, ok := k.ipOf[uid]; ok {
		return ip
	}
	k.ips++
	ip := fmt.Sprintf("10.244.%d.%d", k.ips/250, 1+k.ips%250)
	k.ipOf[uid] = ip
	return ip
}

func hash(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

func (k *Kubelet) forget(uid types.UID) {
	k.mu.Lock()
	p := k.pods[uid]
	delete(k.pods, uid)
	k.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod) {
	ip := k.podIP(pod.UID)
	p := &playedPod{ip: ip, namespace: pod.Namespace, name: pod.Name, logs: map[string]string{}, fwd: forwarders{}}
	var listening []StandInPort
	var listeningAt []string
	for _, ctr := range pod.Spec.Containers {
		image := imageName(ctr.Image)
		bin, ok := k.opts.Images[image]
		if !ok {
			k.log.Logf("kubelet: no stand-in for image %s (Pod %s/%s): reported running without a process", ctr.Image, pod.Namespace, pod.Name)
			continue
		}
		env, args, err := k.containerEnv(pod, ctr, ip)
		if err != nil {
			k.log.Logf("kubelet: Pod %s/%s: %v (retried)", pod.Namespace, pod.Name, err)
			p.stop()
			return
		}
		ports := EchoBasicPorts
		if f, ok := k.opts.Ports[image]; ok {
			ports = f
		}
		// The Pod's network namespace: the process listens on fresh loopback ports and
		// PodIP:port forwards to them, so Pods sharing a port number do not collide.
		for _, sp := range ports(env) {
			podPort, local := sp.Default, testsupport.FreePort(k.t)
			for _, v := range sp.Vars {
				if val, ok := lookupEnv(env, v); ok {
					fmt.Sscan(val, &podPort)
					break
				}
			}
			for _, v := range sp.Vars {
				env = append(env, fmt.Sprintf("%s=%d", v, local))
			}
			addr, to := net.JoinHostPort(ip, fmt.Sprint(podPort)), testsupport.Loopback(local)
			key := addr
			var f forwarder
			if sp.UDP {
				key = udpKey(addr)
				f, err = forwardUDP(addr, []string{to})
			} else {
				f, err = forwardTCP(addr, []string{to})
			}
			if err != nil {
				k.t.Logf("kubelet: Pod %s/%s: %v", pod.Namespace, pod.Name, err)
				continue
			}
			p.fwd[key] = f
			if sp.Ready {
				listening, listeningAt = append(listening, sp), append(listeningAt, to)
			}
		}
		proc := testsupport.StartProcessWithEnv(k.t, "pod-"+pod.Namespace+"-"+pod.Name+"-"+ctr.Name, bin, env, args...)
		p.procs = append(p.procs, proc)
		p.logs[ctr.Name] = proc.Log
	}
	for i, sp := range listening {
		if sp.UDP {
			waitUDPBound(ctx, listeningAt[i], 30*time.Second)
		} else {
			waitListening(ctx, listeningAt[i], 30*time.Second)
		}
	}
	k.mu.Lock()
	k.pods[pod.UID] = p
	k.mu.Unlock()
	if err := k.reportRunning(ctx, pod, ip); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		k.t.Logf("kubelet: reporting Pod %s/%s running: %v", pod.Namespace, pod.Name, err)
		k.forget(pod.UID) // tried again on the next pass
	}
}

func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// CoreDNSImage is CoreDNS's image (without tag), which e2e/images/coredns stands in for.
const CoreDNSImage = "registry.k8s.io/coredns/coredns"

// CoreDNSPorts are the ports of the CoreDNS stand-in (e2e/images/coredns): DNS over UDP on
// the Corefile's port (53), moved by DNS_PORT.
func CoreDNSPorts([]string) []StandInPort {
	return []StandInPort{{Vars: []string{"DNS_PORT"}, Default: 53, UDP: true, Ready: true}}
}

// waitUDPBound waits until a socket of this network namespace is bound to addr's UDP port
// (/proc/net/udp and udp6), without sending it anything: a UDP server answers nothing that
// would tell.
func waitUDPBound(ctx context.Context, addr string, timeout time.Duration) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	var n int
	if _, err := fmt.Sscan(port, &n); err != nil {
		return
	}
	want := fmt.Sprintf(":%04X ", n)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
			b, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(b), "\n")[1:] {
				if fields := strings.Fields(line); len(fields) > 1 && strings.HasSuffix(fields[1]+" ", want) {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitListening(ctx context.Context, addr string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func imageName(image string) string {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i]
	}
	return image
}

// containerEnv resolves a container's environment and arguments: literal values, downward
// API fields, and Secret and ConfigMap volumes written below the kubelet's folder (values and
// arguments naming a file under a mount path are rewritten to the written file).
func (k *Kubelet) containerEnv(pod *corev1.Pod, ctr corev1.Container, ip string) ([]string, []string, error) {
	mounts := map[string]string{} // mount path → folder
	for _, m := range ctr.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name || (v.Secret == nil && v.ConfigMap == nil) {
				continue
			}
			dir := filepath.Join(k.dir, string(pod.UID), v.Name)
			var err error
			if v.Secret != nil {
				err = k.writeSecretVolume(pod.Namespace, v.Secret, dir)
			} else {
				err = k.writeConfigMapVolume(pod.Namespace, v.ConfigMap, dir)
			}
			if err != nil {
				return nil, nil, err
			}
			mounts[m.MountPath] = dir
		}
	}
	inMounts := func(val string) string {
		for path, dir := range mounts {
			if rest, ok := strings.CutPrefix(val, strings.TrimSuffix(path, "/")+"/"); ok {
				return filepath.Join(dir, rest)
			}
		}
		return val
	}
	host := k.opts.Nodes[pod.Spec.NodeName]
	var env []string
	for _, e := range ctr.Env {
		val := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				val = pod.Name
			case "metadata.namespace":
				val = pod.Namespace
			case "status.podIP":
				val = ip
			case "spec.nodeName":
				val = pod.Spec.NodeName
			case "status.hostIP":
				val = host
			}
		}
		env = append(env, e.Name+"="+inMounts(val))
	}
	var args []string
	for _, a := range ctr.Args {
		args = append(args, inMounts(a))
	}
	return env, args, nil
}

// writeConfigMapVolume writes a ConfigMap volume's keys (all, or the items it names) to dir.
func (k *Kubelet) writeConfigMapVolume(namespace string, src *corev1.ConfigMapVolumeSource, dir string) error {
	cm := &corev1.ConfigMap{}
	if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: src.Name}, cm); err != nil {
		return fmt.Errorf("configMap volume %s: %w", src.Name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	files := map[string]string{}
	if len(src.Items) == 0 {
		for key := range cm.Data {
			files[key] = key
		}
	}
	for _, it := range src.Items {
		files[it.Key] = it.Path
	}
	for key, path := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.Clean("/"+path)), []byte(cm.Data[key]), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (k *Kubelet) writeSecretVolume(namespace string, src *corev1.SecretVolumeSource, dir string) error {
	secret := &corev1.Secret{}
	if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: src.SecretName}, secret); err != nil {
		return fmt.Errorf("secret volume %s: %w", src.SecretName, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	files := map[string]string{}
	if len(src.Items) == 0 {
		for key := range secret.Data {
			files[key] = key
		}
	}
	for _, it := range src.Items {
		files[it.Key] = it.Path
	}
	for key, path := range files {
		if err := os.WriteFile(filepath.Join(dir, path), secret.Data[key], 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (k *Kubelet) reportRunning(ctx context.Context, pod *corev1.Pod, ip string) error {
	now := metav1.Now()
	cur := &corev1.Pod{}
	if err := k.c.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		return err
	}
	cur.Status.Phase = corev1.PodRunning
	cur.Status.HostIP = k.opts.Nodes[pod.Spec.NodeName]
	cur.Status.HostIPs = []corev1.HostIP{{IP: cur.Status.HostIP}}
	cur.Status.PodIP = ip
	cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	cur.Status.StartTime = &now
	cur.Status.Conditions = nil
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: ct, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	cur.Status.ContainerStatuses = nil
	started := true
	for _, ctr := range pod.Spec.Containers {
		cur.Status.ContainerStatuses = append(cur.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, ImageID: ctr.Image, Ready: true, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return k.c.Status().Update(ctx, cur)
}
