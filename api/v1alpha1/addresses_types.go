package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddressesSpec lists the addresses of a tenant's Ready nodes.
type AddressesSpec struct {
	// Addresses of the tenant's Ready nodes, sorted and deduplicated. At most 5000, the
	// largest cluster Kubernetes supports.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5000
	// +listType=atomic
	Addresses []EndpointAddress `json:"addresses"`
}

// AddressesStatus is empty; it exists for symmetry with the other kinds.
type AddressesStatus struct{}

// Addresses holds the addresses of a tenant's Ready nodes; one named "default" per tenant.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kladdr,categories=kubelb
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.spec.addresses[*].ip`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Addresses struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AddressesSpec   `json:"spec,omitempty"`
	Status AddressesStatus `json:"status,omitempty"`
}

// AddressesList is a list of Addresses.
// +kubebuilder:object:root=true
type AddressesList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Addresses `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Addresses{}, &AddressesList{})
}
