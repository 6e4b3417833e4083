package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/cli/tenantside"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestBackendsReachableEndToEnd: the real manager and ccm binaries, a tenant with two nodes
// and a real Envoy of the tenant's fleet (its bootstrap as the manager writes it, with
// health discovery). One node's NodePort does not answer: the tenant Service gets
// kubelb.k8c.io/BackendsReachable=False SomeBackendsUnreachable naming it, and
// `kubectl kubelb status svc/web` says so; once something listens there, True Reachable.
// The outputs are logged (the issue's closing note: "a tenant NodePort that does not
// answer").
func TestBackendsReachableEndToEnd(t *testing.T) {
	pair := testenv.StartPair(t)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("shop", pair.Tenant, 2)
	ctx := context.Background()

	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	a.WaitAddress("web", time.Minute)
	backends := a.StartBackends(web)
	backends["http"][1].Close() // the second node's NodePort does not answer
	a.StartEnvoy(framework.EnvoyBootstrap)
	dead := net.JoinHostPort(a.NodeIPs[1], fmt.Sprint(web.Spec.Ports[0].NodePort))
	live := net.JoinHostPort(a.NodeIPs[0], fmt.Sprint(web.Spec.Ports[0].NodePort))

	// The ccm's hub kubeconfig, as an app team would pass it.
	secret := &corev1.Secret{}
	if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, secret); err != nil {
		t.Fatal(err)
	}
	hubKubeconfig := filepath.Join(t.TempDir(), "hub")
	if err := os.WriteFile(hubKubeconfig, secret.Data[kubelbv1alpha1.CCMKubeconfigSecretKey], 0o600); err != nil {
		t.Fatal(err)
	}
	status := func() (string, error) {
		var out bytes.Buffer
		root := cli.NewRoot(cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, tenantside.StatusCommand)
		root.SetArgs([]string{"--kubeconfig", pair.Tenant.Kubeconfig, "--hub-kubeconfig", hubKubeconfig, "-n", "default", "status", "svc/web", "--hub-namespace", a.Namespace})
		err := root.Execute()
		return out.String(), err
	}
	waitService := func(st metav1.ConditionStatus, reason, msg, not string) {
		t.Helper()
		testsupport.Eventually(t, 2*time.Minute, "the Service's "+ccm.ConditionBackendsReachable+" "+reason, func() error {
			svc := &corev1.Service{}
			if err := pair.Tenant.Client.Get(ctx, client.ObjectKeyFromObject(web), svc); err != nil {
				return err
			}
			c := meta.FindStatusCondition(svc.Status.Conditions, ccm.ConditionBackendsReachable)
			if c == nil || c.Status != st || c.Reason != reason || !strings.Contains(c.Message, msg) || (not != "" && strings.Contains(c.Message, not)) {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
	}

	waitService(metav1.ConditionFalse, reach.ReasonSomeUnreachable, dead, live)
	out, err := status()
	t.Logf("a tenant NodePort that does not answer (%s): kubectl kubelb status svc/web\n%s", dead, out)
	if err == nil {
		t.Error("status succeeded with a NodePort the hub cannot reach")
	}
	for _, want := range []string{"✗ endpoints: BackendsReachable=False SomeBackendsUnreachable", dead, "first failing step: endpoints"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q", want)
		}
	}

	testsupport.StartTCPBackend(t, dead, testsupport.Identity{Node: "shop-node-1", Pod: "web-shop-node-1"})
	waitService(metav1.ConditionTrue, reach.ReasonReachable, "all 2 endpoints", "")
	out, err = status()
	t.Logf("after a listener started on %s: kubectl kubelb status svc/web\n%s", dead, out)
	if err != nil || !strings.Contains(out, "✓ endpoints: BackendsReachable (Reachable)") {
		t.Errorf("status after the recovery: %v", err)
	}
}
