package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// SchemaVersion is the version of the JSON layout of a Result.
const SchemaVersion = 1

// Result is what one run of the harness measured: one size (N Services across T tenants)
// through every workload, in order.
type Result struct {
	Schema  int     `json:"schema"`
	Date    string  `json:"date"`
	Commit  string  `json:"commit"`
	Command string  `json:"command"`
	Machine Machine `json:"machine"`
	Setup   Setup   `json:"setup"`
	// Workloads by name: burst, quiet, change, churn, delete.
	Workloads map[string]*Workload `json:"workloads"`
	// NotMeasured names figures the harness cannot measure yet, and why.
	NotMeasured map[string]string `json:"not_measured,omitempty"`
	// WallSeconds is the whole run, set-up included.
	WallSeconds float64 `json:"wall_seconds"`
}

// Machine describes where the run ran; the load average is sampled every 5 s during it.
type Machine struct {
	CPUs        int     `json:"cpus"`
	MemoryMiB   int64   `json:"memory_mib"`
	LoadMin     float64 `json:"load_avg_1m_min"`
	LoadMedian  float64 `json:"load_avg_1m_median"`
	LoadMax     float64 `json:"load_avg_1m_max"`
	LoadSamples int     `json:"load_avg_samples"`
}

// Setup is the shape of the run.
type Setup struct {
	Services int `json:"services"`
	Tenants  int `json:"tenants"`
	// RealTenants have a tenant API server and a real ccm process each; the other
	// (played) tenants' hub objects — Addresses/default and a LoadBalancer per Service — are
	// written by the harness exactly as their ccm would (the same functions, field owner and
	// server-side apply), without a tenant API server.
	RealTenants   int  `json:"real_tenants"`
	PlayedTenants int  `json:"played_tenants"`
	CCMProcesses  int  `json:"ccm_processes"`
	Envoy         bool `json:"envoy"`
	// EnvoyWorkers is the Envoy's --concurrency: 0 is one worker per core; 1 when tenant 0
	// holds more listeners than half the descriptor limit allows for one socket per worker.
	EnvoyWorkers int `json:"envoy_workers,omitempty"`
	// ManagerMemoryLimit is the manager's GOMEMLIMIT, "" for none (BENCH_MANAGER_GOMEMLIMIT).
	ManagerMemoryLimit string `json:"manager_gomemlimit,omitempty"`
	// Clients is the number of concurrent clients of the load generator.
	Clients        int     `json:"clients"`
	ChurnPerSecond float64 `json:"churn_per_second"`
	ChurnSeconds   float64 `json:"churn_seconds"`
	QuietSeconds   float64 `json:"quiet_seconds"`
}

// Latency is a distribution of durations in seconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_s"`
	P95   float64 `json:"p95_s"`
	P99   float64 `json:"p99_s"`
	Max   float64 `json:"max_s"`
}

// latencyOf summarises durations (nearest-rank percentiles).
func latencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1
		i = max(0, min(i, len(s)-1))
		return s[i].Seconds()
	}
	return Latency{Count: len(s), P50: rank(0.50), P95: rank(0.95), P99: rank(0.99), Max: s[len(s)-1].Seconds()}
}

// Proc is one kind of process's cost during a workload.
type Proc struct {
	// Processes is how many processes are added up (several ccms).
	Processes  int     `json:"processes"`
	CPUSeconds float64 `json:"cpu_s"`
	// PeakRSSMiB is the largest peak resident memory (VmHWM, since the process started)
	// among them at the end of the workload.
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// ErrorLogLines are the lines logged at error level during the workload.
	ErrorLogLines int `json:"error_log_lines"`
}

// Writes are write requests an API server served, from its own apiserver_request_total.
type Writes struct {
	Total int64 `json:"total"`
	// ByVerbResource is keyed "VERB resource[/subresource]".
	ByVerbResource map[string]int64 `json:"by_verb_resource"`
	// Kubelb is Total without the API server's own IPAddress objects, the played hub load
	// balancer's status writes and the load generator's own writes to the tenant (its
	// Service creates, updates and deletes): the writes of the manager and the ccm (or of
	// the harness playing a ccm, counted also in PlayedCCM).
	Kubelb int64 `json:"kubelb"`
	// PerService is Kubelb divided by the Services (or operations) of the workload.
	PerService float64 `json:"kubelb_per_service"`
	// HubLBPlayer and PlayedCCM are the harness's own writes included in Total.
	HubLBPlayer int64 `json:"hub_lb_player,omitempty"`
	PlayedCCM   int64 `json:"played_ccm,omitempty"`
	LoadGen     int64 `json:"load_generator,omitempty"`
}

