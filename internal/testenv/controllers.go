package testenv

import (
	"context"
	"fmt"
	"sync"
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
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	recordDepthBaseline()
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

// depthBaseline is the workqueue depth each controller name had when the last manager
// started. workqueue_depth is one process-wide gauge per controller name: a manager stopped
// with items still queued leaves its depth in the gauge, and the next manager with a
// controller of that name counts on from there. WaitControllerIdle subtracts it.
var (
	depthMu       sync.Mutex
	depthBaseline = map[string]float64{}
)

// recordDepthBaseline takes the queue depths before a manager starts (its controllers have
// queued nothing yet).
func recordDepthBaseline() {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return
	}
	depthMu.Lock()
	defer depthMu.Unlock()
	for _, f := range families {
		if f.GetName() != "workqueue_depth" {
			continue
		}
		for _, m := range f.GetMetric() {
			depthBaseline[label(m, "controller")] = m.GetGauge().GetValue()
		}
	}
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

// WaitControllerIdle waits until an in-process controller has at least min reconciles,
// nothing queued and nothing running, twice in a row, and returns its reconcile count.
func WaitControllerIdle(t TB, controller string, min float64) float64 {
	t.Helper()
	var last controllerStats
	testsupport.Eventually(t, 30*time.Second, controller+" to be idle", func() error {
		s, err := statsOf(controller)
		if err != nil {
			return err
		}
		depthMu.Lock()
		s.depth -= depthBaseline[controller]
		depthMu.Unlock()
		idle := s.reconciles >= min && s.depth <= 0 && s.active == 0 && s == last
		last = s
		if !idle {
			return fmt.Errorf("%+v", s)
		}
		return nil
	})
	return last.reconciles
}
