// Package envoydrain drains an Envoy gracefully before it is stopped, without a shell: it
// asks Envoy's admin interface to drain its listeners, waits a minimum time, then until no
// listener has a downstream connection open, at most a timeout. The kubelb binary runs it as
// the shutdown manager, a sidecar container of every Envoy pod of the fleets
// (Manager; "kubelb envoy-shutdown-manager"), so the fleet drains on the official distroless
// Envoy image as well as on the full one.
package envoydrain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// DefaultPollInterval is how often Drain reads Envoy's connection counts once the minimum
// drain time has passed.
const DefaultPollInterval = time.Second

// adminTimeout bounds one request to Envoy's admin interface.
const adminTimeout = 5 * time.Second

// Options configure one drain.
type Options struct {
	// AdminAddress is host:port of Envoy's admin interface (in the pods 127.0.0.1:9901).
	AdminAddress string
	// MinDuration is the least time the drain lasts, so that load balancers in front of
	// Envoy stop sending new connections (Config gracefulShutdown.minDrainDuration).
	MinDuration time.Duration
	// Timeout is the most the drain lasts from the drain request on, whether connections are
	// still open or not (Config gracefulShutdown.drainTimeout; Envoy's --drain-time-s).
	Timeout time.Duration
	// PollInterval is how often the connection counts are read; default DefaultPollInterval.
	PollInterval time.Duration
	// Log receives the drain's progress; the zero Logger discards it.
	Log logr.Logger
}

// Outcome is how a drain ended.
type Outcome string

const (
	// Drained: no listener had a downstream connection open after the minimum time.
	Drained Outcome = "drained"
	// TimedOut: connections were still open (or could not be counted) when the timeout passed.
	TimedOut Outcome = "timeout"
)

// Result is what a drain reports.
type Result struct {
	// Outcome is how it ended.
	Outcome Outcome
	// Active is the number of downstream connections open at the last count (-1 when none
	// could be read).
	Active int64
	// Elapsed is the time from the drain request to the end.
	Elapsed time.Duration
}

// String describes the result in one line.
func (r Result) String() string {
	if r.Outcome == Drained {
		return fmt.Sprintf("drained: no connection open after %s", r.Elapsed.Round(time.Millisecond))
	}
	if r.Active < 0 {
		return fmt.Sprintf("timeout: gave up after %s, the connections could not be counted", r.Elapsed.Round(time.Millisecond))
	}
	return fmt.Sprintf("timeout: gave up after %s with %d connections open", r.Elapsed.Round(time.Millisecond), r.Active)
}

// Drain drains the Envoy behind o.AdminAddress: POST /drain_listeners?graceful (Envoy keeps
// accepting for its --drain-time-s, asking HTTP clients to go away, then closes its
// listeners), then it waits o.MinDuration, then until the listeners' downstream connections
// (the admin interface's own excepted) are 0 or o.Timeout has passed since the request,
// whichever comes first. It returns an error when Envoy refused the drain request or stopped
// answering (then there is nothing left to drain), or when ctx ended.
func Drain(ctx context.Context, o Options) (Result, error) {
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	a := admin{base: "http://" + o.AdminAddress, client: &http.Client{Timeout: adminTimeout}}
	start := time.Now()
	deadline := start.Add(o.Timeout)
	res := Result{Active: -1}
	if err := a.post(ctx, "/drain_listeners?graceful"); err != nil {
		res.Elapsed = time.Since(start)
		return res, fmt.Errorf("asking Envoy at %s to drain its listeners: %w", o.AdminAddress, err)
	}
	o.Log.Info("draining Envoy's listeners", "minDrainDuration", o.MinDuration.String(), "drainTimeout", o.Timeout.String())
	if err := sleep(ctx, min(o.MinDuration, o.Timeout)); err != nil {
		res.Elapsed = time.Since(start)
		return res, err
	}
	for {
		active, err := a.activeConnections(ctx)
		res.Elapsed = time.Since(start)
		switch {
		case err == nil:
			res.Active = active
		case ctx.Err() != nil:
			return res, ctx.Err()
		case errors.Is(err, syscall.ECONNREFUSED):
			return res, fmt.Errorf("Envoy at %s stopped answering during the drain: %w", o.AdminAddress, err)
		default:
			// A count that failed is retried until the timeout: it proves nothing closed.
			res.Active = -1
			o.Log.Error(err, "counting Envoy's connections")
		}
		if err == nil && active == 0 {
			res.Outcome = Drained
			return res, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			res.Outcome = TimedOut
			return res, nil
		}
		if err == nil {
			o.Log.V(1).Info("connections still open", "active", active, "left", left.Round(time.Second).String())
		}
		if err := sleep(ctx, min(o.PollInterval, left)); err != nil {
			return res, err
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// admin is a client of Envoy's admin interface.
type admin struct {
	base   string
	client *http.Client
}

func (a admin) do(ctx context.Context, method, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

func (a admin) post(ctx context.Context, path string) error {
	_, err := a.do(ctx, http.MethodPost, path)
	return err
}

// listenerActive matches the listener-wide gauge of open downstream connections,
// listener.<address or stat prefix>.downstream_cx_active.
var listenerActive = regexp.MustCompile(`^listener\.(.+)\.downstream_cx_active$`)

// handlerStat is the per-handler copy of a listener stat (listener.<address>.worker_<n>.*,
// listener.<address>.main_thread.*), which would count every connection twice.
var handlerStat = regexp.MustCompile(`\.(worker_[0-9]+|main_thread)$`)

// activeConnections sums the downstream connections open on Envoy's listeners; the admin
// listener (whose one connection is this request) is left out.
func (a admin) activeConnections(ctx context.Context) (int64, error) {
	body, err := a.do(ctx, http.MethodGet, "/stats?filter="+url.QueryEscape(`^listener\..*\.downstream_cx_active$`))
	if err != nil {
		return 0, err
	}
	return sumActive(body)
}

// sumActive adds up the listener-wide downstream_cx_active gauges of a /stats text answer.
func sumActive(stats string) (int64, error) {
	var total int64
	for line := range strings.Lines(stats) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		m := listenerActive.FindStringSubmatch(name)
		if m == nil || m[1] == "admin" || strings.HasPrefix(m[1], "admin.") || handlerStat.MatchString(m[1]) {
			continue
		}
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading Envoy's stat %s: %w", name, err)
		}
		total += v
	}
	return total, nil
}
