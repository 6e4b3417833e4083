package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncSecretStatus reports the hub Secret made from a SyncSecret.
type SyncSecretStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Phase string `json:"phase,omitempty"`
	// Conditions of the SyncSecret. Synced: whether the hub Secret is made from it. True
	// reason: Synced. False reasons: InvalidSyncSecret (it cannot become a Secret: labels,
	// keys, size, TLS keys), SecretConflict (a Secret of that name exists and was not made for
	// it), SecretRejected (the hub's API server refused the Secret).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SyncSecret mirrors a tenant Secret into the hub, where the manager turns it into a Secret.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=klsync,categories=kubelb
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SyncSecret struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Immutable *bool `json:"immutable,omitempty"`
	// +optional
	// Data of the Secret; at most 1024 keys.
	// +kubebuilder:validation:MaxProperties=1024
	Data map[string][]byte `json:"data,omitempty"`
	// +optional
	// StringData of the Secret; at most 1024 keys.
	// +kubebuilder:validation:MaxProperties=1024
	StringData map[string]string `json:"stringData,omitempty"`
	// +optional
	Type corev1.SecretType `json:"type,omitempty"`

	// +optional
	Status SyncSecretStatus `json:"status,omitempty"`
}

// SyncSecretList is a list of SyncSecrets.
// +kubebuilder:object:root=true
type SyncSecretList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SyncSecret `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SyncSecret{}, &SyncSecretList{})
}
