package hubnames

import "testing"

func TestTenantNamespaceNames(t *testing.T) {
	t.Parallel()
	if TenantNamespace("a") != "tenant-a" || TenantName("tenant-a") != "a" {
		t.Fatal("tenant namespace naming")
	}
	if TenantName("kube-system") != "kube-system" {
		t.Error("a namespace without the prefix is not its own tenant name")
	}
	if !IsTenantNamespace("tenant-a") || IsTenantNamespace("kube-system") || IsTenantNamespace("tenant") {
		t.Error("IsTenantNamespace")
	}
}
