package syncsecret

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

func TestDesiredSecret(t *testing.T) {
	ss := &kubelbv1alpha1.SyncSecret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "s-uid", UID: "ss-uid", Labels: map[string]string{
			kubelbv1alpha1.LabelOriginName: "app-tls", kubelbv1alpha1.LabelOriginNamespace: "shop", "other": "x"}},
		Data:       map[string][]byte{"a": []byte("1"), "b": []byte("2")},
		StringData: map[string]string{"b": "two"},
	}
	if msg := validate(ss); msg != "" {
		t.Errorf("valid SyncSecret: %s", msg)
	}
	d := DesiredSecret(ss)
	if *d.Name != "ss-uid" || *d.Namespace != "tenant-a" || *d.Type != corev1.SecretTypeOpaque || d.Immutable != nil {
		t.Errorf("name %s ns %s type %s immutable %v", *d.Name, *d.Namespace, *d.Type, d.Immutable)
	}
	if got := fmt.Sprint(d.Data); got != fmt.Sprint(map[string][]byte{"a": []byte("1"), "b": []byte("two")}) {
		t.Errorf("data %s: stringData must win", got)
	}
	if got := fmt.Sprint(d.Labels); got != "map[kubelb.k8c.io/managed-by:kubelb kubelb.k8c.io/origin-name:app-tls kubelb.k8c.io/origin-ns:shop kubelb.k8c.io/syncsecret:s-uid]" {
		t.Errorf("labels %s", got)
	}
	if len(d.OwnerReferences) != 1 || *d.OwnerReferences[0].UID != "ss-uid" || !*d.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v", d.OwnerReferences)
	}

	for _, tc := range []struct {
		name   string
		change func(*kubelbv1alpha1.SyncSecret)
		want   string
	}{
		{"no origin", func(s *kubelbv1alpha1.SyncSecret) { delete(s.Labels, kubelbv1alpha1.LabelOriginName) }, "origin-name"},
		{"bad key", func(s *kubelbv1alpha1.SyncSecret) { s.Data["a/b"] = nil }, `key "a/b"`},
		{"too large", func(s *kubelbv1alpha1.SyncSecret) { s.Data["big"] = make([]byte, MaxDataBytes) }, "more than a Secret holds"},
		{"tls without key", func(s *kubelbv1alpha1.SyncSecret) { s.Type = corev1.SecretTypeTLS }, "needs key tls.crt"},
		{"service account token", func(s *kubelbv1alpha1.SyncSecret) { s.Type = corev1.SecretTypeServiceAccountToken }, "only kubernetes.io/tls and Opaque"},
	} {
		c := ss.DeepCopy()
		tc.change(c)
		if got := validate(c); !strings.Contains(got, tc.want) {
			t.Errorf("%s: validate = %q, want it to mention %q", tc.name, got, tc.want)
		}
	}
}
