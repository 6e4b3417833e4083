package secrets

import (
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// IngressSecrets are the Secrets an Ingress names (in its namespace): in spec.tls[].secretName,
// and in ingress-nginx's auth-secret with auth-type basic (the users of its basic
// authentication; a Secret of another namespace is not served).
func IngressSecrets(ing *networkingv1.Ingress) []types.NamespacedName {
	var out []types.NamespacedName
	seen := map[string]bool{}
	add := func(name string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		out = append(out, types.NamespacedName{Namespace: ing.Namespace, Name: name})
	}
	for _, tls := range ing.Spec.TLS {
		add(tls.SecretName)
	}
	if strings.TrimSpace(ing.Annotations[nginxAuthType]) == "basic" {
		ref := strings.TrimSpace(ing.Annotations[nginxAuthSecret])
		if ns, name, cross := strings.Cut(ref, "/"); !cross {
			add(ref)
		} else if ns == ing.Namespace {
			add(name)
		}
	}
	return out
}

// The ingress-nginx annotations naming the Secret of an Ingress's basic authentication.
const (
	nginxAuthType   = "nginx.ingress.kubernetes.io/auth-type"
	nginxAuthSecret = "nginx.ingress.kubernetes.io/auth-secret"
)

// GatewaySecrets are the Secrets a Gateway's listeners name in tls.certificateRefs, and the
// client certificate it presents to backends (spec.tls.backend.clientCertificateRef):
// references of kind Secret in the core group; a reference without a namespace is to the
// Gateway's.
func GatewaySecrets(gw *gwapiv1.Gateway) []types.NamespacedName {
	var tls []*gwapiv1.ListenerTLSConfig
	for i := range gw.Spec.Listeners {
		tls = append(tls, gw.Spec.Listeners[i].TLS)
	}
	if b := gw.Spec.TLS; b != nil && b.Backend != nil && b.Backend.ClientCertificateRef != nil {
		tls = append(tls, &gwapiv1.ListenerTLSConfig{CertificateRefs: []gwapiv1.SecretObjectReference{*b.Backend.ClientCertificateRef}})
	}
	return certificateSecrets(gw.Namespace, tls)
}

// ListenerSetSecrets are the Secrets a ListenerSet's listeners name in tls.certificateRefs,
// as GatewaySecrets.
func ListenerSetSecrets(ls *gwapiv1.ListenerSet) []types.NamespacedName {
	var tls []*gwapiv1.ListenerTLSConfig
	for i := range ls.Spec.Listeners {
		tls = append(tls, ls.Spec.Listeners[i].TLS)
	}
	return certificateSecrets(ls.Namespace, tls)
}

// certificateSecrets are the Secrets the listeners' TLS settings (of an object of namespace
// ns) name: references of kind Secret in the core group, without repeats.
func certificateSecrets(ns string, listeners []*gwapiv1.ListenerTLSConfig) []types.NamespacedName {
	var out []types.NamespacedName
	seen := map[types.NamespacedName]bool{}
	for _, tls := range listeners {
		if tls == nil {
			continue
		}
		for _, ref := range tls.CertificateRefs {
			if (ref.Group != nil && *ref.Group != "" && *ref.Group != "core") || (ref.Kind != nil && *ref.Kind != "Secret") {
				continue
			}
			key := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
			if ref.Namespace != nil && *ref.Namespace != "" {
				key.Namespace = string(*ref.Namespace)
			}
			if key.Name == "" || seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, key)
		}
	}
	return out
}

// SecretGranted tells whether one of grants (the ReferenceGrants of the Secret's namespace)
// lets Gateways of namespace from use Secret key. A Secret in the Gateway's own namespace
// needs no grant.
func SecretGranted(from string, key types.NamespacedName, grants []gwapiv1.ReferenceGrant) bool {
	return SecretGrantedFrom("Gateway", from, key, grants)
}

// SecretGrantedFrom is SecretGranted for objects of kind fromKind (Gateway, ListenerSet).
func SecretGrantedFrom(fromKind, from string, key types.NamespacedName, grants []gwapiv1.ReferenceGrant) bool {
	if from == key.Namespace {
		return true
	}
	for i := range grants {
		g := &grants[i]
		if g.Namespace != key.Namespace {
			continue
		}
		fromOK := false
		for _, f := range g.Spec.From {
			if f.Group == gwapiv1.GroupName && string(f.Kind) == fromKind && string(f.Namespace) == from {
				fromOK = true
				break
			}
		}
		if !fromOK {
			continue
		}
		for _, to := range g.Spec.To {
			if to.Group == "" && to.Kind == "Secret" && (to.Name == nil || *to.Name == "" || string(*to.Name) == key.Name) {
				return true
			}
		}
	}
	return false
}

// originOf is the tenant Secret a SyncSecret mirrors, from its origin labels.
func originOf(o client.Object) (types.NamespacedName, bool) {
	l := o.GetLabels()
	ns, name := l[v1alpha1.LabelOriginNamespace], l[v1alpha1.LabelOriginName]
	if ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}
