package settings

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// Read gets Config "default" from the manager's namespace and Tenant tenantName; either is
// nil when it does not exist. It is the one place the controllers read them.
func Read(ctx context.Context, c client.Reader, managerNamespace, tenantName string) (*kubelbv1alpha1.Config, *kubelbv1alpha1.Tenant, error) {
	config := &kubelbv1alpha1.Config{}
	key := client.ObjectKey{Namespace: managerNamespace, Name: kubelbv1alpha1.DefaultConfigName}
	if err := c.Get(ctx, key, config); apierrors.IsNotFound(err) {
		config = nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("getting Config %s: %w", key, err)
	}
	tenant := &kubelbv1alpha1.Tenant{}
	if err := c.Get(ctx, client.ObjectKey{Name: tenantName}, tenant); apierrors.IsNotFound(err) {
		tenant = nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("getting Tenant %s: %w", tenantName, err)
	}
	return config, tenant, nil
}

// Load reads Config "default" (absent: the defaults) and Tenant tenantName (absent: none)
// and resolves the tenant's effective settings.
func Load(ctx context.Context, c client.Reader, managerNamespace, tenantName string) (Tenant, error) {
	config, tenant, err := Read(ctx, c, managerNamespace, tenantName)
	if err != nil {
		return Tenant{}, err
	}
	return Resolve(config, tenant), nil
}

// Reader reads tenants' settings with Load from Client, for a manager running in
// ManagerNamespace. Its methods, taking a tenant's name, are what the hub's address providers
// ask (ipam.HubOptions, nodeip.HubOptions), which do not link this package: the ccm links
// those providers, and this package links the hub's translation.
type Reader struct {
	Client           client.Reader
	ManagerNamespace string
}

// AddressPool is the tenant's AddressPool (Tenant.AddressPool; "" is the default pool).
func (r Reader) AddressPool(ctx context.Context, tenant string) (string, error) {
	t, err := Load(ctx, r.Client, r.ManagerNamespace, tenant)
	return t.AddressPool, err
}

// NodeSet is the tenant's node set (Tenant.NodeSet; "" is the default set).
func (r Reader) NodeSet(ctx context.Context, tenant string) (string, error) {
	t, err := Load(ctx, r.Client, r.ManagerNamespace, tenant)
	return t.NodeSet, err
}
