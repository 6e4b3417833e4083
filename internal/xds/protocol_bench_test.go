package xds

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// protocolBenchLBsEnv sets the number of LoadBalancers of BenchmarkProtocolOneChange
// (default 10 000), e.g. 1000 for a quick run.
const protocolBenchLBsEnv = "KUBELB_PROTOCOL_BENCH_LBS"

// protocolBenchListenerIP is where the benchmark's Envoy binds its listeners: a loopback
// address of its own, so its thousands of ports collide with no other test's.
const protocolBenchListenerIP = "127.0.86.1"

// BenchmarkProtocolOneChange serves a tenant of 10 000 single-port LoadBalancers with 3
// endpoints each to a connected real Envoy, over delta and over state of the world, then
// changes one LoadBalancer's endpoints (its NodePort, back and forth) and, separately, adds
// one LoadBalancer. Per change it reports the time SetTenant takes (building the snapshot of
// the whole tenant), the time from SetTenant's return until Envoy ACKed the change (the
// endpoints, or the listener of the new LoadBalancer: Envoy ACKs what it applied), and the
// bytes the server sent for it (gRPC wire length of every message, from a stats handler).
// The figures are in docs/performance.md.
func BenchmarkProtocolOneChange(b *testing.B) {
	n := benchSize(b, protocolBenchLBsEnv, 10000, 1, 20000)
	for _, p := range []bootstrap.Protocol{bootstrap.ProtocolDelta, bootstrap.ProtocolSotW} {
		b.Run("protocol="+string(p), func(b *testing.B) {
			f := newProtocolFixture(b, p, n)
			b.Run("change=endpoints", func(b *testing.B) {
				lb := f.in.LoadBalancers[n/2].DeepCopy()
				nodePorts := [2]int32{lb.Spec.Endpoints[0].Ports[0].Port, lb.Spec.Endpoints[0].Ports[0].Port + 1}
				i := 0
				f.measure(b, resource.EndpointType, func() {
					i++
					f.in.LoadBalancers[n/2].Spec.Endpoints[0].Ports[0].Port = nodePorts[i%2]
				})
			})
			b.Run("change=add", func(b *testing.B) {
				f.measure(b, resource.ListenerType, func() {
					k := len(f.in.LoadBalancers)
					f.in.LoadBalancers = append(f.in.LoadBalancers, benchLB(k))
				})
			})
		})
	}
}

// benchLB is LoadBalancer i of the benchmark's tenant: one TCP port, its NodePort on the 3
// tenant nodes, a listener port of its own. Its health check is off: 30 000 checked
// endpoints would open more sockets than this machine lets a process have (20 000).
func benchLB(i int) v1alpha1.LoadBalancer {
	return newLB(fmt.Sprintf("lb-%05d", i)).annotate(v1alpha1.AnnotationHealthCheckDisable, "true").
		port(corev1.ProtocolTCP, 80, 30000+i%2000, 20000+i).LoadBalancer
}

// protocolFixture is a tenant served to one real Envoy, with what the server sent and what
// Envoy ACKed.
type protocolFixture struct {
	srv    *Server
	envoy  *testsupport.Envoy
	tenant string
	in     translate.Input
	wire   atomic.Int64 // bytes the server sent (gRPC wire length)
	// requests and responses on the stream
	requests, responses atomic.Int64

	mu      sync.Mutex
	changed *sync.Cond
	acked   map[string]string // type URL → version Envoy ACKed last
	version map[string]string // delta: nonce → system version of the response
}

func newProtocolFixture(b *testing.B, protocol bootstrap.Protocol, n int) *protocolFixture {
	b.Helper()
	f := &protocolFixture{tenant: "tenant-bench-" + string(protocol), acked: map[string]string{}, version: map[string]string{}}
	f.changed = sync.NewCond(&f.mu)
	f.in = translate.Input{Tenant: f.tenant, Addresses: addresses("127.0.0.1", "127.0.0.2", "127.0.0.3"), Policy: loopbackAllowed,
		Options: translate.Options{ListenerAddress: protocolBenchListenerIP}}
	for i := range n {
		f.in.LoadBalancers = append(f.in.LoadBalancers, benchLB(i))
	}
	f.srv = NewServer(logr.Discard(), xdstest.New(b).ServerTLS())
	f.srv.grpcOptions = []grpc.ServerOption{grpc.StatsHandler(wireCounter{&f.wire})}
	f.watchACKs()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ctx, lis) }()
	b.Cleanup(func() { cancel(); <-done })

	start := time.Now()
	f.set(b)
	boot := xdstest.New(b).Bootstrap(b, bootstrap.Options{Tenant: f.tenant, XDSAddress: lis.Addr().String(), AdminAddress: "127.0.0.1:0", Protocol: protocol})
	f.envoy = testsupport.StartEnvoy(b, "bench-"+string(protocol), boot, testsupport.EnvoyOptions{Node: "bench-proxy", Concurrency: 1, LogLevel: "warning"})
	f.waitACK(b, resource.ListenerType, f.srv.TypeVersion(f.tenant, resource.ListenerType), 10*time.Minute)
	b.Logf("%s: %d LoadBalancers applied by Envoy %s after the first snapshot, %d bytes sent; %d requests, %d responses", protocol, n,
		time.Since(start).Round(time.Millisecond), f.wire.Load(), f.requests.Load(), f.responses.Load())
	return f
}

