package tenant

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Names inside the ccm kubeconfig.
const (
	kubeconfigCluster = "kubelb"
	kubeconfigUser    = "kubelb-ccm"
	kubeconfigContext = "kubelb"
)

// HubEndpoint is how a ccm reaches the hub API server.
type HubEndpoint struct {
	// Server is the API server URL.
	Server string
	// CAData is the PEM bundle that verifies the API server; empty means the system roots.
	CAData []byte
}

// RenderKubeconfig renders the ccm's kubeconfig: one cluster, one token user, one context
// whose namespace is the tenant namespace.
func RenderKubeconfig(hub HubEndpoint, namespace, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigCluster] = &clientcmdapi.Cluster{Server: hub.Server, CertificateAuthorityData: hub.CAData}
	cfg.AuthInfos[kubeconfigUser] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[kubeconfigContext] = &clientcmdapi.Context{Cluster: kubeconfigCluster, AuthInfo: kubeconfigUser, Namespace: namespace}
	cfg.CurrentContext = kubeconfigContext
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("rendering the ccm kubeconfig: %w", err)
	}
	return out, nil
}

// kubeconfigToken returns the token of the current context's user in a kubeconfig, or "".
func kubeconfigToken(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return ""
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return ""
	}
	if user, ok := cfg.AuthInfos[ctx.AuthInfo]; ok {
		return user.Token
	}
	return ""
}

// HubEndpointFromClusterInfo reads the API server URL and CA from the kubeconfig in the
// kube-public/cluster-info ConfigMap (as kubeadm publishes it: one cluster, often unnamed).
func HubEndpointFromClusterInfo(cm *corev1.ConfigMap) (HubEndpoint, error) {
	raw, ok := cm.Data[clusterInfoKey]
	if !ok || raw == "" {
		return HubEndpoint{}, fmt.Errorf("%s/%s has no %q key", cm.Namespace, cm.Name, clusterInfoKey)
	}
	cfg, err := clientcmd.Load([]byte(raw))
	if err != nil {
		return HubEndpoint{}, fmt.Errorf("parsing the kubeconfig in %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	var cluster *clientcmdapi.Cluster
	if ctx, ok := cfg.Contexts[cfg.CurrentContext]; ok {
		cluster = cfg.Clusters[ctx.Cluster]
	}
	if cluster == nil && len(cfg.Clusters) == 1 {
		for _, c := range cfg.Clusters {
			cluster = c
		}
	}
	if cluster == nil {
		return HubEndpoint{}, fmt.Errorf("%s/%s: kubeconfig has %d clusters and no current context", cm.Namespace, cm.Name, len(cfg.Clusters))
	}
	if cluster.Server == "" {
		return HubEndpoint{}, errors.New(cm.Namespace + "/" + cm.Name + ": kubeconfig has no server URL")
	}
	return HubEndpoint{Server: cluster.Server, CAData: cluster.CertificateAuthorityData}, nil
}

// tokenLifetime is the recorded lifetime of the token in a kubeconfig Secret.
type tokenLifetime struct {
	IssuedAt, ExpiresAt time.Time
}

// lifetimeFromAnnotations reads the lifetime annotations; ok is false when they are missing
// or do not make sense.
func lifetimeFromAnnotations(ann map[string]string) (tokenLifetime, bool) {
	issued, err1 := time.Parse(time.RFC3339, ann[AnnotationTokenIssuedAt])
	expires, err2 := time.Parse(time.RFC3339, ann[AnnotationTokenExpiresAt])
	if err1 != nil || err2 != nil || !expires.After(issued) {
		return tokenLifetime{}, false
	}
	return tokenLifetime{IssuedAt: issued, ExpiresAt: expires}, true
}

// annotations returns the lifetime as Secret annotations.
func (l tokenLifetime) annotations() map[string]string {
	return map[string]string{
		AnnotationTokenIssuedAt:  l.IssuedAt.UTC().Format(time.RFC3339),
		AnnotationTokenExpiresAt: l.ExpiresAt.UTC().Format(time.RFC3339),
	}
}

// RefreshAt is when a token should be replaced: after 80% of its lifetime, so a ccm that
// picks up the new kubeconfig late still has a fifth of the lifetime to do so.
func RefreshAt(issuedAt, expiresAt time.Time) time.Time {
	life := expiresAt.Sub(issuedAt)
	return issuedAt.Add(time.Duration(float64(life) * refreshFraction))
}

// RefreshIn returns how long until a token must be replaced; zero or less means now.
func RefreshIn(now, issuedAt, expiresAt time.Time) time.Duration {
	return RefreshAt(issuedAt, expiresAt).Sub(now)
}
