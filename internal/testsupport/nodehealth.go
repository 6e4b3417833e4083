package testsupport

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// NodeHealth plays kube-proxy's health endpoint for one Service with externalTrafficPolicy
// Local on one node: GET /healthz on the Service's healthCheckNodePort answers 200 while the
// node has local endpoints of the Service and 503 while it has none, with kube-proxy's JSON
// body ({"service": {...}, "localEndpoints": n}). Any other path is 404.
type NodeHealth struct {
	// Addr is the address it listens on.
	Addr   string
	local  atomic.Int64
	checks atomic.Int64
	srv    *http.Server
}

// StartNodeHealth serves the health endpoint on addr (the node's address and the Service's
// healthCheckNodePort) until the test ends; it starts with localEndpoints local endpoints.
func StartNodeHealth(t TB, addr, service string, localEndpoints int) *NodeHealth {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("node health endpoint on %s: %v", addr, err)
	}
	h := &NodeHealth{Addr: l.Addr().String()}
	h.local.Store(int64(localEndpoints))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		h.checks.Add(1)
		n := h.local.Load()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if n == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"service":        map[string]string{"namespace": "", "name": service},
			"localEndpoints": n,
		})
	})
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: RoundTripTimeout}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := h.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Logf("node health endpoint on %s: %v", h.Addr, err)
		}
	}()
	t.Cleanup(func() {
		_ = h.srv.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Logf("node health endpoint on %s did not stop", h.Addr)
		}
	})
	return h
}

// SetLocalEndpoints sets how many local endpoints the node has: 0 makes /healthz answer 503.
func (h *NodeHealth) SetLocalEndpoints(n int) { h.local.Store(int64(n)) }

// Checks is the number of health checks answered so far.
func (h *NodeHealth) Checks() int64 { return h.checks.Load() }
