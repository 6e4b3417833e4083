package bench

import (
	"bytes"
	"context"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testsupport"
)

// Envoy statistics read around each workload.
const (
	statXDSRxBytes      = "cluster.xds_cluster.upstream_cx_rx_bytes_total"
	statListenersAdded  = "listener_manager.listener_added"
	statListenersActive = "listener_manager.total_listeners_active"
)

// Manager metrics read around each workload (docs/metrics.md).
const (
	metricBuilds = "kubelb_manager_envoycp_snapshot_build_duration_seconds"
	metricPushes = "kubelb_manager_envoycp_snapshot_updates_total"
	metricSent   = "kubelb_manager_envoycp_xds_sent_bytes_total"
)

// mark is every counter the harness reads, at one moment.
type mark struct {
	at                       time.Time
	hub                      map[string]int64
	tenants                  []map[string]int64
	managerCPU               float64
	ccmCPU                   []float64
	managerErrors, ccmErrors int
	builds, buildSecs        map[string]float64
	pushes, sent             map[string]float64
	hubLB, played, loadGen   int64
	envoyRx, envoyAdded      int64
	envoyWarnings            int
	envoyFetchTimeouts       int
	// cpu: CPU seconds by command of every process of the harness (framework.CPUByCommand);
	// machineBusy and machineIdle: the whole machine's.
	cpu                      map[string]float64
	machineBusy, machineIdle float64
}

// settledMark is mark once the hub API server's write counters have settled: the harness
// sees a write's result (a watch event) a moment before apiserver_request_total counts the
// request, so a workload that has just converged waits until two readings 200 ms apart agree
// (at most 5 s).
func (h *harness) settledMark() *mark {
	t := h.t
	t.Helper()
	ctx := context.Background()
	prev, err := framework.APIWrites(ctx, h.sys.Hub.Config)
	for i := 0; i < 25 && err == nil; i++ {
		time.Sleep(200 * time.Millisecond)
		var cur map[string]int64
		if cur, err = framework.APIWrites(ctx, h.sys.Hub.Config); err == nil && maps.Equal(prev, cur) {
			break
		}
		prev = cur
	}
	if err != nil {
		t.Fatalf("reading the hub API server's writes: %v", err)
	}
	return h.mark()
}

// mark reads the counters; a counter that cannot be read fails the run.
func (h *harness) mark() *mark {
	t := h.t
	t.Helper()
	ctx := context.Background()
	m := &mark{at: time.Now(), hubLB: h.sys.HubLBWrites.Load(), played: h.played.Load(), loadGen: h.loadGen.Load()}
	var err error
	if m.hub, err = framework.APIWrites(ctx, h.sys.Hub.Config); err != nil {
		t.Fatalf("reading the hub API server's writes: %v", err)
	}
	for _, tn := range h.tenants {
		if tn.real == nil {
			continue
		}
		w, err := framework.APIWrites(ctx, tn.cluster.Config)
		if err != nil {
			t.Fatalf("reading tenant %s's API server's writes: %v", tn.name, err)
		}
		m.tenants = append(m.tenants, w)
		cpu, err := framework.ProcessCPU(tn.real.CCM.Cmd.Process.Pid)
		if err != nil {
			t.Fatalf("reading the CPU of the ccm of %s: %v", tn.name, err)
		}
		m.ccmCPU = append(m.ccmCPU, cpu)
		m.ccmErrors += errorLines(tn.real.CCM)
	}
	if m.managerCPU, err = framework.ProcessCPU(h.sys.Manager.Cmd.Process.Pid); err != nil {
		t.Fatalf("reading the manager's CPU: %v", err)
	}
	m.managerErrors = errorLines(h.sys.Manager)
	fams, err := framework.Scrape(ctx, "http://"+h.sys.MetricsAddr+"/metrics")
	if err != nil {
		t.Fatalf("reading the manager's metrics: %v", err)
	}
	m.builds = framework.SumBy(fams, metricBuilds, "tenant", false)
	m.buildSecs = framework.SumBy(fams, metricBuilds, "tenant", true)
	m.pushes = framework.SumBy(fams, metricPushes, "tenant", false)
	m.sent = framework.SumBy(fams, metricSent, "tenant", false)
	if h.envoy != nil {
		m.envoyRx = h.envoy.Stat(t, statXDSRxBytes)
		m.envoyAdded = h.envoy.Stat(t, statListenersAdded)
		m.envoyWarnings, m.envoyFetchTimeouts = envoyWarnings(h.envoy.Process)
	}
	if m.cpu, err = framework.CPUByCommand(); err != nil {
		t.Fatalf("reading the CPU of the harness's processes: %v", err)
	}
	if m.machineBusy, m.machineIdle, err = framework.MachineCPU(); err != nil {
		t.Fatalf("reading the machine's CPU: %v", err)
	}
	return m
}

