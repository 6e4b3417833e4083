// Package admission is the manager's validating admission webhook for what tenants write
// into the hub: the API server asks it before it stores a LoadBalancer, Route or SyncSecret
// in a tenant namespace, and it refuses a write that would take the tenant's objects past
// its byte limits (spec.limits.objectBytes, spec.limits.syncSecretBytes). Counts are the
// ResourceQuota's; together they bound what one tenant can store in the hub's etcd.
//
// The manager enforces the same limits on what it serves (internal/quota) whether or not
// the webhook runs; the webhook keeps the bytes out of etcd.
package admission

import (
	"context"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/settings"
)

// Path is the webhook's URL path.
const Path = "/validate-tenant-objects"

// syncWait is how long a request waits for the ledger to have seen every object (at
// start-up) before it is refused with "try again".
const syncWait = 10 * time.Second

// Handler decides one admission request.
type Handler struct {
	// Reader reads the Config and Tenants (the manager's cache).
	Reader client.Reader
	// Namespace is the manager's namespace (Config "default").
	Namespace string
	Ledger    *Ledger
	Decoder   admission.Decoder
}

// NewHandler returns the handler over the manager's scheme.
func NewHandler(r client.Reader, namespace string, l *Ledger, scheme *runtime.Scheme) *Handler {
	return &Handler{Reader: r, Namespace: namespace, Ledger: l, Decoder: admission.NewDecoder(scheme)}
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if !hubnames.IsTenantNamespace(req.Namespace) {
		return admission.Allowed("not a tenant namespace")
	}
	newObj, oldObj, f, err := h.decode(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if newObj == nil {
		return admission.Allowed("")
	}
	if !h.waitSynced(ctx) {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("the kubelb manager is still reading the tenant's objects; try again"))
	}
	t, err := settings.Load(ctx, h.Reader, h.Namespace, hubnames.TenantName(req.Namespace))
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("reading the tenant's limits: %w", err))
	}
	_, e, _ := bytesOf(newObj)
	var old int64 = -1
	if oldObj != nil {
		_, oe, _ := bytesOf(oldObj)
		old = oe.bytes
	}
	limit, field, kinds := t.Limits.ObjectBytes, "objectBytes", "LoadBalancers and Routes"
	if f == syncSecrets {
		limit, field, kinds = t.Limits.SyncSecretBytes, "syncSecretBytes", "SyncSecrets"
	}
	used := h.Ledger.Used(req.Namespace, f, types.UID(uidOf(oldObj)))
	if d := Decide(used, old, e.bytes, limit); !d {
		return admission.Denied(fmt.Sprintf(
			"tenant %s's %s may take %d bytes (spec.limits.%s); the others take %d and this %s would take %d. Delete or shrink another, or ask the platform team to raise the limit",
			hubnames.TenantName(req.Namespace), kinds, limit, field, used, req.Kind.Kind, e.bytes))
	}
	return admission.Allowed("")
}

// Decide is the rule: a write is refused when the object grows (or is new: old < 0) and the
// namespace's objects of its family, with it at its new size, would take more than limit
// bytes (negative: no limit). A write that does not grow the object is always allowed, so a
// tenant over a lowered limit can still shrink, relabel or finalize what it has.
func Decide(used, old, next, limit int64) bool {
	if limit < 0 || (old >= 0 && next <= old) {
		return true
	}
	return used+next <= limit
}

// decode returns the request's new object and the old one (updates), and their family;
// nil for kinds the webhook does not judge.
func (h *Handler) decode(req admission.Request) (newObj, oldObj client.Object, f family, err error) {
	switch req.Kind.Kind {
	case "LoadBalancer":
		newObj, oldObj, f = &kubelbv1alpha1.LoadBalancer{}, &kubelbv1alpha1.LoadBalancer{}, objects
	case "Route":
		newObj, oldObj, f = &kubelbv1alpha1.Route{}, &kubelbv1alpha1.Route{}, objects
	case "SyncSecret":
		newObj, oldObj, f = &kubelbv1alpha1.SyncSecret{}, &kubelbv1alpha1.SyncSecret{}, syncSecrets
	default:
		return nil, nil, 0, nil
	}
	if err := h.Decoder.Decode(req, newObj); err != nil {
		return nil, nil, 0, fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err)
	}
	if req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return newObj, nil, f, nil
	}
	if err := h.Decoder.DecodeRaw(req.OldObject, oldObj); err != nil {
		return nil, nil, 0, fmt.Errorf("decoding the old %s: %w", req.Kind.Kind, err)
	}
	return newObj, oldObj, f, nil
}

func uidOf(o client.Object) string {
	if o == nil {
		return ""
	}
	return string(o.GetUID())
}

// waitSynced waits up to syncWait for the ledger to have seen every object.
func (h *Handler) waitSynced(ctx context.Context) bool {
	deadline := time.Now().Add(syncWait)
	for !h.Ledger.Synced() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

var _ admission.Handler = (*Handler)(nil)
