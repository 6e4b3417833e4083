package tenantside

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Hub is the ccm's access to the hub: the REST configuration of its kubeconfig, the tenant's
// namespace there (the kubeconfig context's), the token, and where the kubeconfig came from.
type Hub struct {
	Config    *rest.Config
	Namespace string
	Token     string
	Source    string
}

// LoadHub reads the hub kubeconfig: the file path when given, else the ccm's Secret in the
// tenant cluster (located through the ccm's Deployment when there is one, else the chart's
// default kubelb/kubelb-cluster). namespace, when not empty, replaces the kubeconfig's.
func LoadHub(ctx context.Context, tenant client.Reader, path string, ccm *CCM, namespace string) (*Hub, error) {
	var raw []byte
	var source string
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading the hub kubeconfig: %w", err)
		}
		raw, source = b, path
	} else {
		ns, name, key := defaultCCMNamespace, defaultSecretName, defaultSecretKey
		if ccm != nil {
			ns, name, key = ccm.Namespace, ccm.SecretName, ccm.SecretKey
		}
		source = fmt.Sprintf("Secret %s/%s key %s", ns, name, key)
		sec := &corev1.Secret{}
		if err := tenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				return nil, fmt.Errorf("reading the ccm's hub kubeconfig from %s: %w (pass --hub-kubeconfig FILE)", source, err)
			}
			return nil, fmt.Errorf("reading the ccm's hub kubeconfig from %s: %w", source, err)
		}
		if raw = sec.Data[key]; len(raw) == 0 {
			return nil, fmt.Errorf("%s has no kubeconfig under key %s (pass --hub-kubeconfig FILE)", source, key)
		}
	}
	return parseHub(raw, source, namespace)
}

// parseHub builds a Hub from a kubeconfig.
func parseHub(raw []byte, source, namespace string) (*Hub, error) {
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing the hub kubeconfig (%s): %w", source, err)
	}
	cc := clientcmd.NewDefaultClientConfig(*kc, nil)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the hub kubeconfig (%s): %w", source, err)
	}
	if namespace == "" {
		ns, explicit, err := cc.Namespace()
		if err != nil || !explicit {
			return nil, fmt.Errorf("the hub kubeconfig (%s) names no namespace: pass the ccm's --cluster-name (tenant-<name>)", source)
		}
		namespace = ns
	}
	cfg.Timeout = 15 * time.Second
	cfg.QPS, cfg.Burst = 50, 100 // the permission check asks one question per right
	return &Hub{Config: cfg, Namespace: namespace, Token: cfg.BearerToken, Source: source}, nil
}

// TokenExpiry is the exp claim of a JWT, read without verifying the token; ok is false when
// the token is not a JWT or has no exp.
func TokenExpiry(token string) (exp time.Time, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	secs, err := claims.Exp.Int64()
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(secs, 0), true
}

// hubErrorHint says what to do about an error the hub answered with.
func hubErrorHint(err error, h *Hub) string {
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("the hub does not accept the token of %s (expired, revoked or from another hub): ask the platform team for a fresh copy of the hub's Secret %s/kubelb-ccm-kubeconfig", h.Source, h.Namespace)
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("the token of %s lacks the right: the platform team checks the Role kubelb-ccm in the hub namespace %s (the manager keeps it)", h.Source, h.Namespace)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return "the hub answered with an error: retry, and if it stays, the platform team runs `kubectl kubelb check hub`"
	}
	return fmt.Sprintf("the hub API server %s is not reachable from here: check the server address in %s and that this network reaches it", h.Config.Host, h.Source)
}
