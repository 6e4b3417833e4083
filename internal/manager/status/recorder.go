package status

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/textcut"
	"kubelb.dev/kubelb/internal/xds"
)

// Bounds of what the Recorder writes: rejections per tenant and replica, and message length.
const (
	maxRejectionsPerTenant = 32
	maxRejectionMessage    = 2000
	recorderHoldOff        = 200 * time.Millisecond
	recorderRetry          = 2 * time.Second
	// maxHealthPerTenant bounds the backend health entries a replica writes per tenant
	// (clusters with unreachable endpoints first); how many it left out it writes too
	// (status.backendHealthOmitted).
	maxHealthPerTenant = reach.MaxReportedClusters
	// HealthRefresh is how often a replica confirms (re-writes with a new time) entries
	// that name unreachable endpoints, so that the leader can tell them from those of a
	// replica that is gone (StaleHealthTTL). Entries of reachable clusters are never
	// re-written: a settled, healthy hub makes no writes.
	HealthRefresh = 5 * time.Minute
)

// Recorder writes the NACKs heard by this replica's xDS server into the tenants'
// TenantStates (status.rejections), and what the proxies found of the tenant's backends
// (status.backendHealth, the reach.Tracker's summary), under a field owner of its own
// ("kubelb-xds/<replica>"), so every replica keeps exactly its own entries and the leader's
// Writer sees them all. It runs on every replica. Use Hear as the xDS server's OnRejection
// hook and HearHealth as its OnHealth hook, and add the Recorder to the manager.
type Recorder struct {
	client  client.Client
	log     logr.Logger
	replica string

	mu     sync.Mutex
	active map[string]map[rejectionKey]v1alpha1.ConfigRejection // tenant → entries
	dirty  map[string]bool
	wake   chan struct{}
	// health holds the proxies' reports; written are the entries last built per tenant.
	health  *reach.Tracker
	written map[string][]v1alpha1.BackendHealth
	// omitted is, per tenant, how many clusters the entries last built left out, and when
	// that last changed or was confirmed.
	omitted map[string]v1alpha1.BackendHealthOmitted
	now     func() time.Time
}

type rejectionKey struct{ proxy, typeURL string }

// NewRecorder returns a Recorder writing with c as replica (e.g. the pod name).
func NewRecorder(c client.Client, log logr.Logger, replica string) *Recorder {
	return &Recorder{client: c, log: log.WithName("rejections"), replica: replica, active: map[string]map[rejectionKey]v1alpha1.ConfigRejection{},
		dirty: map[string]bool{}, wake: make(chan struct{}, 1), health: reach.NewTracker(), written: map[string][]v1alpha1.BackendHealth{}, omitted: map[string]v1alpha1.BackendHealthOmitted{}, now: time.Now}
}

// HearHealth records a proxy's health report (or its stream's end); it never blocks. The
// tenant is written when its summary changed.
func (r *Recorder) HearHealth(h xds.HealthReport) {
	if h.Tenant == "" {
		return
	}
	if h.Gone {
		r.health.Forget(h.Tenant, h.Proxy)
	} else {
		r.health.Hear(h.Tenant, h.Proxy, reach.Report{Asked: h.Asked, Health: h.Health})
	}
	r.mu.Lock()
	summary := r.health.Summary(h.Tenant)
	changed := !sameHealth(r.written[h.Tenant], summary) || int(r.omitted[h.Tenant].Clusters) != omittedOf(summary)
	if changed {
		r.dirty[h.Tenant] = true
	}
	r.mu.Unlock()
	if changed {
		r.poke()
	}
}

func (r *Recorder) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// sameHealth tells whether entries already say what summary says.
func sameHealth(entries []v1alpha1.BackendHealth, summary []reach.ClusterHealth) bool {
	if len(entries) != len(boundedHealth(summary)) {
		return false
	}
	for i, c := range boundedHealth(summary) {
		e := entries[i]
		if e.Cluster != c.Cluster || e.Endpoints != c.Endpoints || int(e.Reachable) != c.Reachable ||
			int(e.UnreachableCount) != len(c.Unreachable) || !slices.Equal(e.Unreachable, named(c.Unreachable)) {
			return false
		}
	}
	return true
}

