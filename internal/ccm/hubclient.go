package ccm

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-logr/logr"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/hubschema"
	"kubelb.dev/kubelb/internal/metrics"
)

// Operations of the ccm on the hub, the values of the "operation" label.
const (
	opCreate = "create"
	opUpdate = "update"
	opPatch  = "patch"
	opDelete = "delete"
	opList   = "list"
)

// hubClient is the hub client of the ccm: reads come from the hub cache (no request), writes
// go to the hub API server and are counted and timed (CCMOperations, CCMOperationDuration);
// each answer sets CCMClusterConnected.
//
// Server-side applies are cut to the hub's schema first (hubschema): a field the hub's CRDs do
// not declare — kubelb's additions on a KubeLB CE or older kubelb hub — is left out, logged
// once per kind and set of fields and counted (CCMHubFieldsLeftOut), instead of the hub
// refusing the whole object.
type hubClient struct {
	client.Client
	schema   *hubschema.Loader
	log      logr.Logger
	reported hubschema.Reported
}

// newHubClient wraps the client of the hub cluster; schema (nil: none) is the hub's, whose
// LeftOut it takes.
func newHubClient(c client.Client, schema *hubschema.Loader, log logr.Logger) *hubClient {
	hc := &hubClient{Client: c, schema: schema, log: log}
	if schema != nil {
		schema.LeftOut = hc.leftOut
	}
	return hc
}

// leftOut counts the fields left out of an object of kind for the hub, and logs each set of
// them once per kind.
func (c *hubClient) leftOut(kind string, removed []string) {
	for _, p := range removed {
		metrics.CCMHubFieldsLeftOut.WithLabelValues(kind, p).Inc()
	}
	if c.reported.Changed(kind, strings.Join(removed, ",")) {
		c.log.Info(hubschema.Describe(kind, removed, nil), "kind", kind, "fields", removed)
	}
}

// observeHub records one request to the hub.
func observeHub(op string, start time.Time, err error) {
	metrics.CCMOperations.WithLabelValues(op, metrics.Result(err)).Inc()
	metrics.CCMOperationDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if hubAnswered(err) {
		metrics.CCMClusterConnected.Set(1)
	} else {
		metrics.CCMClusterConnected.Set(0)
	}
}

// hubAnswered tells whether the hub did its job: success, or an answer that is part of normal
// operation (not found, already exists, conflict, invalid, a tenant limit reached). Transport
// errors, other 401 and 403 and server errors count as "not connected".
func hubAnswered(err error) bool {
	return err == nil || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) ||
		apierrors.IsConflict(err) || apierrors.IsInvalid(err) || hubLimitExceeded(err)
}

// isAPIError tells whether err is an answer of an API server (as opposed to a transport error).
func isAPIError(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s)
}

// Create creates obj on the hub.
func (c *hubClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	start := time.Now()
	err := c.Client.Create(ctx, obj, opts...)
	observeHub(opCreate, start, err)
	return err
}

// Update updates obj on the hub.
func (c *hubClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	start := time.Now()
	err := c.Client.Update(ctx, obj, opts...)
	observeHub(opUpdate, start, err)
	return err
}

// Patch patches obj on the hub.
func (c *hubClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	start := time.Now()
	err := c.Client.Patch(ctx, obj, patch, opts...)
	observeHub(opPatch, start, err)
	return err
}

// Apply applies obj on the hub (server-side apply, a PATCH request: counted as a patch).
func (c *hubClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if u, ok := obj.(interface{ UnstructuredContent() map[string]any }); ok {
		content := u.UnstructuredContent()
		kind, _ := content["kind"].(string)
		c.schema.Prune(kind, content)
	}
	start := time.Now()
	err := c.Client.Apply(ctx, obj, opts...)
	observeHub(opPatch, start, err)
	if err != nil && strings.Contains(err.Error(), "field not declared in schema") {
		// The hub's CRDs changed under us (downgraded): read them again.
		c.schema.Refresh()
	}
	return err
}

// Delete deletes obj on the hub.
func (c *hubClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	start := time.Now()
	err := c.Client.Delete(ctx, obj, opts...)
	observeHub(opDelete, start, err)
	return err
}

// DeleteAllOf is not used by the ccm; it is counted like Delete all the same.
func (c *hubClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	start := time.Now()
	err := c.Client.DeleteAllOf(ctx, obj, opts...)
	observeHub(opDelete, start, err)
	return err
}

// hubReader wraps the hub's uncached reader for the connectivity probe.
type hubReader struct {
	client.Reader
}

// List lists from the hub API server.
func (r hubReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	start := time.Now()
	err := r.Reader.List(ctx, list, opts...)
	observeHub(opList, start, err)
	return err
}
