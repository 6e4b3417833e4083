package envoydrain

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/testsupport"
)

var socketSeq atomic.Int64

// startManager runs a shutdown manager on a free loopback port and an abstract control
// socket of its own; it is stopped when the test ends.
// The channel is closed when Serve returned, with its error in *served.
func startManager(t *testing.T, o ManagerOptions) (m *Manager, stop context.CancelFunc, finished <-chan struct{}, served *error) {
	t.Helper()
	o.WaitAddress = "127.0.0.1:0"
	o.ControlSocket = fmt.Sprintf("@kubelb-envoydrain-test-%d-%d", time.Now().UnixNano(), socketSeq.Add(1))
	m, err := Listen(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	served = new(error)
	go func() {
		defer close(done)
		*served = m.Serve(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the shutdown manager did not stop within 10s")
		}
	})
	return m, cancel, done, served
}

// waiter is a GET of DrainedPath running in the background, as the kubelet's preStop hook.
type waiter struct {
	done   chan struct{}
	status int
	body   string
	err    error
	at     time.Time // when the answer came
}

func startWaiter(m *Manager) *waiter {
	w := &waiter{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		client := &http.Client{Timeout: 30 * time.Second}
		resp, err := client.Get("http://" + m.WaitAddr().String() + DrainedPath)
		if err != nil {
			w.err = err
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		w.status, w.body, w.err, w.at = resp.StatusCode, strings.TrimSpace(string(b)), err, time.Now()
	}()
	return w
}

func (w *waiter) answered() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// wait waits for the answer.
func (w *waiter) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(timeout):
		t.Fatalf("no answer to GET %s within %s", DrainedPath, timeout)
	}
}

// waiting waits until n requests to DrainedPath are waiting.
func waiting(t *testing.T, m *Manager, n int) {
	t.Helper()
	testsupport.Eventually(t, 5*time.Second, fmt.Sprintf("%d requests to wait", n), func() error {
		if got := len(m.waiters); got != n {
			return fmt.Errorf("%d waiting", got)
		}
		return nil
	})
}

// TestManagerHoldsEnvoyUntilDrained: the Envoy container's hook (GET /drained), sent before
// the sidecar's hook starts the drain, is answered only when the drain ended; two drain
// requests share one drain.
func TestManagerHoldsEnvoyUntilDrained(t *testing.T) {
	t.Parallel()
	admin := newFakeAdmin(t, func(n int) int64 { return int64(max(5-n, 0)) })
	m, _, _, _ := startManager(t, ManagerOptions{Drain: Options{AdminAddress: admin.addr(), MinDuration: 300 * time.Millisecond, Timeout: 5 * time.Second, PollInterval: 50 * time.Millisecond}})

	envoyHook := startWaiter(m)
	waiting(t, m, 1)
	if envoyHook.answered() {
		t.Fatalf("GET %s answered before any drain: %d %q %v", DrainedPath, envoyHook.status, envoyHook.body, envoyHook.err)
	}
	answers := make(chan error, 2)
	start := time.Now()
	for range 2 {
		go func() {
			answer, err := RequestDrain(context.Background(), m.o.ControlSocket)
			if err == nil && !strings.HasPrefix(answer, "drained: ") {
				err = fmt.Errorf("answer %q", answer)
			}
			answers <- err
		}()
	}
	for range 2 {
		if err := <-answers; err != nil {
			t.Error(err)
		}
	}
	drained := time.Since(start)
	envoyHook.wait(t, 5*time.Second)
	if envoyHook.err != nil || envoyHook.status != http.StatusOK || !strings.HasPrefix(envoyHook.body, "drained: ") {
		t.Errorf("GET %s: %d %q %v", DrainedPath, envoyHook.status, envoyHook.body, envoyHook.err)
	}
	_, drains, counts := admin.snapshot()
	if len(drains) != 1 || len(counts) != 6 {
		t.Fatalf("%d drain requests and %d counts, want 1 and 6", len(drains), len(counts))
	}
	if envoyHook.at.Before(counts[5]) {
		t.Errorf("GET %s answered before the count that found no connection", DrainedPath)
	}
	if drained < 300*time.Millisecond+5*50*time.Millisecond {
		t.Errorf("the drain ended after %s, before the connections closed", drained)
	}
	// A hook sent after the drain ended is answered at once.
	late := startWaiter(m)
	late.wait(t, 2*time.Second)
	if late.status != http.StatusOK {
		t.Errorf("late GET %s: %d %q %v", DrainedPath, late.status, late.body, late.err)
	}
}

