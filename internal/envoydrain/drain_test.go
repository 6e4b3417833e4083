package envoydrain

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/testsupport"
)

// fakeAdmin is an Envoy admin interface: it records the requests and answers /stats with
// the open connections its script gives for each count.
type fakeAdmin struct {
	mu       sync.Mutex
	drainAt  time.Time
	drains   []string // the query of each POST /drain_listeners
	counts   []time.Time
	active   func(n int) int64 // the connections open at the n-th count (from 0)
	refuse   bool              // answer the drain request 503
	vanish   bool              // stop serving after the drain request
	broken   bool              // answer /stats 500
	srv      *httptest.Server
	listener []string // extra /stats lines
}

func newFakeAdmin(t *testing.T, active func(n int) int64) *fakeAdmin {
	t.Helper()
	a := &fakeAdmin{active: active}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAdmin) addr() string { return strings.TrimPrefix(a.srv.URL, "http://") }

func (a *fakeAdmin) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/drain_listeners":
		if a.refuse {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		a.drainAt = time.Now()
		a.drains = append(a.drains, r.URL.RawQuery)
		fmt.Fprintln(w, "OK")
		if a.vanish {
			go a.srv.Close()
		}
	case r.Method == http.MethodGet && r.URL.Path == "/stats":
		if a.broken {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		if want := `^listener\..*\.downstream_cx_active$`; r.URL.Query().Get("filter") != want {
			http.Error(w, "unexpected filter "+r.URL.Query().Get("filter"), http.StatusBadRequest)
			return
		}
		n := int64(0)
		if a.active != nil {
			n = a.active(len(a.counts))
		}
		a.counts = append(a.counts, time.Now())
		// Envoy's answer: the admin listener (this request), the listener-wide gauge and
		// its per-worker copy.
		fmt.Fprintf(w, "listener.admin.downstream_cx_active: 1\nlistener.0.0.0.0_10000.downstream_cx_active: %d\nlistener.0.0.0.0_10000.worker_0.downstream_cx_active: %d\n", n, n)
		for _, l := range a.listener {
			fmt.Fprintln(w, l)
		}
	default:
		http.NotFound(w, r)
	}
}

// snapshot returns the drain requests and when the counts were taken.
func (a *fakeAdmin) snapshot() (time.Time, []string, []time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.drainAt, append([]string(nil), a.drains...), append([]time.Time(nil), a.counts...)
}

func TestDrain(t *testing.T) {
	t.Parallel()
	const minDrain, timeout, poll = 300 * time.Millisecond, 900 * time.Millisecond, 20 * time.Millisecond
	for _, tc := range []struct {
		name    string
		active  func(n int) int64
		broken  bool
		want    Outcome
		counts  int // the counts expected (0: any)
		minTime time.Duration
		maxTime time.Duration
		active0 int64
	}{
		{name: "returns once the connections reach 0", active: func(n int) int64 { return int64(max(3-n, 0)) },
			want: Drained, counts: 4, minTime: minDrain + 3*poll, maxTime: timeout, active0: 0},
		{name: "no connection: still waits the minimum", active: func(int) int64 { return 0 },
			want: Drained, counts: 1, minTime: minDrain, maxTime: minDrain + 500*time.Millisecond, active0: 0},
		{name: "gives up at the timeout", active: func(int) int64 { return 2 },
			want: TimedOut, minTime: timeout, maxTime: timeout + 500*time.Millisecond, active0: 2},
		{name: "counts that fail until the timeout", broken: true,
			want: TimedOut, minTime: timeout, maxTime: timeout + 500*time.Millisecond, active0: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newFakeAdmin(t, tc.active)
			a.broken = tc.broken
			start := time.Now()
			res, err := Drain(context.Background(), Options{AdminAddress: a.addr(), MinDuration: minDrain, Timeout: timeout, PollInterval: poll})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			drainAt, drains, counts := a.snapshot()
			if len(drains) != 1 || drains[0] != "graceful" {
				t.Errorf("drain requests %q, want one POST /drain_listeners?graceful", drains)
			}
			if res.Outcome != tc.want || res.Active != tc.active0 {
				t.Errorf("result %+v, want %s with %d open", res, tc.want, tc.active0)
			}
			if tc.counts > 0 && len(counts) != tc.counts {
				t.Errorf("%d counts, want %d", len(counts), tc.counts)
			}
			if len(counts) > 0 && counts[0].Sub(drainAt) < minDrain {
				t.Errorf("first count %s after the drain request, before the minimum %s", counts[0].Sub(drainAt), minDrain)
			}
			if elapsed < tc.minTime || elapsed > tc.maxTime || res.Elapsed > elapsed {
				t.Errorf("returned after %s (reported %s), want %s to %s", elapsed, res.Elapsed, tc.minTime, tc.maxTime)
			}
			if !strings.HasPrefix(res.String(), string(tc.want)+":") {
				t.Errorf("String() = %q", res.String())
			}
		})
	}
}

func TestDrainErrors(t *testing.T) {
	t.Parallel()
	closedPort := testsupport.Loopback(testsupport.FreePort(t))
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (addr string, ctx context.Context)
		want  string
	}{
		{name: "Envoy unreachable", want: "asking Envoy at " + closedPort + " to drain its listeners",
			setup: func(*testing.T) (string, context.Context) { return closedPort, context.Background() }},
		{name: "drain refused", want: "503 Service Unavailable: no",
			setup: func(t *testing.T) (string, context.Context) {
				a := newFakeAdmin(t, nil)
				a.refuse = true
				return a.addr(), context.Background()
			}},
		{name: "Envoy stops during the drain", want: "stopped answering during the drain",
			setup: func(t *testing.T) (string, context.Context) {
				a := newFakeAdmin(t, nil)
				a.vanish = true // after answering the drain request, before the first count
				return a.addr(), context.Background()
			}},
		{name: "context ended", want: context.DeadlineExceeded.Error(),
			setup: func(t *testing.T) (string, context.Context) {
				a := newFakeAdmin(t, func(int) int64 { return 1 })
				ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
				t.Cleanup(cancel)
				return a.addr(), ctx
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, ctx := tc.setup(t)
			start := time.Now()
			_, err := Drain(ctx, Options{AdminAddress: addr, MinDuration: 200 * time.Millisecond, Timeout: 10 * time.Second, PollInterval: 20 * time.Millisecond})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("returned after %s: it should not wait for the timeout", d)
			}
		})
	}
}

func TestSumActive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		stats string
		want  int64
		err   bool
	}{
		{name: "empty", stats: "", want: 0},
		{name: "admin and workers left out", stats: "listener.admin.downstream_cx_active: 4\nlistener.admin.main_thread.downstream_cx_active: 4\n" +
			"listener.0.0.0.0_10000.downstream_cx_active: 2\nlistener.0.0.0.0_10000.worker_0.downstream_cx_active: 1\nlistener.0.0.0.0_10000.worker_1.downstream_cx_active: 1\n" +
			"listener.[__]_10001.downstream_cx_active: 3\n", want: 5},
		{name: "stat prefix", stats: "listener.envoy-ready.downstream_cx_active: 1\n", want: 1},
		{name: "other stats ignored", stats: "listener.0.0.0.0_10000.downstream_cx_total: 9\nhttp.x.downstream_cx_active: 7\n", want: 0},
		{name: "not a number", stats: "listener.0.0.0.0_10000.downstream_cx_active: many\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := sumActive(tc.stats)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("sumActive = %d, %v; want %d (error %t)", got, err, tc.want, tc.err)
			}
		})
	}
}