// Envoycp is what the manager's Envoy control plane reported during a workload, from its
// own /metrics (kubelb_manager_envoycp_*).
type Envoycp struct {
	// Builds and Pushes are snapshot builds (translations) and snapshots pushed, in all.
	Builds float64 `json:"snapshot_builds"`
	Pushes float64 `json:"snapshot_pushes"`
	// TenantsBuilt and TenantsPushed are how many tenants had at least one.
	TenantsBuilt  int `json:"tenants_built"`
	TenantsPushed int `json:"tenants_pushed"`
	// BuildsByTenant and PushesByTenant hold the tenants that had any, by the metrics'
	// tenant label (the tenant's hub namespace).
	BuildsByTenant map[string]float64 `json:"snapshot_builds_by_tenant,omitempty"`
	PushesByTenant map[string]float64 `json:"snapshot_pushes_by_tenant,omitempty"`
	// MeanBuildSeconds is the mean translation time (snapshot_build_duration_seconds).
	MeanBuildSeconds float64 `json:"mean_build_s"`
	// SentBytes are the bytes of the xDS responses the manager sent to all proxies
	// (kubelb_manager_envoycp_xds_sent_bytes_total: serialized, before TLS).
	SentBytes float64 `json:"xds_sent_bytes"`
}

// MachineCPU is the whole machine's CPU during a workload (/proc/stat).
type MachineCPU struct {
	// BusySeconds is CPU time spent not idle, over all CPUs.
	BusySeconds float64 `json:"busy_s"`
	// Utilization is BusySeconds over the CPU time there was (1 = every CPU busy throughout).
	Utilization float64 `json:"utilization"`
}

// EnvoyXDS is what a real Envoy received on its xDS connection during a workload (its own
// cluster.xds_cluster.* and listener_manager.* stats).
type EnvoyXDS struct {
	// RxBytes are the bytes it received from the manager on the xDS connection, TLS records
	// included.
	RxBytes int64 `json:"rx_bytes"`
	// ListenersAdded counts listener_manager.listener_added (a listener added or replaced).
	ListenersAdded int64 `json:"listeners_added"`
	// WarningLines are the lines Envoy logged at warning level or above; InitialFetchTimeouts
	// those among them saying a resource waited initial_fetch_timeout for its configuration.
	WarningLines         int `json:"warning_lines"`
	InitialFetchTimeouts int `json:"initial_fetch_timeouts"`
}

// EventSample is what the Events of one reason said during a workload.
type EventSample struct {
	// Messages are the first distinct notes (by creation time), at most maxEventMessages.
	Messages []string `json:"messages"`
	// DistinctMessages counts the distinct notes in all.
	DistinctMessages int `json:"distinct_messages"`
	// Objects counts the objects the Events are about (regarding).
	Objects int `json:"objects"`
	// ObjectsByEvents counts those objects by how many Events each got ("1": objects with
	// one Event, "2": with two, ...); a repeated Event (its series) counts once.
	ObjectsByEvents map[string]int `json:"objects_by_events"`
	// Most is the object that got the most Events ("Kind namespace/name"), MostEvents how
	// many, and MostMessages their notes in order (at most maxEventMessages): what moved.
	Most         string   `json:"most,omitempty"`
	MostEvents   int      `json:"most_events,omitempty"`
	MostMessages []string `json:"most_messages,omitempty"`
}