// envoyWarnings counts the lines Envoy logged at warning level or above, and among them the
// "initial fetch timed out" of a resource that waited too long for its configuration.
func envoyWarnings(p *testsupport.Process) (warnings, fetchTimeouts int) {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return 0, 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(line, []byte("][warning][")) || bytes.Contains(line, []byte("][error][")) || bytes.Contains(line, []byte("][critical][")) {
			warnings++
			if bytes.Contains(line, []byte("initial fetch timed out")) {
				fetchTimeouts++
			}
		}
	}
	return warnings, fetchTimeouts
}

// errorLines counts the lines a binary logged at error level (console or JSON format).
func errorLines(p *testsupport.Process) int {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\tERROR\t")) + bytes.Count(b, []byte(`"level":"error"`))
}

// peakRSSMiB is a process's VmHWM in MiB (0 when it cannot be read).
func peakRSSMiB(pid int) float64 {
	rss, err := framework.ProcessPeakRSS(pid)
	if err != nil {
		return 0
	}
	return float64(rss) / (1 << 20)
}

// workload fills what every workload reports from the marks before and after it; services
// divides the writes.
func (h *harness) workload(before, after *mark, services int) *Workload {
	w := &Workload{Seconds: after.at.Sub(before.at).Seconds(), Services: services}
	w.Manager = Proc{Processes: 1, CPUSeconds: after.managerCPU - before.managerCPU,
		PeakRSSMiB: peakRSSMiB(h.sys.Manager.Cmd.Process.Pid), ErrorLogLines: after.managerErrors - before.managerErrors}
	c := &Proc{Processes: len(after.ccmCPU), ErrorLogLines: after.ccmErrors - before.ccmErrors}
	for i := range after.ccmCPU {
		c.CPUSeconds += after.ccmCPU[i] - before.ccmCPU[i]
	}
	for _, tn := range h.tenants {
		if tn.real != nil {
			c.PeakRSSMiB = max(c.PeakRSSMiB, peakRSSMiB(tn.real.CCM.Cmd.Process.Pid))
		}
	}
	w.CCM = c

	byKey, total := framework.WritesSince(before.hub, after.hub)
	hub := Writes{Total: total, ByVerbResource: byKey, HubLBPlayer: after.hubLB - before.hubLB, PlayedCCM: after.played - before.played}
	hub.Kubelb = total - byKey["POST ipaddresses"] - byKey["DELETE ipaddresses"] - hub.HubLBPlayer
	if services > 0 {
		hub.PerService = float64(hub.Kubelb) / float64(services)
	}
	w.HubWrites = hub
	w.EventsByReason, w.EventSamples = h.eventsSince(before.at)

	tw := &Writes{ByVerbResource: map[string]int64{}, LoadGen: after.loadGen - before.loadGen}
	for i := range after.tenants {
		d, n := framework.WritesSince(before.tenants[i], after.tenants[i])
		tw.Total += n
		for k, v := range d {
			tw.ByVerbResource[k] += v
		}
	}
	tw.Kubelb = tw.Total - tw.ByVerbResource["POST ipaddresses"] - tw.ByVerbResource["DELETE ipaddresses"] - tw.LoadGen
	if services > 0 {
		tw.PerService = float64(tw.Kubelb) / float64(services)
	}
	w.TenantWrites = tw

	w.Envoycp = envoycpSince(before, after)
	if h.envoy != nil {
		w.Envoy = &EnvoyXDS{RxBytes: after.envoyRx - before.envoyRx, ListenersAdded: after.envoyAdded - before.envoyAdded,
			WarningLines: after.envoyWarnings - before.envoyWarnings, InitialFetchTimeouts: after.envoyFetchTimeouts - before.envoyFetchTimeouts}
	}
	w.CPUByProcess = map[string]float64{}
	for k, v := range after.cpu {
		w.CPUByProcess[k] = max(v-before.cpu[k], 0) // 0: a process started meanwhile that ended
	}
	busy, idle := after.machineBusy-before.machineBusy, after.machineIdle-before.machineIdle
	w.MachineCPU = &MachineCPU{BusySeconds: busy}
	if busy+idle > 0 {
		w.MachineCPU.Utilization = busy / (busy + idle)
	}
	return w
}

