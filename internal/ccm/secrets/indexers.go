// The field indexes of the Secret controller's caches and their functions.

package secrets

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
)

// Index names (tenant cache) and their functions.
const (
	// indexIngressSecret indexes Ingresses by "<namespace>/<name>" of the Secrets they name.
	indexIngressSecret = "secrets.ccm.kubelb.k8c.io/ingress-tls"
	// indexGatewaySecret indexes Gateways by "<namespace>/<name>" of the Secrets they name.
	indexGatewaySecret = "secrets.ccm.kubelb.k8c.io/gateway-tls"
	// indexGatewaySecretNS indexes Gateways by the namespaces of the Secrets they name (for
	// ReferenceGrant changes).
	indexGatewaySecretNS = "secrets.ccm.kubelb.k8c.io/gateway-tls-namespace"
	// indexListenerSetSecret and indexListenerSetSecretNS are the same for ListenerSets.
	indexListenerSetSecret   = "secrets.ccm.kubelb.k8c.io/listenerset-tls"
	indexListenerSetSecretNS = "secrets.ccm.kubelb.k8c.io/listenerset-tls-namespace"
	// indexGatewayClass indexes Gateways by gatewayClassName.
	indexGatewayClass = "secrets.ccm.kubelb.k8c.io/gateway-class"
	// indexSecurityPolicySecret indexes SecurityPolicies by "<namespace>/<name>" of the Secrets
	// their basicAuth and apiKeyAuth name.
	indexSecurityPolicySecret = "secrets.ccm.kubelb.k8c.io/securitypolicy-basic-auth"
	// indexOrigin indexes hub SyncSecrets by "<origin namespace>/<origin name>".
	indexOrigin = "secrets.ccm.kubelb.k8c.io/origin"
)

func ingressSecretIndex(o client.Object) []string {
	ing, ok := o.(*networkingv1.Ingress)
	if !ok {
		return nil
	}
	return keys(IngressSecrets(ing))
}

func gatewaySecretIndex(o client.Object) []string {
	gw, ok := o.(*gwapiv1.Gateway)
	if !ok {
		return nil
	}
	return keys(GatewaySecrets(gw))
}

func gatewaySecretNSIndex(o client.Object) []string {
	gw, ok := o.(*gwapiv1.Gateway)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range GatewaySecrets(gw) {
		if !seen[k.Namespace] {
			seen[k.Namespace] = true
			out = append(out, k.Namespace)
		}
	}
	return out
}

func listenerSetSecretIndex(o client.Object) []string {
	ls, ok := o.(*gwapiv1.ListenerSet)
	if !ok {
		return nil
	}
	return keys(ListenerSetSecrets(ls))
}

func listenerSetSecretNSIndex(o client.Object) []string {
	ls, ok := o.(*gwapiv1.ListenerSet)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range ListenerSetSecrets(ls) {
		if !seen[k.Namespace] {
			seen[k.Namespace] = true
			out = append(out, k.Namespace)
		}
	}
	return out
}

func securityPolicySecretIndex(o client.Object) []string {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	var out []string
	for _, name := range ccmsource.SecurityPolicySecretNames(u) {
		out = append(out, types.NamespacedName{Namespace: u.GetNamespace(), Name: name}.String())
	}
	return out
}

func gatewayClassIndex(o client.Object) []string {
	gw, ok := o.(*gwapiv1.Gateway)
	if !ok {
		return nil
	}
	return []string{string(gw.Spec.GatewayClassName)}
}

func originIndex(o client.Object) []string {
	if key, ok := originOf(o); ok {
		return []string{key.String()}
	}
	return nil
}

func keys(in []types.NamespacedName) []string {
	out := make([]string, 0, len(in))
	for _, k := range in {
		out = append(out, k.String())
	}
	return out
}

// IndexHub registers on a hub cache the index of SyncSecrets by origin that the release (and
// the controller) look mirrors up by.
func IndexHub(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &v1alpha1.SyncSecret{}, indexOrigin, originIndex); err != nil {
		return fmt.Errorf("indexing hub SyncSecrets: %w", err)
	}
	return nil
}

// indexTenant registers on the tenant cache the indexes of the referrers opts enables:
// Ingresses and Gateways by the Secrets they name, Gateways also by class.
func indexTenant(ctx context.Context, idx client.FieldIndexer, opts Options) error {
	if opts.Ingress {
		if err := idx.IndexField(ctx, &networkingv1.Ingress{}, indexIngressSecret, ingressSecretIndex); err != nil {
			return fmt.Errorf("indexing Ingresses by Secret: %w", err)
		}
	}
	if opts.Gateway {
		for _, ix := range []struct {
			name string
			fn   client.IndexerFunc
		}{{indexGatewaySecret, gatewaySecretIndex}, {indexGatewaySecretNS, gatewaySecretNSIndex}, {indexGatewayClass, gatewayClassIndex}} {
			if err := idx.IndexField(ctx, &gwapiv1.Gateway{}, ix.name, ix.fn); err != nil {
				return fmt.Errorf("indexing Gateways (%s): %w", ix.name, err)
			}
		}
	}
	if opts.Gateway && opts.SecurityPolicies {
		if err := idx.IndexField(ctx, ccmsource.SecurityPolicyKind.New(), indexSecurityPolicySecret, securityPolicySecretIndex); err != nil {
			return fmt.Errorf("indexing SecurityPolicies by Secret: %w", err)
		}
	}
	if opts.Gateway && opts.ListenerSets {
		for _, ix := range []struct {
			name string
			fn   client.IndexerFunc
		}{{indexListenerSetSecret, listenerSetSecretIndex}, {indexListenerSetSecretNS, listenerSetSecretNSIndex}} {
			if err := idx.IndexField(ctx, &gwapiv1.ListenerSet{}, ix.name, ix.fn); err != nil {
				return fmt.Errorf("indexing ListenerSets (%s): %w", ix.name, err)
			}
		}
	}
	return nil
}