// Workload is what one workload measured. Fields a workload does not measure are left out.
type Workload struct {
	Seconds float64 `json:"seconds"`
	// Services (or operations) the workload made; for churn, creates plus deletes.
	Services int `json:"services,omitempty"`
	// IssueSeconds is the time the load generator took to issue its requests.
	IssueSeconds float64 `json:"issue_seconds,omitempty"`
	// TimeToAddress is from each Service's create until the tenant Service (played tenants:
	// the hub LoadBalancer) shows an address.
	TimeToAddress *Latency `json:"time_to_address,omitempty"`
	// ConvergenceSeconds is from the first request until everything the workload made is
	// addressed (delete: until the hub holds no LoadBalancer nor hub Service of the tenants
	// and the tenant Services are gone).
	ConvergenceSeconds float64 `json:"convergence_seconds,omitempty"`
	// ConvergenceOverIssue is ConvergenceSeconds / IssueSeconds (issue 14 aims ≤ 1.3).
	ConvergenceOverIssue float64 `json:"convergence_over_issue,omitempty"`
	// GoneSeconds (delete) is when each kind of object was all gone, in seconds from the
	// first request: "tenant Services" (the ccm released them), "LoadBalancers" (the ccm
	// deleted the mirrors), "hub Services" (the manager deleted them).
	GoneSeconds map[string]float64 `json:"gone_seconds,omitempty"`
	// SettledSeconds (burst, change) is from the first request until the hub served no
	// write but leader-election leases and the manager built no snapshot (for 5 s, not
	// counted). The workload's counters are read once settled, so its writes and CPU include
	// what followed the last address (status conditions, Events).
	SettledSeconds float64 `json:"settled_seconds,omitempty"`
	// ChangeToHubSeconds and ChangeToEnvoySeconds (change): from the tenant Service's update
	// until the hub LoadBalancer's spec changed, and until a real Envoy added the listener.
	ChangeToHubSeconds   float64 `json:"change_to_hub_s,omitempty"`
	ChangeToEnvoySeconds float64 `json:"change_to_envoy_s,omitempty"`
	// HubToEnvoySeconds is ChangeToEnvoySeconds less ChangeToHubSeconds.
	HubToEnvoySeconds float64 `json:"hub_to_envoy_s,omitempty"`
	// EnvoySyncSeconds (burst, with Envoy): from Envoy's start until it holds a listener
	// per Service port of its tenant.
	EnvoySyncSeconds float64 `json:"envoy_sync_s,omitempty"`

	Manager   Proc   `json:"manager"`
	CCM       *Proc  `json:"ccm,omitempty"`
	HubWrites Writes `json:"hub_writes"`
	// EventsByReason counts the Events on the hub made during the workload, by reason (what
	// the "POST events" writes were about; an Event repeated is counted once).
	EventsByReason map[string]int `json:"events_by_reason,omitempty"`
	// EventSamples says, by reason, what those Events said and how they spread over the
	// objects they are about: which messages move, and how many Events one object got.
	EventSamples map[string]*EventSample `json:"event_samples,omitempty"`
	TenantWrites *Writes                 `json:"tenant_writes,omitempty"`
	Envoycp      Envoycp                 `json:"envoycp"`
	Envoy        *EnvoyXDS               `json:"envoy,omitempty"`
	// CPUByProcess is the CPU seconds of every process of the harness by command name: the
	// API servers ("kube-apiserver"), etcd, the manager ("kubelb"), the ccms ("ccm"), Envoy
	// and the harness itself (load generator, played tenants and hub load balancer).
	CPUByProcess map[string]float64 `json:"cpu_s_by_process,omitempty"`
	// MachineCPU is the whole machine's: when Utilization is near 1, the workload was bound
	// by the CPUs the processes share.
	MachineCPU *MachineCPU `json:"machine_cpu,omitempty"`
}

// FileName is the name of a run's JSON file under docs/benchmarks/.
func FileName(n, tenants int) string { return "n" + itoa(n) + "-t" + itoa(tenants) + ".json" }

func itoa(i int) string { return strconv.Itoa(i) }

// Write writes the result as indented JSON into dir/FileName.
func (r *Result) Write(dir string) (string, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, FileName(r.Setup.Services, r.Setup.Tenants))
	return p, os.WriteFile(p, append(b, '\n'), 0o644)
}

// Read reads a result file.
func Read(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Result{}
	return r, json.Unmarshal(b, r)
}
