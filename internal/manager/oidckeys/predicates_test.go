package oidckeys

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"kubelb.dev/kubelb/api/v1alpha1"
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
