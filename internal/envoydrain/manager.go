package envoydrain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Paths and defaults of the shutdown manager.
const (
	// DrainPath, on the control socket, starts the drain (POST) and answers when it ended.
	DrainPath = "/drain"
	// DrainedPath, on the wait address, answers 200 once the drain has ended (GET). It is the
	// Envoy container's preStop hook: the kubelet sends SIGTERM to Envoy only after it.
	DrainedPath = "/drained"
	// DefaultControlSocket is the control socket: an abstract Unix socket, which belongs to
	// the pod's network namespace, so only the pod's own containers can reach it.
	DefaultControlSocket = "@kubelb-envoy-shutdown-manager"
	// DefaultStartWait is how long a request to DrainedPath waits for a drain to start.
	DefaultStartWait = 30 * time.Second
	// DefaultMaxWaiters bounds the requests to DrainedPath waiting at once.
	DefaultMaxWaiters = 64
)

// ManagerOptions configure a shutdown manager.
type ManagerOptions struct {
	// Drain is the drain it runs when asked.
	Drain Options
	// WaitAddress is where DrainedPath is served (the pod's address: the kubelet calls it).
	WaitAddress string
	// ControlSocket is the Unix socket DrainPath is served on; a name starting with @ is an
	// abstract socket. Default DefaultControlSocket.
	ControlSocket string
	// StartWait is how long a request to DrainedPath waits for a drain to start before it is
	// answered 503; default DefaultStartWait. The kubelet runs the Envoy container's hook and
	// the sidecar's hook (which starts the drain) at the same time, in no set order.
	StartWait time.Duration
	// MaxWaiters bounds the requests to DrainedPath waiting at once (more are answered 503 at
	// once); default DefaultMaxWaiters.
	MaxWaiters int
	// Log receives what the manager does; the zero Logger discards it.
	Log logr.Logger
}

// Manager is the shutdown manager of an Envoy pod. On its control socket, reachable only
// from inside the pod, POST DrainPath runs the drain (once: later requests wait for the same
// drain) and answers when it ended. On its wait address GET DrainedPath answers 200 once the
// drain ended; it cannot start, stop or change a drain, so the address may be reachable from
// the pod network. The sidecar's preStop hook ("kubelb envoy-shutdown-manager drain") starts
// the drain; the Envoy container's preStop hook (an HTTP GET of DrainedPath) holds Envoy's
// SIGTERM back until the drain ended.
type Manager struct {
	o       ManagerOptions
	wait    net.Listener
	control net.Listener
	waiters chan struct{}
	// life bounds the drain: it ends when Serve returns.
	life context.Context
	end  context.CancelFunc

	once    sync.Once
	started chan struct{} // closed when the drain starts
	done    chan struct{} // closed when it ended
	result  Result
	err     error
}

// Listen opens the manager's wait address and control socket.
func Listen(o ManagerOptions) (*Manager, error) {
	if o.ControlSocket == "" {
		o.ControlSocket = DefaultControlSocket
	}
	if o.StartWait <= 0 {
		o.StartWait = DefaultStartWait
	}
	if o.MaxWaiters <= 0 {
		o.MaxWaiters = DefaultMaxWaiters
	}
	wait, err := net.Listen("tcp", o.WaitAddress)
	if err != nil {
		return nil, fmt.Errorf("shutdown manager: listening on %s: %w", o.WaitAddress, err)
	}
	control, err := net.Listen("unix", o.ControlSocket)
	if err != nil {
		wait.Close()
		return nil, fmt.Errorf("shutdown manager: listening on the control socket %s: %w", o.ControlSocket, err)
	}
	life, end := context.WithCancel(context.Background())
	return &Manager{
		o: o, wait: wait, control: control, waiters: make(chan struct{}, o.MaxWaiters), life: life, end: end,
		started: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// WaitAddr is the address DrainedPath is served on.
func (m *Manager) WaitAddr() net.Addr { return m.wait.Addr() }

// Serve serves until ctx ends (the container's SIGTERM, after its preStop hook), then
// stops a drain still running, answers the requests still waiting (503 when no drain ended)
// and returns.
func (m *Manager) Serve(ctx context.Context) error {
	defer m.end()
	waitMux := http.NewServeMux()
	waitMux.HandleFunc("GET "+DrainedPath, func(w http.ResponseWriter, r *http.Request) { m.serveDrained(ctx, w, r) })
	controlMux := http.NewServeMux()
	controlMux.HandleFunc("POST "+DrainPath, m.serveDrain)
	servers := []*http.Server{
		{Handler: waitMux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second},
		{Handler: controlMux, ReadHeaderTimeout: 5 * time.Second},
	}
	listeners := []net.Listener{m.wait, m.control}
	errs := make(chan error, len(servers))
	for i, s := range servers {
		go func() {
			if err := s.Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("shutdown manager: serving on %s: %w", listeners[i].Addr(), err)
				return
			}
			errs <- nil
		}()
	}
	m.o.Log.Info("shutdown manager started", "wait", m.wait.Addr().String(), "control", m.o.ControlSocket,
		"minDrainDuration", m.o.Drain.MinDuration.String(), "drainTimeout", m.o.Drain.Timeout.String())
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	// The handlers watch ctx and the drain watches m.life: both return now.
	m.end()
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		err = errors.Join(err, s.Shutdown(stop))
	}
	m.o.Log.Info("shutdown manager stopped")
	return err
}

