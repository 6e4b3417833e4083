// The field indexes of the source controllers' caches and their functions.

package source

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// Field indexes of the hub cache's Routes.
const (
	// indexRouteOrigin: "<origin-resource-kind>/<origin namespace>/<origin name>".
	indexRouteOrigin = "ccm.kubelb.k8c.io/route-origin"
	// indexRouteServices: "namespace/name" of every Service a Route embeds.
	indexRouteServices = "ccm.kubelb.k8c.io/route-services"
)

func routeOriginIndex(o client.Object) []string {
	rt, ok := o.(*v1alpha1.Route)
	if !ok {
		return nil
	}
	if kind, key, ok := routeOrigin(rt); ok {
		return []string{originKey(kind, key)}
	}
	return nil
}

func routeServicesIndex(o client.Object) []string {
	rt, ok := o.(*v1alpha1.Route)
	if !ok || rt.Spec.Source.Kubernetes == nil {
		return nil
	}
	var out []string
	for _, s := range rt.Spec.Source.Kubernetes.Services {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

// IndexHub registers on a hub cache the indexes of hub Routes that the Layer 7 release (and
// the controllers) look Routes up by.
func IndexHub(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &v1alpha1.Route{}, indexRouteOrigin, routeOriginIndex); err != nil {
		return fmt.Errorf("indexing hub Routes by origin: %w", err)
	}
	if err := idx.IndexField(ctx, &v1alpha1.Route{}, indexRouteServices, routeServicesIndex); err != nil {
		return fmt.Errorf("indexing hub Routes by Service: %w", err)
	}
	return nil
}

// Field indexes of the tenant cache, per kind.
const (
	// indexBackends: "namespace/name" of every Service the object references.
	indexBackends = "ccm.kubelb.k8c.io/backends"
	// indexParents: "namespace/name" of every Gateway a route names as parent (of the one a
	// ListenerSet names).
	indexParents = "ccm.kubelb.k8c.io/parents"
	// indexListenerSets: "namespace/name" of every ListenerSet a route names as parent.
	indexListenerSets = "ccm.kubelb.k8c.io/listenersets"
	// indexFrontendCA: "namespace/name" of every ConfigMap a Gateway's client certificate
	// validation names.
	indexFrontendCA = "ccm.kubelb.k8c.io/frontend-ca"
)

// indexTenant registers on the tenant cache the indexes of kind k: by the Services its
// objects reference and, for routes, by their parent Gateways.
func indexTenant(ctx context.Context, idx client.FieldIndexer, k Kind) error {
	if err := idx.IndexField(ctx, k.New(), indexBackends, func(o client.Object) []string {
		var out []string
		for _, ref := range ObjectRefs(k, toUnstructured(o), o.GetNamespace()) {
			if ref.isService() {
				out = append(out, ref.Namespace+"/"+ref.Name)
			}
		}
		return out
	}); err != nil {
		return fmt.Errorf("indexing %ss by Service: %w", k.String(), err)
	}
	if k.Name == Gateway.Name {
		if err := idx.IndexField(ctx, k.New(), indexFrontendCA, func(o client.Object) []string {
			var out []string
			for _, ref := range FrontendCARefs(toUnstructured(o), o.GetNamespace()) {
				out = append(out, ref.String())
			}
			return out
		}); err != nil {
			return fmt.Errorf("indexing %ss by CA ConfigMap: %w", k.String(), err)
		}
		return nil
	}
	if k.Name == ListenerSet.Name {
		if err := idx.IndexField(ctx, k.New(), indexParents, func(o client.Object) []string {
			if p, ok := ListenerSetGateway(toUnstructured(o), o.GetNamespace()); ok {
				return []string{p.Namespace + "/" + p.Name}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("indexing %ss by parent Gateway: %w", k.String(), err)
		}
		return nil
	}
	if !k.AttachesToGateway() {
		return nil
	}
	if err := idx.IndexField(ctx, k.New(), indexParents, func(o client.Object) []string {
		var out []string
		for _, p := range ParentRefs(toUnstructured(o), o.GetNamespace()) {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		return out
	}); err != nil {
		return fmt.Errorf("indexing %ss by parent Gateway: %w", k.String(), err)
	}
	if err := idx.IndexField(ctx, k.New(), indexListenerSets, func(o client.Object) []string {
		var out []string
		for _, p := range ListenerSetParents(toUnstructured(o), o.GetNamespace()) {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		return out
	}); err != nil {
		return fmt.Errorf("indexing %ss by parent ListenerSet: %w", k.String(), err)
	}
	return nil
}

// toUnstructured is o's content, nil when it cannot be converted.
func toUnstructured(o client.Object) map[string]any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil
	}
	return u
}

func indexPolicies(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &gwapiv1.BackendTLSPolicy{}, indexPolicyTargets, func(o client.Object) []string {
		p := o.(*gwapiv1.BackendTLSPolicy)
		var out []string
		for _, t := range p.Spec.TargetRefs {
			if t.Group == "" && t.Kind == kindService {
				out = append(out, p.Namespace+"/"+string(t.Name))
			}
		}
		return out
	}); err != nil {
		return fmt.Errorf("indexing BackendTLSPolicies by target: %w", err)
	}
	if err := idx.IndexField(ctx, &gwapiv1.BackendTLSPolicy{}, indexPolicyConfigMaps, func(o client.Object) []string {
		p := o.(*gwapiv1.BackendTLSPolicy)
		var out []string
		for _, r := range p.Spec.Validation.CACertificateRefs {
			if r.Group == "" && r.Kind == "ConfigMap" {
				out = append(out, p.Namespace+"/"+string(r.Name))
			}
		}
		return out
	}); err != nil {
		return fmt.Errorf("indexing BackendTLSPolicies by ConfigMap: %w", err)
	}
	return nil
}

// indexPolicyKinds indexes the policies of each kind by target: trafficTargetKey of every
// object a policy targets (tenant cache; the policy's namespace).
func indexPolicyKinds(ctx context.Context, idx client.FieldIndexer, kinds []*PolicyKind) error {
	for _, k := range kinds {
		if err := idx.IndexField(ctx, k.New(), k.index, func(o client.Object) []string {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				return nil
			}
			var out []string
			for _, t := range trafficpolicy.Targets(trafficSpec(u)) {
				if t.Group == gatewayGroup {
					out = append(out, trafficTargetKey(t.Kind, t.Name))
				}
			}
			selectors, _ := trafficpolicy.Selectors(trafficSpec(u))
			for _, s := range selectors {
				if key := selectorKey(s.Kind); s.Group == gatewayGroup && !slices.Contains(out, key) {
					out = append(out, key)
				}
			}
			return out
		}); err != nil {
			return fmt.Errorf("indexing %ss by target: %w", k.Kind, err)
		}
	}
	return nil
}

// indexBasicAuthSecrets registers indexBasicAuthSecret (tenant cache).
func indexBasicAuthSecrets(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, SecurityPolicyKind.New(), indexBasicAuthSecret, func(o client.Object) []string {
		if u, ok := o.(*unstructured.Unstructured); ok {
			return SecurityPolicySecretNames(u)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing SecurityPolicies by basicAuth Secret: %w", err)
	}
	return nil
}

// indexExtAuthServices registers indexExtAuthService (tenant cache).
func indexExtAuthServices(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, SecurityPolicyKind.New(), indexExtAuthService, func(o client.Object) []string {
		if u, ok := o.(*unstructured.Unstructured); ok {
			var out []string
			for _, name := range append([]string{ExtAuthServiceName(u), OIDCServiceName(u)}, JWKSServiceNames(u)...) {
				if name != "" && !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
			return out
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing SecurityPolicies by extAuth Service: %w", err)
	}
	return nil
}