// omittedOf is how many clusters of a summary boundedHealth leaves out.
func omittedOf(summary []reach.ClusterHealth) int {
	return max(len(summary)-maxHealthPerTenant, 0)
}

// boundedHealth keeps at most maxHealthPerTenant clusters of a summary, those with unreachable
// endpoints first, sorted by cluster.
func boundedHealth(summary []reach.ClusterHealth) []reach.ClusterHealth {
	if len(summary) <= maxHealthPerTenant {
		return summary
	}
	out := slices.Clone(summary)
	slices.SortStableFunc(out, func(a, b reach.ClusterHealth) int {
		return cmpBool(len(a.Unreachable) == 0, len(b.Unreachable) == 0)
	})
	out = out[:maxHealthPerTenant]
	slices.SortFunc(out, func(a, b reach.ClusterHealth) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func named(addrs []string) []string {
	if len(addrs) > reach.MaxNamed {
		return addrs[:reach.MaxNamed]
	}
	return addrs
}

// healthEntries are the tenant's entries as this replica writes them now: the summary,
// with the time of each entry's last change, and a new time for entries with unreachable
// endpoints when refresh is set; and how many clusters they leave out (none, or one entry
// with its time, renewed as those of unreachable endpoints).
func (r *Recorder) healthEntries(tenant string, refresh bool) ([]v1alpha1.BackendHealth, []v1alpha1.BackendHealthOmitted) {
	full := r.health.Summary(tenant)
	summary := boundedHealth(full)
	r.mu.Lock()
	defer r.mu.Unlock()
	var omitted []v1alpha1.BackendHealthOmitted
	if n := omittedOf(full); n > 0 {
		om := v1alpha1.BackendHealthOmitted{Replica: textcut.Cut(r.replica, 253, ""), Clusters: int32(n), Time: metav1.NewTime(r.now().Truncate(time.Second))}
		if p, ok := r.omitted[tenant]; ok && p.Clusters == om.Clusters && !refresh {
			om.Time = p.Time
		}
		r.omitted[tenant] = om
		omitted = []v1alpha1.BackendHealthOmitted{om}
	} else {
		delete(r.omitted, tenant)
	}
	prev := map[string]v1alpha1.BackendHealth{}
	for _, e := range r.written[tenant] {
		prev[e.Cluster] = e
	}
	now := metav1.NewTime(r.now().Truncate(time.Second))
	out := make([]v1alpha1.BackendHealth, 0, len(summary))
	for _, c := range summary {
		e := v1alpha1.BackendHealth{Replica: textcut.Cut(r.replica, 253, ""), Cluster: textcut.Cut(c.Cluster, 256, ""), Endpoints: c.Endpoints,
			Reachable: int32(c.Reachable), UnreachableCount: int32(len(c.Unreachable)), Unreachable: slices.Clone(named(c.Unreachable)), Time: now}
		if p, ok := prev[c.Cluster]; ok && sameHealth([]v1alpha1.BackendHealth{p}, []reach.ClusterHealth{c}) && !(refresh && e.UnreachableCount > 0) {
			e.Time = p.Time
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		delete(r.written, tenant)
	} else {
		r.written[tenant] = out
	}
	return out, omitted
}

// refreshHealth marks the tenants whose entries name unreachable endpoints.
func (r *Recorder) refreshHealth() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for tenant, entries := range r.written {
		for _, e := range entries {
			if e.UnreachableCount > 0 {
				out[tenant] = true
				r.dirty[tenant] = true
			}
		}
	}
	for tenant := range r.omitted {
		out[tenant] = true
		r.dirty[tenant] = true
	}
	return out
}

// FieldOwner returns the replica's field owner on TenantState status.
func (r *Recorder) FieldOwner() string {
	return textcut.Cut("kubelb-xds/"+r.replica, 128, "")
}

// Hear records a rejection or its resolution; it never blocks.
func (r *Recorder) Hear(rej xds.Rejection) {
	if rej.Tenant == "" {
		return
	}
	r.mu.Lock()
	key := rejectionKey{proxy: rej.Proxy, typeURL: rej.TypeURL}
	entries := r.active[rej.Tenant]
	if rej.Resolved {
		if _, ok := entries[key]; !ok {
			r.mu.Unlock()
			return
		}
		delete(entries, key)
	} else {
		if entries == nil {
			entries = map[rejectionKey]v1alpha1.ConfigRejection{}
			r.active[rej.Tenant] = entries
		}
		if _, ok := entries[key]; !ok && len(entries) >= maxRejectionsPerTenant {
			r.mu.Unlock()
			return
		}
		entries[key] = v1alpha1.ConfigRejection{
			Proxy: textcut.Cut(rej.Proxy, 253, ""), TypeURL: textcut.Cut(rej.TypeURL, 256, ""), Version: textcut.Cut(rej.Version, 64, ""),
			Message: textcut.Cut(rej.Message, maxRejectionMessage, ""), Replica: textcut.Cut(r.replica, 253, ""), Time: metav1.Now().Rfc3339Copy(),
		}
	}
	r.dirty[rej.Tenant] = true
	r.mu.Unlock()
	r.poke()
}

// NeedLeaderElection is false: every replica records the NACKs of its own proxies.
func (r *Recorder) NeedLeaderElection() bool { return false }

// Start writes dirty tenants until ctx is done (manager.Runnable).
func (r *Recorder) Start(ctx context.Context) error {
	log := r.log
	refresh := time.NewTicker(HealthRefresh)
	defer refresh.Stop()
	var refreshing map[string]bool
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-refresh.C:
			refreshing = r.refreshHealth()
		}
		// Hold off, so a burst of NACKs from many proxies costs one write per tenant.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(recorderHoldOff):
		}
		for _, tenant := range r.takeDirty() {
			log.V(1).Info("writing Envoy rejections and backend health", "tenant", tenant, "rejections", len(r.Entries(tenant)))
			if err := r.write(ctx, tenant, refreshing[tenant]); err != nil {
				log.Error(err, "recording Envoy rejections; retrying", "tenant", tenant)
				r.markDirty(tenant)
				time.AfterFunc(recorderRetry, r.poke)
			}
		}
		refreshing = nil
	}
}

