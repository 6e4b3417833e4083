package hubnames

// The field owners under which kubelb applies what it writes into a tenant's hub namespace
// (server-side apply): the ccm (the specs it mirrors), the manager's status writer (the
// status of LoadBalancers and Routes) and its SyncSecret controller. An object's managed
// fields name them; the manager's cache keeps only theirs (hubcache.CurrentFieldOwners).
const (
	FieldOwnerCCM        = "kubelb-ccm"
	FieldOwnerStatus     = "kubelb-status"
	FieldOwnerSyncSecret = "kubelb-syncsecret"
)

// TenantStateName is the name of the one TenantState of a tenant's namespace: the manager
// writes what it knows of the tenant there (Envoy rejections, verdicts) and the ccm and
// kubectl kubelb read it.
const TenantStateName = "default"
