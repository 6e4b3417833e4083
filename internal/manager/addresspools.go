package manager

// The manager's rights are generated from the +kubebuilder:rbac markers under
// internal/manager only (make generate, the chart's one source). The address pools
// (internal/ipam, --address-provider=ipam) run in the manager, so their rights are declared
// here: the AddressPools and their status, and the status of the hub Services they give
// addresses to (Events are declared by the other controllers already).

// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=addresspools,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=addresspools/status,verbs=update;patch
// +kubebuilder:rbac:groups="",resources=services/status,verbs=get;patch
