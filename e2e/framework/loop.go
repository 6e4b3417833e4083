package framework

import (
	"context"
	"fmt"
	"sync"
	"time"

	"kubelb.dev/kubelb/internal/testenv"
)

// PlayInterval is how often the played controllers (kubelet, kube-proxy, load balancer,
// namespace controller) look at the cluster.
const PlayInterval = 200 * time.Millisecond

// Every runs pass at once and then every interval, until it returns true or the test ends; the
// test's cleanup stops the loop and waits for it. Cleanups a player registers before calling
// Every run after the loop has stopped.
func Every(t testenv.TB, interval time.Duration, pass func(ctx context.Context) (done bool)) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		for ctx.Err() == nil && !pass(ctx) {
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
}

// onceLogger logs each distinct message once: a played controller retries every pass, and a
// lasting error is said once.
type onceLogger struct {
	t    testenv.TB
	mu   sync.Mutex
	said map[string]bool
}

func newOnceLogger(t testenv.TB) *onceLogger { return &onceLogger{t: t, said: map[string]bool{}} }

func (l *onceLogger) Logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.said[msg] {
		l.said[msg] = true
		l.t.Logf("%s", msg)
	}
}