// watchACKs wraps the server's request callbacks to record the versions Envoy ACKs.
func (f *protocolFixture) watchACKs() {
	cb := f.srv.cb
	sotw, delta, deltaResp, sotwResp := cb.StreamRequestFunc, cb.StreamDeltaRequestFunc, cb.StreamDeltaResponseFunc, cb.StreamResponseFunc
	cb.StreamResponseFunc = func(ctx context.Context, id int64, req *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
		f.responses.Add(1)
		sotwResp(ctx, id, req, resp)
	}
	cb.StreamRequestFunc = func(id int64, req *discoveryv3.DiscoveryRequest) error {
		f.requests.Add(1)
		if req.GetErrorDetail() == nil && req.GetResponseNonce() != "" {
			f.ack(req.GetTypeUrl(), req.GetVersionInfo())
		}
		return sotw(id, req)
	}
	cb.StreamDeltaResponseFunc = func(id int64, req *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
		f.responses.Add(1)
		f.mu.Lock()
		f.version[resp.GetTypeUrl()+"/"+resp.GetNonce()] = resp.GetSystemVersionInfo()
		f.mu.Unlock()
		deltaResp(id, req, resp)
	}
	cb.StreamDeltaRequestFunc = func(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
		f.requests.Add(1)
		if req.GetErrorDetail() == nil && req.GetResponseNonce() != "" {
			f.mu.Lock()
			v := f.version[req.GetTypeUrl()+"/"+req.GetResponseNonce()]
			f.mu.Unlock()
			f.ack(req.GetTypeUrl(), v)
		}
		return delta(id, req)
	}
}

func (f *protocolFixture) ack(typeURL, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked[typeURL] = version
	f.changed.Broadcast()
}

// waitACK waits until Envoy ACKed version of the type.
func (f *protocolFixture) waitACK(b *testing.B, typeURL, version string, timeout time.Duration) {
	b.Helper()
	// Wake up now and then to see whether Envoy exited or the time is up.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				f.mu.Lock()
				f.changed.Broadcast()
				f.mu.Unlock()
			}
		}
	}()
	start := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.acked[typeURL] != version {
		if f.envoy != nil && f.envoy.Exited() {
			var critical []string
			for _, l := range strings.Split(f.envoy.Output(), "\n") {
				if strings.Contains(l, "critical") || strings.Contains(l, "error") {
					critical = append(critical, l[:min(len(l), 300)])
				}
			}
			b.Fatalf("Envoy exited:\n%s", strings.Join(critical[:min(len(critical), 20)], "\n"))
		}
		if time.Since(start) > timeout {
			b.Fatalf("Envoy did not ACK %s version %s within %s (last ACKed %q)", typeURL, version, timeout, f.acked[typeURL])
		}
		f.changed.Wait()
	}
}

// set translates the tenant and sets its snapshot.
func (f *protocolFixture) set(b *testing.B) {
	b.Helper()
	_, problems, out, err := translatetest.Pipeline(f.in)
	if err != nil || len(problems) > 0 {
		b.Fatalf("translating: %v %v", err, problems)
	}
	if changed, err := f.srv.SetTenant(context.Background(), f.tenant, out); err != nil || !changed {
		b.Fatalf("SetTenant = %v, %v", changed, err)
	}
}

// measure applies change, sets the snapshot and waits for Envoy's ACK of the type, per
// iteration; translation is not counted.
func (f *protocolFixture) measure(b *testing.B, typeURL string, change func()) {
	var setTime, ackTime time.Duration
	var bytes int64
	ops := 0
	for b.Loop() {
		b.StopTimer()
		change()
		_, problems, out, err := translatetest.Pipeline(f.in)
		if err != nil || len(problems) > 0 {
			b.Fatalf("translating: %v %v", err, problems)
		}
		b.StartTimer()
		wire := f.wire.Load()
		start := time.Now()
		if changed, err := f.srv.SetTenant(context.Background(), f.tenant, out); err != nil || !changed {
			b.Fatalf("SetTenant = %v, %v", changed, err)
		}
		set := time.Now()
		f.waitACK(b, typeURL, f.srv.TypeVersion(f.tenant, typeURL), time.Minute)
		setTime += set.Sub(start)
		ackTime += time.Since(set)
		bytes += f.wire.Load() - wire
		ops++
	}
	b.ReportMetric(float64(setTime.Milliseconds())/float64(ops), "SetTenant-ms/op")
	b.ReportMetric(float64(ackTime.Milliseconds())/float64(ops), "to-ACK-ms/op")
	b.ReportMetric(float64(bytes)/float64(ops), "wire-bytes/op")
}

// wireCounter is a gRPC stats handler that adds up the wire length of every message sent.
type wireCounter struct{ n *atomic.Int64 }

func (w wireCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (w wireCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	if out, ok := s.(*stats.OutPayload); ok {
		w.n.Add(int64(out.WireLength))
	}
}
func (w wireCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (w wireCounter) HandleConn(context.Context, stats.ConnStats)                       {}

// benchSize is the size a benchmark runs at: the environment variable env, from lo to hi, or
// def when it is unset.
func benchSize(b *testing.B, env string, def, lo, hi int) int {
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		b.Fatalf("%s=%q: want %d to %d", env, v, lo, hi)
	}
	return n
}
