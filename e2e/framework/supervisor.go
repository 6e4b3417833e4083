package framework

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// Exit is one end of a supervised process.
type Exit struct {
	// Process is the log name of the process that exited.
	Process string
	// Code is its exit code (-1: killed by a signal).
	Code int
	// At is when the supervisor saw it exit.
	At time.Time
	// Tail is the end of its log.
	Tail string
}

// Supervisor plays the kubelet of a Pod with restartPolicy Always: when the process exits,
// for whatever reason, it is started again with the same command line after Delay (the
// kubelet's first CrashLoopBackOff step is 10 s). Each run logs into a file of its own
// (<name>-restart-<n>). It stops restarting when the test ends or Stop is called.
type Supervisor struct {
	Delay time.Duration

	t    testenv.TB
	name string
	path string
	args []string

	mu    sync.Mutex
	cur   *testsupport.Process
	runs  int
	exits []Exit
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// Supervise starts supervising p (already running).
func Supervise(t testenv.TB, p *testsupport.Process, delay time.Duration) *Supervisor {
	s := &Supervisor{Delay: delay, t: t, name: p.Name, path: p.Cmd.Path, args: append([]string(nil), p.Cmd.Args[1:]...),
		cur: p, runs: 1, stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(s.Stop)
	go s.loop()
	return s
}

func (s *Supervisor) loop() {
	defer close(s.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		p := s.cur
		s.mu.Unlock()
		if !p.Exited() {
			continue
		}
		code := -1
		if st := p.Cmd.ProcessState; st != nil {
			code = st.ExitCode()
		}
		s.mu.Lock()
		s.exits = append(s.exits, Exit{Process: p.Name, Code: code, At: time.Now(), Tail: p.Tail(20)})
		n := len(s.exits)
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-time.After(s.Delay):
		}
		next := testsupport.StartProcess(s.t, fmt.Sprintf("%s-restart-%d", s.name, n), s.path, s.args...)
		s.mu.Lock()
		s.cur = next
		s.runs++
		s.mu.Unlock()
	}
}

// Current is the process running now (or the last one, while it is restarted).
func (s *Supervisor) Current() *testsupport.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Exits are the ends of the supervised process so far.
func (s *Supervisor) Exits() []Exit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Exit(nil), s.exits...)
}

// Restarts is how many times the process was started again.
func (s *Supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs - 1
}

// Stop stops restarting (the running process is left to its own cleanup).
func (s *Supervisor) Stop() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

func (e Exit) String() string {
	last := e.Tail
	if lines := strings.Split(strings.TrimSpace(e.Tail), "\n"); len(lines) > 0 {
		last = lines[len(lines)-1]
	}
	return fmt.Sprintf("%s %s exited (code %d): %s", e.At.UTC().Format("15:04:05"), e.Process, e.Code, last)
}