// Drain starts the drain, once (a drain already started is waited for instead), and returns
// when it ended or ctx ended. The drain runs until it ends or Serve returns, whatever ctx.
func (m *Manager) Drain(ctx context.Context) (Result, error) {
	m.once.Do(func() {
		close(m.started)
		go func() {
			m.result, m.err = Drain(m.life, m.o.Drain)
			if m.err != nil {
				m.o.Log.Error(m.err, "drain failed")
			} else {
				m.o.Log.Info("drain ended", "outcome", m.result.Outcome, "active", m.result.Active, "elapsed", m.result.Elapsed.String())
			}
			close(m.done)
		}()
	})
	select {
	case <-m.done:
		return m.result, m.err
	case <-ctx.Done():
		return Result{Active: -1}, ctx.Err()
	}
}

// serveDrain runs the drain for the sidecar's preStop hook. The drain is not bound to the
// request: a hook that gives up does not stop the drain the Envoy container waits for.
func (m *Manager) serveDrain(w http.ResponseWriter, r *http.Request) {
	m.o.Log.Info("drain requested")
	res, err := m.Drain(r.Context())
	if r.Context().Err() != nil {
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	fmt.Fprintln(w, res.String())
}

// serveDrained answers once the drain ended: 200 after a drain, 502 after one that failed
// (Envoy unreachable: nothing is left to drain), 503 when no drain started within StartWait
// or the manager stopped first.
func (m *Manager) serveDrained(stop context.Context, w http.ResponseWriter, r *http.Request) {
	select {
	case m.waiters <- struct{}{}:
		defer func() { <-m.waiters }()
	default:
		http.Error(w, "too many requests waiting", http.StatusServiceUnavailable)
		return
	}
	startWait := time.NewTimer(m.o.StartWait)
	defer startWait.Stop()
	select {
	case <-m.started:
	case <-startWait.C:
		http.Error(w, fmt.Sprintf("no drain started within %s", m.o.StartWait), http.StatusServiceUnavailable)
		return
	case <-stop.Done():
		http.Error(w, "the shutdown manager stopped before a drain started", http.StatusServiceUnavailable)
		return
	case <-r.Context().Done():
		return
	}
	select {
	case <-m.done:
	case <-stop.Done():
		http.Error(w, "the shutdown manager stopped during the drain", http.StatusServiceUnavailable)
		return
	case <-r.Context().Done():
		return
	}
	if m.err != nil {
		http.Error(w, m.err.Error(), http.StatusBadGateway)
		return
	}
	fmt.Fprintln(w, m.result.String())
}

// RequestDrain asks the shutdown manager on socket to drain and returns its answer once the
// drain ended; it is the sidecar's preStop hook.
func RequestDrain(ctx context.Context, socket string) (string, error) {
	if socket == "" {
		socket = DefaultControlSocket
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://shutdown-manager"+DrainPath, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("asking the shutdown manager on %s to drain: %w", socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	answer := strings.TrimSpace(string(body))
	if err != nil {
		return answer, fmt.Errorf("reading the shutdown manager's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return answer, fmt.Errorf("the shutdown manager answered %s: %s", resp.Status, answer)
	}
	return answer, nil
}

// Command is the kubelb subcommand that runs the shutdown manager; DrainCommand, after it,
// is the sidecar's preStop hook ("kubelb envoy-shutdown-manager drain").
const (
	Command      = "envoy-shutdown-manager"
	DrainCommand = "drain"
)
