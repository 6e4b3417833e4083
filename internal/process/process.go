// Package process is the process plumbing both binaries share: flag parsing with one-line
// errors (--help by topic, --version, Main), logging, the memory limit, the scheme, and a
// controller-runtime manager with health probes, metrics, leader election and client rate
// limits.
package process

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"kubelb.dev/kubelb/internal/logging"
)

// Common holds the flags both binaries share.
type Common struct {
	MetricsAddr          Address
	HealthProbeAddr      Address
	PprofAddr            Address
	Kubeconfig           string
	EnableLeaderElection bool
	LogFormat            Enum
	LogLevel             string
	QPS                  float64
	Burst                int
}

// Bind registers the shared flags with their defaults.
func (c *Common) Bind(fs *FlagSet, metricsAddr string) {
	c.MetricsAddr.Value = metricsAddr
	c.HealthProbeAddr.Value = ":8081"
	c.PprofAddr.Value = "0"
	c.LogFormat = Enum{Value: "json", Allowed: []string{"json", "console"}}
	fs.Var(&c.MetricsAddr, "metrics-addr", "Address the Prometheus /metrics endpoint binds to (\"0\" disables it).")
	fs.Var(&c.HealthProbeAddr, "health-probe-bind-address", "Address the /healthz and /readyz probes bind to.")
	fs.Var(&c.PprofAddr, "pprof-bind-address", "Address Go's /debug/pprof/ profiling endpoints bind to (\"0\", the default, disables them). Profiles show what the process spends CPU and memory on; bind it to localhost only.")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster this binary runs in (default: in-cluster config or $KUBECONFIG).")
	fs.BoolVar(&c.EnableLeaderElection, "enable-leader-election", true, "Elect a leader so that only one replica reconciles at a time.")
	fs.Var(&c.LogFormat, "log-format", "Log encoding: json or console.")
	fs.StringVar(&c.LogLevel, "log-level", "info", "Log level: debug, info, warn (warnings and errors only), error, or a number (higher is more verbose).")
	fs.Float64Var(&c.QPS, "kube-api-qps", 200, "Requests per second each Kubernetes client may send.")
	fs.IntVar(&c.Burst, "kube-api-burst", 400, "Burst of requests each Kubernetes client may send.")
}

// Topics lists the shared flags in --help under "Cluster access and process" and "Logging"
// (with the binary's own logging flags, logging). Call it after the binary's own topics.
func (c *Common) Topics(fs *FlagSet, logging ...string) {
	fs.Topic("Cluster access and process", "kubeconfig", "kube-api-qps", "kube-api-burst", "enable-leader-election",
		"metrics-addr", "health-probe-bind-address", "pprof-bind-address")
	fs.Topic("Logging", append([]string{"log-format", "log-level"}, logging...)...)
	fs.Topic("Other", "version")
}

// Validate checks values the flag types cannot.
func (c *Common) Validate() error {
	if c.QPS <= 0 {
		return fmt.Errorf("flag --kube-api-qps must be positive")
	}
	if c.Burst <= 0 {
		return fmt.Errorf("flag --kube-api-burst must be positive")
	}
	if _, err := c.zapLevel(); err != nil {
		return err
	}
	return nil
}

func (c *Common) zapLevel() (zapcore.Level, error) { return logging.ParseLevel(c.LogLevel) }

// logOut is where the logger writes: standard error until the process exits on a failure.
// It is closed then, before the line that says why, so that line stays the last: after a
// lost lease controller-runtime goes on logging its stop sequence from goroutines once
// Start has returned, and those lines used to land after it.
var logOut = &closableWriter{w: os.Stderr}

// closableWriter writes to w until closed, and drops what comes after.
type closableWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (c *closableWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return len(p), nil
	}
	return c.w.Write(p)
}

// Close waits for a write under way and drops every later one.
func (c *closableWriter) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

// SetupLogging installs the logger of controller-runtime (and klog through it).
func (c *Common) SetupLogging(debug bool) {
	level, _ := c.zapLevel()
	if debug {
		level = zapcore.DebugLevel
	}
	// RFC 3339 timestamps (with nanoseconds, in UTC) in both encodings, rather than the
	// epoch seconds of zap's production encoder: readable, and sortable as text.
	rfc3339 := func(ec *zapcore.EncoderConfig) {
		ec.EncodeTime = func(t time.Time, enc zapcore.PrimitiveArrayEncoder) { zapcore.RFC3339NanoTimeEncoder(t.UTC(), enc) }
	}
	opts := zap.Options{Level: level, DestWriter: logOut}
	if c.LogFormat.Value == "console" {
		zap.ConsoleEncoder(rfc3339)(&opts)
	} else {
		zap.JSONEncoder(rfc3339)(&opts)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
}

// SetMemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) to 90% of the
// container's memory limit (its cgroup's), so that the garbage collector works harder as the
// heap nears the limit instead of letting the process be OOM-killed: between collections Go's
// heap may otherwise grow to twice what is live. A GOMEMLIMIT or AUTOMEMLIMIT in the
// environment takes precedence; without a cgroup limit nothing changes. It logs the limit set.
func SetMemoryLimit(log logr.Logger) {
	limit, err := memlimit.Set(memlimit.WithRatio(0.9), memlimit.WithProvider(memlimit.FromCgroup))
	switch {
	case err != nil:
		log.V(1).Info("no memory limit to follow (GOMEMLIMIT unset)", "reason", err.Error())
	case limit > 0 && limit < math.MaxInt64:
		log.Info("Go memory limit set", "GOMEMLIMIT", limit)
	}
}

// RestConfig loads a kubeconfig (or the in-cluster config when path is empty) and applies the
// client rate limits.
func (c *Common) RestConfig(path string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		cfg, err = ctrl.GetConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", ExpandHome(path))
	}
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(c.QPS), c.Burst
	return cfg, nil
}

// ManagerOptions are the controller-runtime manager options from the shared flags.
func (c *Common) ManagerOptions(scheme *runtime.Scheme, leaderID, leaderNamespace string) ctrl.Options {
	return ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: c.MetricsAddr.Value},
		HealthProbeBindAddress:        c.HealthProbeAddr.Value,
		PprofBindAddress:              c.PprofAddr.Value,
		LeaderElection:                c.EnableLeaderElection,
		LeaderElectionID:              leaderID,
		LeaderElectionNamespace:       leaderNamespace,
		LeaderElectionReleaseOnCancel: true,
	}
}

// AddProbes registers /healthz and /readyz; ready waits for the caches to sync.
func AddProbes(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	})
}

// ExpandHome replaces a leading ~ with the home folder.
func ExpandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// Run adds the probes to mgr and runs it until SIGTERM or SIGINT, then returns once it has
// stopped cleanly (the leader lease is released).
func Run(mgr ctrl.Manager) error {
	if err := AddProbes(mgr); err != nil {
		return fmt.Errorf("adding the health probes: %w", err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return err // "leader election lost" and the like say what happened; docs quote them as they are
	}
	mgr.GetLogger().Info("stopped")
	return nil
}
