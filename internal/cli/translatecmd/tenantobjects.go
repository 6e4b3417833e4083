package translatecmd

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm/secrets"
	"kubelb.dev/kubelb/internal/ccm/source"
)

// firstNodePort is the first NodePort assumed for tenant Services the manifests give
// without one (the API server's default range starts there).
const firstNodePort = 30000

// tenantKind is the ccm's Kind of a tenant Layer 7 object's GroupVersionKind.
func tenantKind(u *unstructured.Unstructured) (source.Kind, bool) {
	for _, k := range source.Kinds {
		if k.GroupVersionKind() == u.GroupVersionKind() {
			return k, true
		}
	}
	return source.Kind{}, false
}

// tenantSide is what the manifests hold of the tenant cluster, as the ccm reads it.
type tenantSide struct {
	services  map[types.NamespacedName]*corev1.Service
	secrets   map[types.NamespacedName]*corev1.Secret
	nsLabels  map[string]map[string]string
	classes   map[string]*gwapiv1.GatewayClass
	grants    []gwapiv1beta1.ReferenceGrant
	grantsV1  []gwapiv1.ReferenceGrant
	nodePorts int32
	// twins are the NodePort twins made, one per ClusterIP Service however many use it.
	twins map[types.NamespacedName]*corev1.Service
	// used are the Services some mirrored object has as a backend.
	used map[types.NamespacedName]bool
}

func newTenantSide(m Manifests) (*tenantSide, error) {
	ts := &tenantSide{services: map[types.NamespacedName]*corev1.Service{}, secrets: map[types.NamespacedName]*corev1.Secret{},
		nsLabels: map[string]map[string]string{}, classes: map[string]*gwapiv1.GatewayClass{}, nodePorts: firstNodePort,
		used: map[types.NamespacedName]bool{}, twins: map[types.NamespacedName]*corev1.Service{}}
	for _, svc := range slices.Concat(m.TenantServices, m.tenantBackends) {
		ts.services[client.ObjectKeyFromObject(svc)] = svc
		for _, p := range svc.Spec.Ports {
			ts.nodePorts = max(ts.nodePorts, p.NodePort+1)
		}
	}
	for _, s := range m.tenantSecrets {
		ts.secrets[client.ObjectKeyFromObject(s)] = s
	}
	for _, o := range m.Objects {
		switch x := o.(type) {
		case *corev1.Namespace:
			ts.nsLabels[x.Name] = x.Labels
		case *gwapiv1.GatewayClass:
			ts.classes[x.Name] = x
		case *gwapiv1beta1.ReferenceGrant:
			ts.grants = append(ts.grants, *x)
			var v1 gwapiv1.ReferenceGrant
			if err := convert(x, &v1); err != nil {
				return nil, err
			}
			ts.grantsV1 = append(ts.grantsV1, v1)
		case *gwapiv1.ReferenceGrant:
			ts.grantsV1 = append(ts.grantsV1, *x)
			var b1 gwapiv1beta1.ReferenceGrant
			if err := convert(x, &b1); err != nil {
				return nil, err
			}
			ts.grants = append(ts.grants, b1)
		}
	}
	return ts, nil
}

// convert copies one object into another type of the same schema (ReferenceGrant v1beta1 → v1).
func convert(from, to runtime.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(from)
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u, to)
}

// mirror is what the ccm makes on the hub of the manifests' tenant Layer 7 objects, with the
// ccm's defaults (--use-ingress-class, --use-gateway-class): a Route per served object and a
// SyncSecret per certificate Secret they reference; notes say what was left out or assumed.
func (ts *tenantSide) mirror(objs []*unstructured.Unstructured, hubNS string) (out []client.Object, notes []string, err error) {
	synced := map[types.NamespacedName]bool{}
	for _, u := range objs {
		k, _ := tenantKind(u)
		u = u.DeepCopy()
		if u.GetNamespace() == "" {
			u.SetNamespace(corev1.NamespaceDefault)
		}
		where := fmt.Sprintf("%s %s/%s", k, u.GetNamespace(), u.GetName())
		if u.GetUID() == "" {
			u.SetUID(types.UID(u.GetName()))
			notes = append(notes, fmt.Sprintf("%s has no UID: its Route is named %q", where, u.GetName()))
		}
		served, certs, err := ts.served(k, u)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", where, err)
		}
		if !served {
			notes = append(notes, fmt.Sprintf("%s is not of class kubelb: the ccm does not mirror it", where))
			continue
		}
		refs := source.ObjectRefs(k, u.Object, u.GetNamespace())
		var sc *v1alpha1.SourceContext
		if k.GatewayAPI() {
			sc = source.DesiredContext(k.String(), u.GetNamespace(), ts.nsLabels[u.GetNamespace()], refs, ts.grants)
		}
		var services []corev1.Service
		for _, b := range source.ServiceBackends(refs, k.String(), u.GetNamespace(), ts.grants) {
			svc, note := ts.backend(b)
			if note != "" {
				notes = append(notes, where+": "+note)
			}
			if svc != nil {
				services = append(services, *svc)
			}
		}
		out = append(out, source.DesiredRoute(k, u.Object, hubNS, services, sc))
		for _, key := range certs {
			s, found := ts.secrets[key]
			switch {
			case synced[key]:
			case !found:
				notes = append(notes, fmt.Sprintf("%s: Secret %s is not in the manifests: not mirrored", where, key))
			default:
				synced[key] = true
				s = s.DeepCopy()
				if s.UID == "" {
					s.UID = types.UID(s.Name)
				}
				if reason, msg := secrets.Check(s); reason != "" {
					notes = append(notes, fmt.Sprintf("Secret %s is not mirrored: %s", key, msg))
					continue
				}
				out = append(out, secrets.DesiredSyncSecret(s, hubNS))
			}
		}
	}
	return out, notes, nil
}

