package framework

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/internal/testsupport"
)

// serveLogs plays the kubelets' log endpoint, which the API server reaches for `kubectl logs`
// (pods/log): one HTTPS server per node on the node's address, at a free port written into
// the Node's status.daemonEndpoints.kubeletEndpoint. GET /containerLogs/<namespace>/<pod>/<container>
// answers the output of the container's stand-in process, whole (sinceTime and the other
// options are not applied: the played output has no timestamps, and the tests that read it
// match unique lines). The servers stop when the test ends.
func (k *Kubelet) serveLogs() {
	certPEM, keyPEM := testsupport.SelfSignedPEM(k.t, "kubelet")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		k.t.Fatalf("kubelet: serving certificate: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
		path, ok := k.logOf(r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"))
		if !ok {
			http.Error(w, "container not found", http.StatusNotFound)
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(b)
	})
	for name, ip := range k.opts.Nodes {
		l, err := tls.Listen("tcp", net.JoinHostPort(ip, "0"), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		if err != nil {
			k.t.Fatalf("kubelet: log endpoint of node %s: %v", name, err)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		k.t.Cleanup(func() { _ = srv.Close() })
		port := int32(l.Addr().(*net.TCPAddr).Port)
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"daemonEndpoints": corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}}}})
		if _, err := k.cs.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			k.t.Fatalf("kubelet: publishing the log endpoint of node %s: %v", name, err)
		}
	}
}

// logOf is the output file of a running container of a played Pod.
func (k *Kubelet) logOf(namespace, pod, container string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pods {
		if p.namespace == namespace && p.name == pod {
			path, ok := p.logs[container]
			return path, ok
		}
	}
	return "", false
}
