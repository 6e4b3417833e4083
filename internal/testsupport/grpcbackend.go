package testsupport

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// StartGRPCBackend serves the standard gRPC health service (grpc.health.v1.Health) on addr,
// the server as a whole (service "") SERVING; each answer carries the backend's names in the header
// metadata x-backend-node and x-backend-pod.
func StartGRPCBackend(t TB, addr string, id Identity) *Backend {
	t.Helper()
	b, l := listen(t, "gRPC", addr, id)
	names := func(ctx context.Context) error {
		b.requests.Add(1)
		return grpc.SetHeader(ctx, metadata.Pairs(strings.ToLower(HeaderNode), b.Node, strings.ToLower(HeaderPod), b.Pod))
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := names(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
	)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	b.stop = func() {
		srv.Stop()
		<-done
	}
	t.Cleanup(b.Close)
	return b
}

// GRPCRoundTrip calls grpc.health.v1.Health/Check for the server as a whole on addr without
// TLS, and returns who answered; anything but SERVING is an error.
func GRPCRoundTrip(addr string) (Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), RoundTripTimeout)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return Reply{}, err
	}
	defer conn.Close()
	var md metadata.MD
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md), grpc.WaitForReady(true))
	if err != nil {
		return Reply{}, err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Reply{}, fmt.Errorf("health of %s: %s", addr, resp.GetStatus())
	}
	first := func(k string) string {
		if v := md.Get(strings.ToLower(k)); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	id := Identity{Node: first(HeaderNode), Pod: first(HeaderPod)}
	if id.Node == "" || id.Pod == "" {
		return Reply{}, fmt.Errorf("no backend names in the header metadata %v", md)
	}
	return Reply{Identity: id, Proto: "HTTP/2.0"}, nil
}

// GRPCWatchHolds opens a grpc.health.v1.Health/Watch stream for the server as a whole on addr
// without TLS, waits for its first answer (SERVING), and then keeps the stream open for hold:
// an error when the stream ends or fails before that (a proxy cut it). The stream is closed
// on return.
func GRPCWatchHolds(addr string, hold time.Duration) error {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, firstCancel := context.WithTimeout(ctx, RoundTripTimeout)
	defer firstCancel()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	got := make(chan error, 1)
	go func() {
		resp, err := stream.Recv()
		if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			err = fmt.Errorf("health of %s: %s", addr, resp.GetStatus())
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			return err
		}
	case <-first.Done():
		return fmt.Errorf("no first answer on the Watch stream through %s within %s", addr, RoundTripTimeout)
	}
	start := time.Now()
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case err := <-ended:
		return fmt.Errorf("the Watch stream through %s ended after %s: %v", addr, time.Since(start).Round(time.Second), err)
	case <-time.After(hold):
		return nil
	}
}
