package hubtoken

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultSecretKey is the key of the kubeconfig in the tenant Secret (as in the hub's Secret
// kubelb-ccm-kubeconfig, and the ccm chart's default).
const DefaultSecretKey = "kubelb"

// Names inside a kubeconfig rendered from scratch (when the Secret's own cannot be edited).
const (
	kubeconfigCluster = "kubelb"
	kubeconfigUser    = "kubelb-ccm"
	kubeconfigContext = "kubelb"
)

// ParseSecretRef parses "namespace/name" into a Secret reference.
func ParseSecretRef(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("%q is not namespace/name", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// KubeconfigToken returns the token of the current context's user in a kubeconfig, or "".
func KubeconfigToken(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return ""
	}
	if user := currentUser(cfg); user != nil {
		return user.Token
	}
	return ""
}

// currentUser is the user of the current context, or nil.
func currentUser(cfg *clientcmdapi.Config) *clientcmdapi.AuthInfo {
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return nil
	}
	return cfg.AuthInfos[ctx.AuthInfo]
}

// renderKubeconfig returns the kubeconfig existing with token as the current user's token;
// everything else (server, CA, names, namespace) stays as it is. When existing is no usable
// kubeconfig, it renders one from base (server, CA, TLS settings) instead.
func renderKubeconfig(existing []byte, base *rest.Config, token string) ([]byte, error) {
	if len(existing) > 0 {
		if cfg, err := clientcmd.Load(existing); err == nil {
			if user := currentUser(cfg); user != nil {
				user.Token, user.TokenFile = token, ""
				out, err := clientcmd.Write(*cfg)
				if err != nil {
					return nil, fmt.Errorf("rendering the hub kubeconfig: %w", err)
				}
				return out, nil
			}
		}
	}
	ca := base.CAData
	if len(ca) == 0 && base.CAFile != "" {
		b, err := os.ReadFile(base.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the hub CA %s: %w", base.CAFile, err)
		}
		ca = b
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigCluster] = &clientcmdapi.Cluster{
		Server: base.Host, CertificateAuthorityData: ca, TLSServerName: base.ServerName, InsecureSkipTLSVerify: base.Insecure,
	}
	cfg.AuthInfos[kubeconfigUser] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[kubeconfigContext] = &clientcmdapi.Context{Cluster: kubeconfigCluster, AuthInfo: kubeconfigUser}
	cfg.CurrentContext = kubeconfigContext
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("rendering the hub kubeconfig: %w", err)
	}
	return out, nil
}
