// Package secrets is the ccm's Secret synchronizer: it mirrors tenant Secrets that the hub
// needs as SyncSecrets in the tenant's namespace of the hub, named by the Secret's UID, in the
// shape KubeLB CE's ccm writes (see /work/shared/fixtures/kubelb-ce/hub-syncsecrets.yaml). A
// Secret is mirrored when a served Ingress names it in spec.tls[].secretName, when a served
// Gateway's listener names it in tls.certificateRefs (a Secret in another namespace only when a
// ReferenceGrant there permits it), when an Envoy Gateway SecurityPolicy of its namespace
// names it in basicAuth.users (then only its key .htpasswd is mirrored) or in
// apiKeyAuth.credentialRefs (then all of it: each key is a client's), or, with the
// synchronizer on, when it is labelled kubelb.k8c.io/managed-by=kubelb. The manager's SyncSecret controller
// (internal/manager/syncsecret) turns the SyncSecret into a hub Secret.
package secrets

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
)

// MaxDataBytes bounds what one Secret may push to the hub: the sum of the lengths of its data
// keys and values. A TLS Secret with a certificate chain and key is a few KiB; the API server's
// own limit for a Secret is 1 MiB.
const MaxDataBytes = 512 * 1024

// Problem reasons of a Secret that is wanted but not mirrored (Warning Events).
const (
	ReasonSecretTooLarge    = "SecretTooLarge"
	ReasonSecretTypeInvalid = "SecretTypeNotSupported"
)

// Check tells why a wanted Secret may not be mirrored ("" reason: it may). Only the types
// kubernetes.io/tls and Opaque are mirrored, and at most MaxDataBytes of data.
func Check(s *corev1.Secret) (reason, message string) {
	switch s.Type {
	case corev1.SecretTypeTLS, corev1.SecretTypeOpaque, "":
	default:
		return ReasonSecretTypeInvalid, fmt.Sprintf("Secret type %s is not mirrored to the management cluster; only %s and %s are", s.Type, corev1.SecretTypeTLS, corev1.SecretTypeOpaque)
	}
	if n := DataSize(s.Data); n > MaxDataBytes {
		return ReasonSecretTooLarge, fmt.Sprintf("Secret data is %d bytes, more than the %d bytes the ccm mirrors to the management cluster; it is not mirrored", n, MaxDataBytes)
	}
	return "", ""
}

// DataSize is the sum of the lengths of the keys and values of data.
func DataSize(data map[string][]byte) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
}

// DesiredSyncSecret is the SyncSecret mirroring s in namespace (the tenant's namespace on the
// hub): named by the Secret's UID, labelled origin-name, origin-ns, managed-by and tenant,
// with the Secret's data (never stringData), type and immutable.
func DesiredSyncSecret(s *corev1.Secret, namespace string) *v1alpha1.SyncSecret {
	typ := s.Type
	if typ == "" {
		typ = corev1.SecretTypeOpaque
	}
	return &v1alpha1.SyncSecret{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "SyncSecret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      string(s.UID),
			Namespace: namespace,
			Labels:    hubnames.OriginLabels(namespace, "", s.Namespace, s.Name),
		},
		Data:      maps.Clone(s.Data),
		Type:      typ,
		Immutable: s.Immutable,
	}
}

// drifted tells whether current (nil: none) differs from desired in what the ccm writes: its
// labels, data, type and immutable. Labels others add are not looked at.
func drifted(current, desired *v1alpha1.SyncSecret) bool {
	if current == nil {
		return true
	}
	for k, v := range desired.Labels {
		if current.Labels[k] != v {
			return true
		}
	}
	return !equality.Semantic.DeepEqual(current.Data, desired.Data) || current.Type != desired.Type ||
		!equality.Semantic.DeepEqual(current.Immutable, desired.Immutable)
}
