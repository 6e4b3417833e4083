package syncsecret

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// LabelSyncSecret is set on every hub Secret made from a SyncSecret; its value is the
// SyncSecret's name (the tenant Secret's UID). With the origin labels it is how the Envoy
// control plane finds a tenant's Secret: label kubelb.k8c.io/origin-ns=<ns>,
// kubelb.k8c.io/origin-name=<name> in the tenant's namespace.
const LabelSyncSecret = "kubelb.k8c.io/syncsecret"

// MaxDataBytes is what a hub Secret may hold (keys and values): the API server's limit of
// 1 MiB for a whole Secret, less room for its metadata.
const MaxDataBytes = 1024*1024 - 16*1024

// SecretName is the name of the hub Secret made from a SyncSecret: the SyncSecret's UID, as
// KubeLB CE names it.
func SecretName(ss *kubelbv1alpha1.SyncSecret) string { return string(ss.UID) }

// Data is the SyncSecret's data merged with its stringData; stringData wins, as the API
// server does for a Secret.
func Data(ss *kubelbv1alpha1.SyncSecret) map[string][]byte {
	if len(ss.Data) == 0 && len(ss.StringData) == 0 {
		return nil
	}
	out := make(map[string][]byte, len(ss.Data)+len(ss.StringData))
	maps.Copy(out, ss.Data)
	for k, v := range ss.StringData {
		out[k] = []byte(v)
	}
	return out
}

// SecretType is the type of the hub Secret: the SyncSecret's, Opaque when it has none.
func SecretType(ss *kubelbv1alpha1.SyncSecret) corev1.SecretType {
	if ss.Type == "" {
		return corev1.SecretTypeOpaque
	}
	return ss.Type
}

// validate returns what a tenant must fix before the SyncSecret can become a Secret ("":
// nothing): the origin labels must name the tenant Secret (the Envoy control plane finds
// Secrets by them), keys must be valid Secret keys, the data must fit in a Secret, the type
// must be kubernetes.io/tls or Opaque (a tenant has no business making other kinds of Secret
// on the hub), and a kubernetes.io/tls Secret needs tls.crt and tls.key.
func validate(ss *kubelbv1alpha1.SyncSecret) string {
	var problems []string
	for _, l := range []string{kubelbv1alpha1.LabelOriginName, kubelbv1alpha1.LabelOriginNamespace} {
		v := ss.Labels[l]
		if v == "" {
			problems = append(problems, fmt.Sprintf("label %s (the tenant Secret's name and namespace, set by the ccm) is missing", l))
			continue
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("label %s: %s", l, strings.Join(errs, "; ")))
		}
	}
	data := Data(ss)
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
		if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("key %q: %s", k, strings.Join(errs, "; ")))
		}
	}
	if size > MaxDataBytes {
		problems = append(problems, fmt.Sprintf("data is %d bytes, more than a Secret holds (%d)", size, MaxDataBytes))
	}
	switch t := SecretType(ss); t {
	case corev1.SecretTypeTLS, corev1.SecretTypeOpaque:
	default:
		problems = append(problems, fmt.Sprintf("type %s is not made into a hub Secret; only %s and %s are", t, corev1.SecretTypeTLS, corev1.SecretTypeOpaque))
	}
	if SecretType(ss) == corev1.SecretTypeTLS {
		for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if _, ok := data[k]; !ok {
				problems = append(problems, fmt.Sprintf("a %s Secret needs key %s", corev1.SecretTypeTLS, k))
			}
		}
	}
	return strings.Join(problems, "; ")
}

// DesiredSecret is the hub Secret of a SyncSecret: in the same namespace, named by the
// SyncSecret's UID, controlled by the SyncSecret (garbage-collected with it), labelled with
// its origin labels, managed-by and LabelSyncSecret, holding Data, SecretType and immutable.
func DesiredSecret(ss *kubelbv1alpha1.SyncSecret) *corev1ac.SecretApplyConfiguration {
	labels := map[string]string{
		kubelbv1alpha1.LabelOriginName:      ss.Labels[kubelbv1alpha1.LabelOriginName],
		kubelbv1alpha1.LabelOriginNamespace: ss.Labels[kubelbv1alpha1.LabelOriginNamespace],
		kubelbv1alpha1.LabelManagedBy:       kubelbv1alpha1.LabelManagedByValue,
		LabelSyncSecret:                     ss.Name,
	}
	s := corev1ac.Secret(SecretName(ss), ss.Namespace).
		WithLabels(labels).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(kubelbv1alpha1.GroupVersion.String()).
			WithKind("SyncSecret").
			WithName(ss.Name).
			WithUID(ss.UID).
			WithController(true).
			WithBlockOwnerDeletion(true)).
		WithType(SecretType(ss))
	if data := Data(ss); data != nil {
		s.WithData(data)
	}
	if ss.Immutable != nil {
		s.WithImmutable(*ss.Immutable)
	}
	return s
}

// ownedBy tells whether the SyncSecret controls a Secret.
func ownedBy(s *corev1.Secret, ss *kubelbv1alpha1.SyncSecret) bool {
	ref := metav1.GetControllerOfNoCopy(s)
	return ref != nil && ref.UID == ss.UID && ref.Kind == "SyncSecret"
}
