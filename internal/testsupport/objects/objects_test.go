package objects

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestResetForgetsEarlierRead: before WaitFor, Edit and EditStatus read an object again,
// nothing of an earlier read stays (an annotation the server no longer has, a deletion
// timestamp) but its kind; an Unstructured object keeps what its read needs.
func TestResetForgetsEarlierRead(t *testing.T) {
	now := metav1.Now()
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"gone": "x"}, DeletionTimestamp: &now},
	}
	reset(svc)
	if svc.Annotations != nil || svc.DeletionTimestamp != nil || svc.Name != "" {
		t.Errorf("after reset: %+v", svc.ObjectMeta)
	}
	if gvk := svc.GroupVersionKind(); gvk != (schema.GroupVersionKind{Version: "v1", Kind: "Service"}) {
		t.Errorf("kind %v, want v1 Service", gvk)
	}

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Kind: "SecurityPolicy"})
	u.SetName("p")
	reset(u)
	if u.GetKind() != "SecurityPolicy" || u.GetName() != "p" {
		t.Errorf("Unstructured after reset: %v", u.Object)
	}
}

// TestIngress: status addresses to and from IPs; none is nil (an empty status).
func TestIngress(t *testing.T) {
	if got := Ingress(); got != nil {
		t.Errorf("Ingress() = %v, want nil", got)
	}
	if got := IngressIPs(Ingress("192.0.2.1", "fd00::1")); !slices.Equal(got, []string{"192.0.2.1", "fd00::1"}) {
		t.Errorf("IngressIPs = %v", got)
	}
}