func (r *Recorder) takeDirty() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Sorted(maps.Keys(r.dirty))
	clear(r.dirty)
	return out
}

func (r *Recorder) markDirty(tenant string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirty[tenant] = true
}

// Entries returns the tenant's rejections as this replica writes them, sorted.
func (r *Recorder) Entries(tenant string) []v1alpha1.ConfigRejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]v1alpha1.ConfigRejection, 0, len(r.active[tenant]))
	for _, e := range r.active[tenant] {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b v1alpha1.ConfigRejection) int {
		return strings.Compare(a.Proxy+"\x00"+a.TypeURL, b.Proxy+"\x00"+b.TypeURL)
	})
	return out
}

// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=tenantstates/status,verbs=get;update;patch

// write applies this replica's entries of one tenant; entries it no longer lists are removed
// by server-side apply, entries of other replicas are left alone.
func (r *Recorder) write(ctx context.Context, tenant string, refresh bool) error {
	list, err := unstructuredList(r.Entries(tenant))
	if err != nil {
		return err
	}
	entries, omitted := r.healthEntries(tenant, refresh)
	healthList, err := unstructuredList(entries)
	if err != nil {
		return err
	}
	omittedList, err := unstructuredList(omitted)
	if err != nil {
		return err
	}
	// An empty list (not an empty status, which the API server reads as null) releases
	// every entry this replica wrote; other replicas' entries stay.
	status := map[string]any{"rejections": list, "backendHealth": healthList, "backendHealthOmitted": omittedList}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "TenantState",
		"metadata":   map[string]any{"name": hubnames.TenantStateName, "namespace": tenant},
		"status":     status,
	}}
	err = r.client.Status().Patch(ctx, u, client.Apply, client.FieldOwner(r.FieldOwner()), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return nil // the tenant is gone
	}
	if err != nil {
		return fmt.Errorf("applying the rejections of TenantState %s/%s: %w", tenant, hubnames.TenantStateName, err)
	}
	return nil
}

// unstructuredList is items as a list of an unstructured object, never nil.
func unstructuredList[T any](items []T) ([]any, error) {
	out := make([]any, 0, len(items))
	for i := range items {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
