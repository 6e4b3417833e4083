package hubcache_test

import (
	"slices"
	"testing"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/manager/syncsecret"
)

// TestCurrentFieldOwners: the cache drops a tenant object's managedFields only when they hold
// nothing but applies of hubcache.CurrentFieldOwners, so the list must name every writer of
// today, and none of the status writer's former owners (whose entries it must still find).
func TestCurrentFieldOwners(t *testing.T) {
	for _, owner := range []string{hubnames.FieldOwnerCCM, hubnames.FieldOwnerCCM, hubnames.FieldOwnerCCM, status.FieldOwner, syncsecret.FieldOwner} {
		if !slices.Contains(hubcache.CurrentFieldOwners, owner) {
			t.Errorf("field owner %q writes tenant objects but is not in CurrentFieldOwners %v", owner, hubcache.CurrentFieldOwners)
		}
	}
	for _, former := range status.FormerFieldOwners {
		if slices.Contains(hubcache.CurrentFieldOwners, former) {
			t.Errorf("former field owner %q is in CurrentFieldOwners: its entries would be dropped before the status writer releases them", former)
		}
	}
}
