package status

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
)

// BenchmarkReachabilityOneChange is the leader's reachability pass after one LoadBalancer of
// a tenant of n changed its endpoints (between two sets its proxies both reported on, so
// that its verdict, and nothing else, is the same: no status write), with the tenant's
// snapshot in a real xDS server.
func BenchmarkReachabilityOneChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchmarkReachability(b, n) })
	}
}

func benchmarkReachability(b *testing.B, n int) {
	const tenant = "tenant-bench"
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	addrs := func(i, set int) []string {
		return []string{fmt.Sprintf("10.%d.%d.1:%d", i/250, i%250, 30000+set), fmt.Sprintf("10.%d.%d.2:%d", i/250, i%250, 30000+set)}
	}
	res := xds.Resources{}
	ts := &v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantStateName, Namespace: tenant}}
	report := &Report{Objects: map[ir.ObjectRef]int64{}, Owners: map[string]map[string][]ir.ObjectRef{resource.ClusterType: {}}}
	for i := range n {
		name := fmt.Sprintf("lb-%05d", i)
		res[resource.ClusterType] = append(res[resource.ClusterType], benchCluster(name))
		res[resource.EndpointType] = append(res[resource.EndpointType], benchAssignment(name, addrs(i, 0)))
		ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: tenant, Name: name}
		report.Objects[ref] = 1
		report.Owners[resource.ClusterType][name] = []ir.ObjectRef{ref}
		ts.Status.BackendHealth = append(ts.Status.BackendHealth, v1alpha1.BackendHealth{Cluster: name, Endpoints: reach.EndpointsHash(addrs(i, 0)), Time: metav1.NewTime(now)})
	}
	// The changing LoadBalancer's other set, reported on too.
	ts.Status.BackendHealth = append(ts.Status.BackendHealth, v1alpha1.BackendHealth{Cluster: "lb-00000", Endpoints: reach.EndpointsHash(addrs(0, 1)), Time: metav1.NewTime(now)})
	srv := xds.NewServer(logr.Discard(), nil)
	ctx := context.Background()
	if _, err := srv.SetTenant(ctx, tenant, res); err != nil {
		b.Fatal(err)
	}
	c := cacheReader{Client: fake.NewClientBuilder().WithScheme(process.Scheme()).WithObjects(ts).WithStatusSubresource(ts).Build(), ts: ts}
	w := &Writer{client: c, now: func() time.Time { return now }, sink: NewSink(c), endpoints: srv.ClusterEndpoints}
	st := &tenantState{}
	if _, err := w.reachability(ctx, st, tenant, report); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		res[resource.EndpointType][0] = benchAssignment("lb-00000", addrs(0, (i+1)%2))
		if _, err := srv.SetTenant(ctx, tenant, res); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := w.reachability(ctx, st, tenant, report); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if v := st.reach[ir.ObjectRef{Kind: translate.KindLoadBalancer, Name: "lb-00000"}]; v.Reason != reach.ReasonReachable || len(st.reach) != n {
		b.Fatalf("%d verdicts, the changing one %+v: want %d, Reachable", len(st.reach), v, n)
	}
}

func benchCluster(name string) types.Resource {
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}}
}

func benchAssignment(name string, addrs []string) types.Resource {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
	for _, a := range addrs {
		host, p, _ := net.SplitHostPort(a)
		port, _ := strconv.ParseUint(p, 10, 32)
		cla.Endpoints[0].LbEndpoints = append(cla.Endpoints[0].LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
			Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}}}}}}})
	}
	return cla
}

// cacheReader reads the TenantState as the manager's cache does (a deep copy, or the cached
// object itself with client.UnsafeDisableDeepCopy), not through the fake client's JSON.
type cacheReader struct {
	client.Client
	ts *v1alpha1.TenantState
}

func (c cacheReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ts, ok := obj.(*v1alpha1.TenantState)
	if !ok || key != client.ObjectKeyFromObject(c.ts) {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	o := &client.GetOptions{}
	o.ApplyOptions(opts)
	if o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy {
		*ts = *c.ts
		return nil
	}
	c.ts.DeepCopyInto(ts)
	return nil
}
