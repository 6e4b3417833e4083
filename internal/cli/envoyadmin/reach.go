package envoyadmin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
)

// PickPod returns the Ready Envoy pod of the tenant's fleet (namespace tenantNamespace) that
// comes first by name, or an error saying what to do when there is none.
func PickPod(ctx context.Context, c client.Reader, tenantNamespace string) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(tenantNamespace), client.MatchingLabels(hubnames.EnvoyPodLabels(tenantNamespace))); err != nil {
		return nil, fmt.Errorf("listing the Envoy pods of %s: %w", tenantNamespace, err)
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp.IsZero() && ready(p) {
			return p, nil
		}
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("no Envoy pod in %s: is it a tenant namespace? (kubectl get tenants; kubectl -n %s get deploy,events)", tenantNamespace, tenantNamespace)
	}
	return nil, fmt.Errorf("none of the %d Envoy pods of %s is Ready: kubectl -n %s describe pods -l %s=%s",
		len(pods.Items), tenantNamespace, tenantNamespace, hubnames.LabelAppName, hubnames.EnvoyAppName)
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Forward port-forwards a local loopback port through the API server to Envoy's admin port
// (127.0.0.1:9901 in the pod) and returns the admin interface there; stop ends the forward.
func Forward(cfg *rest.Config, pod *corev1.Pod) (admin Admin, stop func(), err error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("port-forwarding to %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	host, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, nil, err
	}
	host.Path, err = url.JoinPath(host.Path, "api/v1/namespaces", pod.Namespace, "pods", pod.Name, "portforward")
	if err != nil {
		return nil, nil, err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, host)
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(ir.EnvoyAdminPort)}, stopCh, readyCh, io.Discard, io.Discard)
	if err != nil {
		return nil, nil, fmt.Errorf("port-forwarding to %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-readyCh:
	case err := <-errc:
		return nil, nil, fmt.Errorf("port-forwarding to %s/%s (needs pods/portforward on the hub): %w", pod.Namespace, pod.Name, err)
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		close(stopCh)
		return nil, nil, fmt.Errorf("port-forwarding to %s/%s: no local port: %v", pod.Namespace, pod.Name, err)
	}
	return HTTPAdmin{BaseURL: fmt.Sprintf("http://127.0.0.1:%d", ports[0].Local)}, func() { close(stopCh) }, nil
}
