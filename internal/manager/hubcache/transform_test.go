package hubcache

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// TestTransformSyncSecret: the cached SyncSecret keeps what the controller ranks and
// reconciles by (name, labels of kubelb's contract, managedFields) and the size of its
// data, not the data, other labels or annotations — even an annotation the tenant set to
// lie about the size.
func TestTransformSyncSecret(t *testing.T) {
	ss := &kubelbv1alpha1.SyncSecret{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{
			kubelbv1alpha1.LabelOriginName: "o", "padding": "xxxxxxxx",
		}, Annotations: map[string]string{AnnotationCachedDataBytes: "1", corev1.LastAppliedConfigAnnotation: "{...}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "tenant"}, {Manager: "kubelb-syncsecret", Subresource: "status"}}},
		Data:       map[string][]byte{"a": []byte("1234"), "b": []byte("56")},
		StringData: map[string]string{"b": "789"},
	}
	if got := SyncSecretDataBytes(ss); got != 1+4+1+3 {
		t.Fatalf("SyncSecretDataBytes = %d, want 9 (stringData wins)", got)
	}
	out, err := TransformSyncSecret(ss)
	if err != nil {
		t.Fatal(err)
	}
	c := out.(*kubelbv1alpha1.SyncSecret)
	if c.Data != nil || c.StringData != nil || len(c.Annotations) != 1 || c.Annotations[AnnotationCachedDataBytes] != "9" ||
		len(c.Labels) != 1 || c.Labels[kubelbv1alpha1.LabelOriginName] != "o" || len(c.ManagedFields) != 2 {
		t.Errorf("cached %+v", c)
	}
	if got := SyncSecretDataBytes(c); got != 9 {
		t.Errorf("SyncSecretDataBytes of the cached one = %d, want 9", got)
	}
}

// TestTransformTenantObject: a LoadBalancer is cached without kubectl's last-applied copy,
// and without its managedFields when they hold only applies of kubelb's current field owners
// (the ccm's spec, the status writer's status); its other annotations (propagated to hub
// objects) stay, and so does the whole list when any entry is one a reader looks for: an
// update (an earlier version's, which ssa.ApplyStatus hands over) or another manager's apply
// (a former status owner, which the status writer releases).
func TestTransformTenantObject(t *testing.T) {
	apply := func(manager, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Subresource: sub,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}
	}
	current := []metav1.ManagedFieldsEntry{apply("kubelb-ccm", ""), apply("kubelb-status", "status")}
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		kept    bool
	}{
		{"only current owners' applies", current, false},
		{"an earlier version's update of the status", append(slices.Clone(current),
			metav1.ManagedFieldsEntry{Manager: "kubelb", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}), true},
		{"a former status owner's apply", append(slices.Clone(current), apply("kubelb-loadbalancer", "status")), true},
		{"a KubeLB CE ccm's update", []metav1.ManagedFieldsEntry{{Manager: "kubelb-ccm", Operation: metav1.ManagedFieldsOperationUpdate}}, true},
		{"someone else's apply", append(slices.Clone(current), apply("kubectl", "")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: "web",
				Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: "{...}", "example.com/keep": "1"},
				ManagedFields: slices.Clone(tc.entries)}}
			out, err := TransformTenantObject(lb)
			if err != nil {
				t.Fatal(err)
			}
			c := out.(*kubelbv1alpha1.LoadBalancer)
			if len(c.Annotations) != 1 || c.Annotations["example.com/keep"] != "1" {
				t.Errorf("annotations %v", c.Annotations)
			}
			if tc.kept && !reflect.DeepEqual(c.ManagedFields, tc.entries) {
				t.Errorf("managedFields %+v, want all of %+v", c.ManagedFields, tc.entries)
			}
			if !tc.kept && c.ManagedFields != nil {
				t.Errorf("managedFields %+v, want none", c.ManagedFields)
			}
		})
	}
	if _, err := TransformTenantObject("not an object"); err != nil {
		t.Errorf("a non-object: %v", err)
	}
}
