package hubnames

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEnvoySelector(t *testing.T) {
	t.Parallel()
	want := map[string]string{"app.kubernetes.io/name": "envoy", "kubelb.k8c.io/tenant": "a"}
	if diff := cmp.Diff(want, EnvoyPodLabels("tenant-a")); diff != "" {
		t.Error(diff)
	}
}

func TestTenantAndOriginLabels(t *testing.T) {
	t.Parallel()
	if diff := cmp.Diff(map[string]string{"kubelb.k8c.io/managed-by": "kubelb", "kubelb.k8c.io/tenant": "a"}, TenantLabels("a")); diff != "" {
		t.Errorf("TenantLabels (-want +got):\n%s", diff)
	}
	want := map[string]string{
		"kubelb.k8c.io/managed-by": "kubelb", "kubelb.k8c.io/tenant": "a",
		"kubelb.k8c.io/origin-name": "web", "kubelb.k8c.io/origin-ns": "default", "kubelb.k8c.io/origin-resource-kind": "Service",
	}
	if diff := cmp.Diff(want, OriginLabels("tenant-a", "Service", "default", "web")); diff != "" {
		t.Errorf("OriginLabels (-want +got):\n%s", diff)
	}
	delete(want, "kubelb.k8c.io/origin-resource-kind")
	if diff := cmp.Diff(want, OriginLabels("tenant-a", "", "default", "web")); diff != "" {
		t.Errorf("OriginLabels without a kind (-want +got):\n%s", diff)
	}
}

func TestIsManagedAndHasAll(t *testing.T) {
	t.Parallel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: TenantLabels("a")}}
	if !IsManaged(ns) || IsManaged(&corev1.Namespace{}) || IsManaged(nil) {
		t.Error("IsManaged")
	}
	if !HasAll(map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}) || HasAll(map[string]string{"a": "2"}, map[string]string{"a": "1"}) ||
		HasAll(nil, map[string]string{"a": ""}) || !HasAll(nil, nil) {
		t.Error("HasAll")
	}
}
