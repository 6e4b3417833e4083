package xds

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/translate"
)

// TestClusterEndpointsVersions: the version of a cluster's endpoints moves when a snapshot
// changes them, and only then; its endpoints are those health discovery asks about.
func TestClusterEndpointsVersions(t *testing.T) {
	const tenant = "tenant-versions"
	versions := func(c reach.Clusters) map[string]reach.Version {
		return maps.Collect(c.Versions)
	}
	srv := NewServer(logr.Discard(), nil)
	if got := srv.ClusterEndpoints(tenant).All(); len(got) != 0 {
		t.Fatalf("without a snapshot: %v", got)
	}
	set := func(bNodePort int) reach.Clusters {
		in := translate.Input{Tenant: tenant, Addresses: addresses("10.0.0.1", "10.0.0.2")}
		in.LoadBalancers = append(in.LoadBalancers, newLB("a").port(corev1.ProtocolTCP, 80, 31080, 20001).LoadBalancer,
			newLB("b").port(corev1.ProtocolTCP, 80, bNodePort, 20002).LoadBalancer)
		if _, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, in)); err != nil {
			t.Fatal(err)
		}
		return srv.ClusterEndpoints(tenant)
	}
	before := set(31081)
	v1, all := versions(before), before.All()
	if len(v1) != 2 || len(all) != 2 {
		t.Fatalf("versions %v, endpoints %v: want 2 clusters", v1, all)
	}
	asked := planHealth(srv.healthClusters(tenant), DefaultHealthChecking().Interval).asked
	if !maps.EqualFunc(all, asked, slices.Equal) {
		t.Errorf("endpoints %v, health discovery asks about %v", all, asked)
	}
	after := set(31090)
	v2 := versions(after)
	changed := 0
	for c, v := range v2 {
		if v1[c] != v {
			changed++
			if slices.Equal(after.Endpoints(c), all[c]) {
				t.Errorf("cluster %s: version moved, endpoints %v did not", c, all[c])
			}
		} else if !slices.Equal(after.Endpoints(c), all[c]) {
			t.Errorf("cluster %s: endpoints %v → %v under the same version", c, all[c], after.Endpoints(c))
		}
	}
	if changed != 1 || len(v2) != 2 {
		t.Errorf("%d of %d versions moved, want the one of b", changed, len(v2))
	}
	if !maps.Equal(versions(before), v1) {
		t.Error("a snapshot's versions moved with a later snapshot")
	}
}
