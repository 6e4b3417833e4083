package testenv

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"kubelb.dev/kubelb/internal/testsupport"
)

// StartManager runs a controller-runtime manager (no metrics or probe servers, no leader
// election unless an option turns it on) with the controllers setup adds, until the test
// ends, and returns it. Options may change the manager's options before it is made.
func StartManager(t TB, cfg *rest.Config, setup func(ctrl.Manager) error, opts ...func(*ctrl.Options)) ctrl.Manager {
	t.Helper()
	mgr := NewManager(t, cfg, opts...)
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("manager: %v", err)
		}
	})
	return mgr
}

// NewManager makes a controller-runtime manager for a test (no metrics or probe servers, no
// leader election unless an option turns it on, any controller name), not started.
func NewManager(t TB, cfg *rest.Config, opts ...func(*ctrl.Options)) ctrl.Manager {
	t.Helper()
	o := ctrl.Options{
		Scheme:                 Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	for _, opt := range opts {
		opt(&o)
	}
	mgr, err := ctrl.NewManager(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// controllerStats are controller-runtime's metrics of one controller.
type controllerStats struct{ reconciles, depth, active float64 }

func statsOf(controller string) (controllerStats, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return controllerStats{}, err
	}
	var s controllerStats
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if label(m, "controller") != controller {
				continue
			}
			switch f.GetName() {
			case "controller_runtime_reconcile_total":
				s.reconciles += m.GetCounter().GetValue()
			case "workqueue_depth":
				s.depth += m.GetGauge().GetValue()
			case "controller_runtime_active_workers":
				s.active += m.GetGauge().GetValue()
			}
		}
	}
	return s, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// WaitControllerIdle waits until an in-process controller has at least min reconciles and
// nothing running, with its metrics unchanged for half a second, and returns its reconcile
// count. The queue depth is not trusted to be zero: workqueue_depth is one process-wide gauge
// per controller name, and a manager stopped with items still queued leaves its depth in it
// for the next manager with a controller of that name. A queued item of this manager shows
// within the quiet period instead, as a running worker or one more reconcile.
func WaitControllerIdle(t TB, controller string, min float64) float64 {
	t.Helper()
	const quietPolls = 5 // × Eventually's 100 ms
	var last controllerStats
	same := 0
	testsupport.Eventually(t, 30*time.Second, controller+" to be idle", func() error {
		s, err := statsOf(controller)
		if err != nil {
			return err
		}
		if s == last {
			same++
		} else {
			same = 0
		}
		last = s
		if s.reconciles < min || s.active != 0 || same < quietPolls {
			return fmt.Errorf("%+v, unchanged for %d polls", s, same)
		}
		return nil
	})
	return last.reconciles
}

// RunManager starts mgr (already set up) until the returned stop is called or the test ends.
// stop cancels it and waits up to timeout: an error it stopped with, or not stopping in time,
// fails the test under the name what. stop may be called more than once, from any goroutine.
// A manager still running halfway through the wait has the stacks of kubelb's and
// controller-runtime's goroutines logged, so a shutdown that hangs shows what it waits for.
func RunManager(t testing.TB, mgr ctrl.Manager, what string, timeout time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			half := time.NewTimer(timeout / 2)
			defer half.Stop()
			deadline := time.NewTimer(timeout)
			defer deadline.Stop()
			for {
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("%s stopped with error: %v", what, err)
					}
					return
				case <-half.C:
					t.Logf("%s still stopping after %s; its goroutines:\n%s", what, timeout/2, Goroutines("kubelb.dev/", "sigs.k8s.io/controller-runtime"))
				case <-deadline.C:
					t.Errorf("%s did not stop within %s", what, timeout)
					return
				}
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Goroutines returns the stacks of the running goroutines that have a frame containing one
// of the substrings, at most 64 KiB of them.
func Goroutines(substrings ...string) string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out strings.Builder
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, s := range substrings {
			if strings.Contains(g, s) {
				out.WriteString(g)
				out.WriteString("\n\n")
				break
			}
		}
		if out.Len() > 64<<10 {
			out.WriteString("(more left out)\n")
			break
		}
	}
	return out.String()
}
