package ccm

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
)

func TestRecordHubError(t *testing.T) {
	t.Parallel()
	lbs := schema.GroupResource{Group: "kubelb.k8c.io", Resource: "loadbalancers"}
	tests := []struct {
		name   string
		err    error
		reason string // "" = no Event
		up     bool   // hubAnswered
	}{
		{"forbidden", apierrors.NewForbidden(lbs, "x", errors.New("RBAC")), ReasonHubForbidden, false},
		{"unauthorized", apierrors.NewUnauthorized("token expired"), ReasonHubForbidden, false},
		{"quota", apierrors.NewForbidden(lbs, "x", errors.New("exceeded quota: kubelb-tenant, requested: count/loadbalancers.kubelb.k8c.io=1")), ReasonHubLimitExceeded, true},
		{"byte limit", apierrors.NewForbidden(lbs, "x", errors.New(`admission webhook "tenant-objects.kubelb.k8c.io" denied the request: tenant a's LoadBalancers and Routes may take 8388608 bytes`)), ReasonHubLimitExceeded, true},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "kubelb.k8c.io", Kind: "LoadBalancer"}, "x",
			field.ErrorList{field.Required(field.NewPath("spec"), "")}), ReasonLoadBalancerRejected, true},
		{"namespace missing", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "tenant-a"), ReasonTenantNamespaceMissing, true},
		{"object gone", apierrors.NewNotFound(lbs, "x"), "", true},
		{"conflict", apierrors.NewConflict(lbs, "x", errors.New("stale")), "", true},
		{"already exists", apierrors.NewAlreadyExists(lbs, "x"), "", true},
		{"transport", errors.New("dial tcp 10.0.0.1:6443: connect: connection refused"), ReasonHubUnreachable, false},
		{"server error", apierrors.NewInternalError(errors.New("etcd")), ReasonHubUnreachable, false},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), ReasonHubUnreachable, false},
		{"shutdown", context.Canceled, "", false},
	}
	for _, tc := range tests {
		rec := events.NewFakeRecorder(1)
		recordHubError(context.Background(), rec, &corev1.Service{}, actionMirror, "creating the LoadBalancer", tc.err)
		var got string
		select {
		case ev := <-rec.Events:
			got = ev
		default:
		}
		switch {
		case tc.reason == "" && got != "":
			t.Errorf("%s: unexpected Event %q", tc.name, got)
		case tc.reason != "" && !strings.Contains(got, " "+tc.reason+" "):
			t.Errorf("%s: Event %q, want reason %s", tc.name, got, tc.reason)
		}
		if hubAnswered(tc.err) != tc.up {
			t.Errorf("%s: hubAnswered = %v, want %v", tc.name, !tc.up, tc.up)
		}
	}
}

func TestRecordTruncatesNote(t *testing.T) {
	t.Parallel()
	rec := events.NewFakeRecorder(1)
	record(rec, &corev1.Service{}, corev1.EventTypeWarning, "R", "A", "%s", strings.Repeat("é", 2000))
	ev := <-rec.Events
	if len(ev) > maxNote+20 || !strings.HasSuffix(ev, "...") {
		t.Errorf("note not cut: %d bytes", len(ev))
	}
}