// served tells whether the ccm mirrors the object, and the certificate Secrets it would
// mirror for it.
func (ts *tenantSide) served(k source.Kind, u *unstructured.Unstructured) (bool, []types.NamespacedName, error) {
	switch k.Name {
	case source.Ingress.Name:
		ing := &networkingv1.Ingress{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ing); err != nil {
			return false, nil, err
		}
		return source.IngressServed(ing, true), secrets.IngressSecrets(ing), nil
	case source.Gateway.Name:
		gw := &gwapiv1.Gateway{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, gw); err != nil {
			return false, nil, err
		}
		var certs []types.NamespacedName
		for _, key := range secrets.GatewaySecrets(gw) {
			if secrets.SecretGranted(gw.Namespace, key, ts.grantsV1) {
				certs = append(certs, key)
			}
		}
		return source.GatewayServed(gw, ts.classes[string(gw.Spec.GatewayClassName)], true), certs, nil
	case source.ListenerSet.Name:
		// Mirrored, as the ccm does when its Gateway is served (which Gateway takes it is the
		// manager's decision); its certificates as a Gateway's, granted to ListenerSets.
		ls := &gwapiv1.ListenerSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ls); err != nil {
			return false, nil, err
		}
		var certs []types.NamespacedName
		for _, key := range secrets.ListenerSetSecrets(ls) {
			if secrets.SecretGrantedFrom("ListenerSet", ls.Namespace, key, ts.grantsV1) {
				certs = append(certs, key)
			}
		}
		return true, certs, nil
	}
	return true, nil, nil
}

// backend is the Service the ccm embeds for a backend, as the ccm's Reconciler does: NodePort
// and LoadBalancer Services as they are, ClusterIP ones through their NodePort twins; missing
// and other Services are left out. NodePorts the manifests do not give are assumed (noted).
func (ts *tenantSide) backend(key types.NamespacedName) (*corev1.Service, string) {
	svc, found := ts.services[key]
	ts.used[key] = found
	if !found {
		return nil, fmt.Sprintf("backend Service %s is not in the manifests: left out (the manager reports it as not found)", key)
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		svc = svc.DeepCopy()
	case corev1.ServiceTypeClusterIP, "":
		if twin, made := ts.twins[key]; made {
			return twin.DeepCopy(), ""
		}
		if _, valid := source.TwinName(svc.Name); !valid {
			return nil, fmt.Sprintf("backend Service %s: its NodePort twin's name would be too long: left out", key)
		}
		svc = source.DesiredTwin(svc)
		svc.UID = types.UID(svc.Name)
		ts.twins[key] = svc
	default:
		return nil, fmt.Sprintf("backend Service %s is of type %s: left out", key, svc.Spec.Type)
	}
	var assumed []string
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].NodePort == 0 {
			svc.Spec.Ports[i].NodePort = ts.nodePorts
			assumed = append(assumed, fmt.Sprintf("%d→%d", svc.Spec.Ports[i].Port, ts.nodePorts))
			ts.nodePorts++
		}
	}
	if len(assumed) == 0 {
		return svc, ""
	}
	return svc, fmt.Sprintf("backend Service %s/%s: NodePorts assumed (port→NodePort) %s (the tenant's API server assigns them)", svc.Namespace, svc.Name, strings.Join(assumed, ", "))
}