func TestManagerAnswersWithoutDrain(t *testing.T) {
	t.Parallel()
	t.Run("no drain starts", func(t *testing.T) {
		t.Parallel()
		admin := newFakeAdmin(t, nil)
		m, _, _, _ := startManager(t, ManagerOptions{StartWait: 300 * time.Millisecond, Drain: Options{AdminAddress: admin.addr()}})
		start := time.Now()
		w := startWaiter(m)
		w.wait(t, 5*time.Second)
		if w.status != http.StatusServiceUnavailable || !strings.Contains(w.body, "no drain started within 300ms") || time.Since(start) < 300*time.Millisecond {
			t.Errorf("GET %s after %s: %d %q %v", DrainedPath, time.Since(start), w.status, w.body, w.err)
		}
		if _, drains, _ := admin.snapshot(); len(drains) != 0 {
			t.Errorf("GET %s started a drain", DrainedPath)
		}
	})
	t.Run("too many waiting", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := startManager(t, ManagerOptions{MaxWaiters: 1, StartWait: 5 * time.Second, Drain: Options{AdminAddress: newFakeAdmin(t, nil).addr()}})
		first := startWaiter(m)
		waiting(t, m, 1)
		second := startWaiter(m)
		second.wait(t, 2*time.Second)
		if second.status != http.StatusServiceUnavailable || first.answered() {
			t.Errorf("second GET %s: %d %q; first answered %t", DrainedPath, second.status, second.body, first.answered())
		}
	})
	t.Run("Envoy unreachable", func(t *testing.T) {
		t.Parallel()
		m, _, _, _ := startManager(t, ManagerOptions{Drain: Options{AdminAddress: testsupport.Loopback(testsupport.FreePort(t)), Timeout: time.Minute}})
		w := startWaiter(m)
		answer, err := RequestDrain(context.Background(), m.o.ControlSocket)
		if err == nil || !strings.Contains(err.Error(), "502 Bad Gateway") || !strings.Contains(answer, "to drain its listeners") {
			t.Errorf("drain: %q %v, want a 502", answer, err)
		}
		w.wait(t, 2*time.Second)
		if w.status != http.StatusBadGateway {
			t.Errorf("GET %s: %d %q %v, want 502 (nothing left to drain)", DrainedPath, w.status, w.body, w.err)
		}
	})
	t.Run("stopped during the drain", func(t *testing.T) {
		t.Parallel()
		admin := newFakeAdmin(t, func(int) int64 { return 1 })
		m, stop, finished, served := startManager(t, ManagerOptions{Drain: Options{AdminAddress: admin.addr(), Timeout: time.Minute, PollInterval: 20 * time.Millisecond}})
		w := startWaiter(m)
		go func() { _, _ = RequestDrain(context.Background(), m.o.ControlSocket) }()
		testsupport.Eventually(t, 5*time.Second, "the drain to count connections", func() error {
			if _, _, counts := admin.snapshot(); len(counts) == 0 {
				return fmt.Errorf("no count yet")
			}
			return nil
		})
		stop()
		w.wait(t, 5*time.Second)
		if w.status != http.StatusServiceUnavailable {
			t.Errorf("GET %s: %d %q %v, want 503", DrainedPath, w.status, w.body, w.err)
		}
		select {
		case <-finished:
			if *served != nil {
				t.Errorf("Serve: %v", *served)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return within 10s of its context ending")
		}
	})
}
