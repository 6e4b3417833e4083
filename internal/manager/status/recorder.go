package status

import (
	"context"
	"fmt"
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
	"kubelb.dev/kubelb/internal/textcut"
	"kubelb.dev/kubelb/internal/xds"
)

// Bounds of what the Recorder writes: rejections per tenant and replica, and message length.
const (
	maxRejectionsPerTenant = 32
	maxRejectionMessage    = 2000
	recorderHoldOff        = 200 * time.Millisecond
	recorderRetry          = 2 * time.Second
)

// Recorder writes the NACKs heard by this replica's xDS server into the tenants'
// TenantStates (status.rejections), under a field owner of its own ("kubelb-xds/<replica>"),
// so every replica keeps exactly its own entries and the leader's Writer sees them all. It
// runs on every replica. Use Hear as the xDS server's OnRejection hook, and add the Recorder
// to the manager.
type Recorder struct {
	client  client.Client
	log     logr.Logger
	replica string

	mu     sync.Mutex
	active map[string]map[rejectionKey]v1alpha1.ConfigRejection // tenant → entries
	dirty  map[string]bool
	wake   chan struct{}
}

type rejectionKey struct{ proxy, typeURL string }

// NewRecorder returns a Recorder writing with c as replica (e.g. the pod name).
func NewRecorder(c client.Client, log logr.Logger, replica string) *Recorder {
	return &Recorder{client: c, log: log.WithName("rejections"), replica: replica, active: map[string]map[rejectionKey]v1alpha1.ConfigRejection{},
		dirty: map[string]bool{}, wake: make(chan struct{}, 1)}
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
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// NeedLeaderElection is false: every replica records the NACKs of its own proxies.
func (r *Recorder) NeedLeaderElection() bool { return false }

// Start writes dirty tenants until ctx is done (manager.Runnable).
func (r *Recorder) Start(ctx context.Context) error {
	log := r.log
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		}
		// Hold off, so a burst of NACKs from many proxies costs one write per tenant.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(recorderHoldOff):
		}
		for _, tenant := range r.takeDirty() {
			log.V(1).Info("writing Envoy rejections", "tenant", tenant, "rejections", len(r.Entries(tenant)))
			if err := r.write(ctx, tenant); err != nil {
				log.Error(err, "recording Envoy rejections; retrying", "tenant", tenant)
				r.markDirty(tenant)
				time.AfterFunc(recorderRetry, func() {
					select {
					case r.wake <- struct{}{}:
					default:
					}
				})
			}
		}
	}
}

func (r *Recorder) takeDirty() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.dirty))
	for t := range r.dirty {
		out = append(out, t)
	}
	clear(r.dirty)
	slices.Sort(out)
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
func (r *Recorder) write(ctx context.Context, tenant string) error {
	entries := r.Entries(tenant)
	list := make([]any, 0, len(entries))
	for i := range entries {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&entries[i])
		if err != nil {
			return err
		}
		list = append(list, m)
	}
	// An empty list (not an empty status, which the API server reads as null) releases
	// every entry this replica wrote; other replicas' entries stay.
	status := map[string]any{"rejections": list}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "TenantState",
		"metadata":   map[string]any{"name": TenantStateName, "namespace": tenant},
		"status":     status,
	}}
	err := r.client.Status().Patch(ctx, u, client.Apply, client.FieldOwner(r.FieldOwner()), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return nil // the tenant is gone
	}
	if err != nil {
		return fmt.Errorf("applying the rejections of TenantState %s/%s: %w", tenant, TenantStateName, err)
	}
	return nil
}