func envoycpSince(before, after *mark) Envoycp {
	e := Envoycp{BuildsByTenant: deltas(before.builds, after.builds), PushesByTenant: deltas(before.pushes, after.pushes)}
	secs := 0.0
	for tn, d := range e.BuildsByTenant {
		e.Builds += d
		secs += after.buildSecs[tn] - before.buildSecs[tn]
	}
	for _, d := range e.PushesByTenant {
		e.Pushes += d
	}
	for _, d := range deltas(before.sent, after.sent) {
		e.SentBytes += d
	}
	e.TenantsBuilt, e.TenantsPushed = len(e.BuildsByTenant), len(e.PushesByTenant)
	if e.Builds > 0 {
		e.MeanBuildSeconds = secs / e.Builds
	}
	return e
}

// deltas are the positive differences by key.
func deltas(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// dist is a *Latency of durations.
func dist(ds []time.Duration) *Latency {
	l := latencyOf(ds)
	return &l
}

// maxEventMessages bounds EventSample.Messages.
const maxEventMessages = 5

// eventsSince counts the hub's Events made since at, by reason, and samples what they said
// (none when they cannot be listed: the figures do not depend on it).
func (h *harness) eventsSince(at time.Time) (map[string]int, map[string]*EventSample) {
	list := &eventsv1.EventList{}
	if err := h.sys.Hub.Client.List(context.Background(), list); err != nil {
		h.t.Logf("listing the hub's Events: %v", err)
		return nil, nil
	}
	since := at.Truncate(time.Second)
	var made []eventsv1.Event
	for _, e := range list.Items {
		if !e.CreationTimestamp.Time.Before(since) {
			made = append(made, e)
		}
	}
	return eventsByReason(made)
}

// objectOf names the object an Event is about: "Kind namespace/name".
func objectOf(e eventsv1.Event) string {
	return e.Regarding.Kind + " " + e.Regarding.Namespace + "/" + e.Regarding.Name
}

// eventsByReason counts Events by reason and samples each reason's notes and objects.
func eventsByReason(events []eventsv1.Event) (map[string]int, map[string]*EventSample) {
	slices.SortStableFunc(events, func(a, b eventsv1.Event) int {
		return a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time)
	})
	counts := map[string]int{}
	samples := map[string]*EventSample{}
	notes := map[string]map[string]bool{}
	perObject := map[string]map[string]int{}
	for _, e := range events {
		counts[e.Reason]++
		s := samples[e.Reason]
		if s == nil {
			s = &EventSample{ObjectsByEvents: map[string]int{}}
			samples[e.Reason], notes[e.Reason], perObject[e.Reason] = s, map[string]bool{}, map[string]int{}
		}
		if !notes[e.Reason][e.Note] {
			notes[e.Reason][e.Note] = true
			if len(s.Messages) < maxEventMessages {
				s.Messages = append(s.Messages, e.Note)
			}
		}
		perObject[e.Reason][objectOf(e)]++
	}
	for reason, s := range samples {
		s.DistinctMessages, s.Objects = len(notes[reason]), len(perObject[reason])
		for obj, n := range perObject[reason] {
			s.ObjectsByEvents[strconv.Itoa(n)]++
			if n > s.MostEvents || n == s.MostEvents && obj < s.Most {
				s.Most, s.MostEvents = obj, n
			}
		}
	}
	for _, e := range events {
		if s := samples[e.Reason]; objectOf(e) == s.Most && len(s.MostMessages) < maxEventMessages {
			s.MostMessages = append(s.MostMessages, e.Note)
		}
	}
	return counts, samples
}
