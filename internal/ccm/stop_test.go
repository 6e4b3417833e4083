package ccm

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/nodeip"
	"kubelb.dev/kubelb/internal/testenv"
)

// TestStopDeployment: the release's stop scales the ccm's Deployment to 0 and returns only
// once its pods are gone (not before); a missing Deployment is nothing to stop; pods that
// stay make it fail when its context ends.
func TestStopDeployment(t *testing.T) {
	c := testenv.Start(t, "tenant", testenv.Options{WithoutKubelbCRDs: true})
	ctx := ctrl.LoggerInto(t.Context(), testr.New(t))
	labels := map[string]string{"app": "ccm"}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubelb"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kubelb", Name: "kubelb-ccm"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ccm", Image: "ccm"}}}}}},
		// The ccm's pod (no kubelet here: the test plays its end), and the release Job's own.
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubelb", Name: "ccm-1", Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ccm", Image: "ccm"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubelb", Name: "release", Labels: map[string]string{"app": "ccm-release"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "release", Image: "ccm"}}}},
	} {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	key := types.NamespacedName{Namespace: "kubelb", Name: "kubelb-ccm"}

	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := StopDeployment(short, c.Client, key); err == nil {
		t.Fatal("StopDeployment returned while the ccm's pod is still there")
	}
	dep := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, key, dep); err != nil || *dep.Spec.Replicas != 0 {
		t.Fatalf("Deployment after the stop: replicas %v, %v", dep.Spec.Replicas, err)
	}

	done := make(chan error, 1)
	go func() { done <- StopDeployment(ctx, c.Client, key) }()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubelb", Name: "ccm-1"}}
	if err := c.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("StopDeployment: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("StopDeployment did not return after the ccm's pod went")
	}
	if err := StopDeployment(ctx, c.Client, types.NamespacedName{Namespace: "kubelb", Name: "absent"}); err != nil {
		t.Errorf("StopDeployment of a missing Deployment: %v", err)
	}
}

// TestReleaseStandalone: in standalone mode the release clears the address and condition the
// address provider gave the Services of the ccm's class, leaves another class's Service alone,
// deletes the NAT shadow Services, and a second run does nothing.
func TestReleaseStandalone(t *testing.T) {
	c := testenv.Start(t, "standalone", testenv.Options{WithoutKubelbCRDs: true})
	ctx := ctrl.LoggerInto(t.Context(), testr.New(t))
	withStatus := func(name string, class *string) *corev1.Service {
		t.Helper()
		svc := lbService("default", name)
		svc.Spec.LoadBalancerClass = class
		if err := c.Client.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.7", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
		meta.SetStatusCondition(&svc.Status.Conditions, lbaddress.Condition(svc.Generation, 1, "", ""))
		if err := c.Client.Status().Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
		return svc
	}
	withStatus("web", nil)
	withStatus("other", ptr.To("example.com/other"))
	shadow := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: nodeip.ShadowName("web"),
		Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue, nodeip.LabelNATShadowOf: "web"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := c.Client.Create(ctx, shadow); err != nil {
		t.Fatal(err)
	}

	rep, err := ReleaseStandalone(ctx, c.Config, testenv.Scheme(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Summary())
	if len(rep.Services) != 1 || rep.Services[0] != "default/web" || len(rep.Shadows) != 1 {
		t.Errorf("report %+v", rep)
	}
	for name, cleared := range map[string]bool{"web": true, "other": false} {
		svc := &corev1.Service{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
			t.Fatal(err)
		}
		has := len(svc.Status.LoadBalancer.Ingress) > 0 && meta.FindStatusCondition(svc.Status.Conditions, lbaddress.ConditionAddressAssigned) != nil
		if has == cleared {
			t.Errorf("Service %s: status %+v (want cleared: %v)", name, svc.Status, cleared)
		}
	}
	// A Service has no finalizer of its own: deleted is gone.
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(shadow), &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the NAT shadow Service: %v, want gone", err)
	}
	again, err := ReleaseStandalone(ctx, c.Config, testenv.Scheme(), false)
	if err != nil || len(again.Services)+len(again.Shadows) != 0 {
		t.Errorf("second release: %+v, %v", again, err)
	}
}
