package translatecmd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// Manifests are the objects of one or more manifest files, typed, in file order.
type Manifests struct {
	// Objects are the hub objects.
	Objects []client.Object
	// TenantServices are the tenant Services of type LoadBalancer (those not labelled
	// managed-by kubelb): the ccm mirrors each to a LoadBalancer.
	TenantServices []*corev1.Service
	// TenantObjects are the tenant's Ingresses, Gateways and Gateway API routes: the ccm
	// mirrors each to a Route (tenantobjects.go).
	TenantObjects []*unstructured.Unstructured
	// Ignored names the documents that are not read, with why.
	Ignored []string
	// tenantBackends are the other tenant Services (backends of TenantObjects), and
	// tenantSecrets the tenant's Secrets (certificates of TenantObjects).
	tenantBackends []*corev1.Service
	tenantSecrets  []*corev1.Secret
}

// ReadFiles reads the manifests of the files ("-" is stdin); each may hold several YAML
// documents, JSON, or a List (as `kubectl get -o yaml` writes).
func ReadFiles(paths []string, stdin io.Reader, scheme *runtime.Scheme) (Manifests, error) {
	var m Manifests
	for _, p := range paths {
		r := stdin
		if p != "-" {
			f, err := os.Open(p)
			if err != nil {
				return m, fmt.Errorf("reading the manifests: %w", err)
			}
			defer f.Close()
			r = f
		}
		if err := m.read(p, r, scheme); err != nil {
			return m, err
		}
	}
	return m, nil
}

func (m *Manifests) read(path string, r io.Reader, scheme *runtime.Scheme) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	for doc := 1; ; doc++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s, document %d: %w", path, doc, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return fmt.Errorf("%s, document %d: %w", path, doc, err)
			}
			for i := range list.Items {
				if err := m.add(fmt.Sprintf("%s, document %d, item %d", path, doc, i+1), &list.Items[i], scheme); err != nil {
					return err
				}
			}
			continue
		}
		if err := m.add(fmt.Sprintf("%s, document %d", path, doc), u, scheme); err != nil {
			return err
		}
	}
}

// add types u with the scheme.
func (m *Manifests) add(where string, u *unstructured.Unstructured, scheme *runtime.Scheme) error {
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" {
		return fmt.Errorf("%s has no kind", where)
	}
	if _, isL7 := tenantKind(u); isL7 && u.GetLabels()[v1alpha1.LabelManagedBy] != v1alpha1.LabelManagedByValue {
		m.TenantObjects = append(m.TenantObjects, u)
		return nil
	}
	if !scheme.Recognizes(gvk) {
		m.Ignored = append(m.Ignored, fmt.Sprintf("%s: %s %s (not a kind the manager reads)", where, gvk.Kind, u.GetName()))
		return nil
	}
	obj, err := scheme.New(gvk)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("%s (%s %s): %w", where, gvk.Kind, u.GetName(), err)
	}
	o, ok := obj.(client.Object)
	if !ok {
		m.Ignored = append(m.Ignored, fmt.Sprintf("%s: %s (not an object)", where, gvk.Kind))
		return nil
	}
	if svc, ok := o.(*corev1.Service); ok && svc.Labels[v1alpha1.LabelManagedBy] != v1alpha1.LabelManagedByValue {
		if svc.Namespace == "" {
			svc.Namespace = corev1.NamespaceDefault
		}
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			m.tenantBackends = append(m.tenantBackends, svc)
			return nil
		}
		m.TenantServices = append(m.TenantServices, svc)
		return nil
	}
	if s, ok := o.(*corev1.Secret); ok && s.Labels[v1alpha1.LabelManagedBy] != v1alpha1.LabelManagedByValue {
		if s.Namespace == "" {
			s.Namespace = corev1.NamespaceDefault
		}
		m.tenantSecrets = append(m.tenantSecrets, s)
		return nil
	}
	m.Objects = append(m.Objects, o)
	return nil
}
