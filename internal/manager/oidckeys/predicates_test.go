package oidckeys

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
)

// TestLoginsChanged: the controller hears of a tenant's Routes only when the logins they carry
// may change: a Route with a SecurityPolicy with oidc made or deleted, its policy changed or
// its deletion started; not a Route without one, nor a status write, nor another namespace.
func TestLoginsChanged(t *testing.T) {
	p := loginsChanged()
	route := func(ns, policy string) *v1alpha1.Route {
		r := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"}}
		r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Context: &v1alpha1.SourceContext{}}
		if policy != "" {
			r.Spec.Source.Kubernetes.Context.Security = &v1alpha1.Security{Namespace: "app", Name: policy, OIDC: &v1alpha1.SecurityOIDC{}}
		}
		return r
	}
	login, other, none := route("tenant-a", "login"), route("tenant-a", "other"), route("tenant-a", "")
	status := login.DeepCopy()
	status.Status.Resources.Source = "x"
	going := login.DeepCopy()
	now := metav1.Now()
	going.DeletionTimestamp = &now
	for name, tc := range map[string]struct{ got, want bool }{
		"created with a login":   {p.Create(event.CreateEvent{Object: login}), true},
		"created without":        {p.Create(event.CreateEvent{Object: none}), false},
		"deleted with a login":   {p.Delete(event.DeleteEvent{Object: login}), true},
		"another policy":         {p.Update(event.UpdateEvent{ObjectOld: login, ObjectNew: other}), true},
		"the login dropped":      {p.Update(event.UpdateEvent{ObjectOld: login, ObjectNew: none}), true},
		"status only":            {p.Update(event.UpdateEvent{ObjectOld: login, ObjectNew: status}), false},
		"deletion started":       {p.Update(event.UpdateEvent{ObjectOld: login, ObjectNew: going}), true},
		"not a tenant namespace": {p.Create(event.CreateEvent{Object: route("kube-system", "login")}), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", name, tc.got, tc.want)
		}
	}
}

// TestTenantNamespaceAppeared: every tenant namespace kubelb made is planned once when it
// appears (or is listed at start), with or without logins; not a namespace of another name or
// one kubelb did not make, nor a namespace's updates or deletion.
func TestTenantNamespaceAppeared(t *testing.T) {
	p := tenantNamespaceAppeared()
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	tenant := ns("tenant-a", hubnames.TenantLabels("a"))
	for name, tc := range map[string]struct{ got, want bool }{
		"a tenant namespace appears":  {p.Create(event.CreateEvent{Object: tenant}), true},
		"not kubelb's":                {p.Create(event.CreateEvent{Object: ns("tenant-x", nil)}), false},
		"another namespace":           {p.Create(event.CreateEvent{Object: ns("kube-system", hubnames.TenantLabels("a"))}), false},
		"a tenant namespace updated":  {p.Update(event.UpdateEvent{ObjectOld: tenant, ObjectNew: tenant}), false},
		"a tenant namespace deleted":  {p.Delete(event.DeleteEvent{Object: tenant}), false},
		"a tenant namespace, generic": {p.Generic(event.GenericEvent{Object: tenant}), true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", name, tc.got, tc.want)
		}
	}
}
