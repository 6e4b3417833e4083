package checkhub_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/cli/checkhub"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// run runs `kubectl kubelb check hub` against the hub with args and returns its output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := cli.NewRoot(cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out},
		cli.Group("check", "checks", checkhub.Command))
	root.SetArgs(append([]string{"check", "hub"}, args...))
	err := root.Execute()
	t.Logf("check hub %v:\n%s(error: %v)", args, out.String(), err)
	return out.String(), err
}

// TestCheckHub: on a hub with the real manager and a Ready tenant every check passes; a hub
// Service of a class nobody serves fails the check, naming the class.
func TestCheckHub(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	sys := framework.StartSystem(t, hub, framework.Options{})
	ctx := context.Background()
	c := hub.Client

	// The manager runs as a process here; its Deployment is what the chart would make, with
	// the status a kubelet would give it.
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: "kubelb-manager"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "kubelb-manager"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "kubelb-manager"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "manager", Image: "kubelb-manager:test", Args: sys.ManagerArgs,
				}}},
			},
		},
	}
	if err := c.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	dep.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	if err := c.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, time.Minute, "Tenant shop Ready", func() error {
		tn := &kubelbv1alpha1.Tenant{}
		if err := c.Get(ctx, client.ObjectKey{Name: "shop"}, tn); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(tn.Status.Conditions, "Ready") {
			return errNotYet
		}
		return nil
	})

	// The manager's lease and version may lag its readiness by a moment.
	var out string
	testsupport.Eventually(t, time.Minute, "check hub to pass", func() error {
		var err error
		out, err = run(t, "--kubeconfig", hub.Kubeconfig)
		return err
	})
	for _, want := range []string{
		"✓ manager: kubelb/kubelb-manager: 1 of 1 replicas ready",
		"✓ leader: ", "✓ CRDs: the 8 CRDs of kubelb match this plugin's", "✓ xDS CA: expires ",
		"✓ tenant shop: Ready; no Envoy fleet yet", "- xDS connections: ",
		"✓ rejected configurations: ", "✓ listener ports: 10000 of 10000 left in 10000-19999",
		"✓ settings not implemented yet: none in use",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check hub printed no %q", want)
		}
	}

	// A hub Service of a class nobody on this hub serves.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-shop", Name: "waits"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: ptr.To("example.com/nobody"),
			Ports: []corev1.ServicePort{{Port: 80}},
		},
	}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "--kubeconfig", hub.Kubeconfig, "--manager-namespace", framework.ManagerNamespace)
	if err == nil {
		t.Fatal("check hub passed with a hub Service waiting for an address")
	}
	for _, want := range []string{
		"✗ hub Service addresses: 1 hub Service of class example.com/nobody waiting for an address (tenant-shop/waits); nobody serves Services of class example.com/nobody",
		"    → run a load balancer for them on the hub",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check hub printed no %q", want)
		}
	}
	if !strings.Contains(err.Error(), "1 of the hub's checks failed") {
		t.Errorf("error %q", err)
	}

	// The built plugin exits 1, with the error on stderr and no Go stack.
	cmd := exec.Command(testsupport.BuildBinary(t, "./cmd/kubectl-kubelb"), "check", "hub", "--kubeconfig", hub.Kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("kubectl-kubelb check hub: %v, want exit status 1", err)
	}
	if stderr.String() != "Error: 1 of the hub's checks failed\n" || !strings.Contains(stdout.String(), "nobody serves Services of class example.com/nobody") {
		t.Errorf("kubectl-kubelb check hub printed\n%s\nand on stderr\n%s", stdout.String(), stderr.String())
	}
}

var errNotYet = stringError("not yet")

type stringError string

func (e stringError) Error() string { return string(e) }
