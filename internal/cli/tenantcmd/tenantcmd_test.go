package tenantcmd_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/cli/tenantcmd"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// run runs `kubectl kubelb tenant <args>` and returns its output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := cli.NewRoot(cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, tenantcmd.Command)
	root.SetArgs(append([]string{"tenant"}, args...))
	err := root.Execute()
	t.Logf("tenant %v:\n%s(error: %v)", args, out.String(), err)
	return out.String(), err
}

// ccmClient is a client of the hub with the kubeconfig in the tenant cluster's Secret
// kubelb/kubelb-cluster, as the ccm would read it.
func ccmClient(t *testing.T, tenantCluster client.Client) (client.Client, error) {
	t.Helper()
	sec := &corev1.Secret{}
	if err := tenantCluster.Get(context.Background(), client.ObjectKey{Namespace: "kubelb", Name: "kubelb-cluster"}, sec); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(sec.Data["kubelb"])
	if err != nil {
		return nil, err
	}
	return cli.NewClient(cfg)
}

// listInTenantNamespace is what a ccm does first: list its LoadBalancers in its namespace.
func listInTenantNamespace(c client.Client) error {
	return c.List(context.Background(), &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace("tenant-shop"))
}

// TestTenantOnboardRevokeKubeconfig: onboard writes a kubeconfig into the tenant cluster that
// reaches the hub; revoke deletes it there and makes its token stop working; kubeconfig
// copies the new one the manager makes, which works.
func TestTenantOnboardRevokeKubeconfig(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	tenantCluster := testenv.Start(t, "shop", testenv.Options{})
	framework.StartSystem(t, hub, framework.Options{})
	flags := []string{"--kubeconfig", hub.Kubeconfig, "--tenant-kubeconfig", tenantCluster.Kubeconfig}

	out, err := run(t, append([]string{"onboard", "shop"}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"✓ Tenant shop created on the hub", "✓ the manager wrote the ccm's kubeconfig (tenant-shop/kubelb-ccm-kubeconfig; its token expires ",
		"✓ Secret kubelb/kubelb-cluster (key kubelb) written in the tenant cluster"} {
		if !strings.Contains(out, want) {
			t.Errorf("onboard printed no %q", want)
		}
	}
	old, err := ccmClient(t, tenantCluster.Client)
	if err != nil {
		t.Fatal(err)
	}
	if err := listInTenantNamespace(old); err != nil {
		t.Fatalf("the onboarded kubeconfig does not reach the hub: %v", err)
	}

	if _, err := run(t, append([]string{"revoke", "shop"}, flags...)...); err != nil {
		t.Fatal(err)
	}
	if _, err := ccmClient(t, tenantCluster.Client); !apierrors.IsNotFound(err) {
		t.Errorf("the copy in the tenant cluster after revoke: %v, want NotFound", err)
	}
	// The API server may accept a revoked token from its cache for up to 10 s.
	testsupport.Eventually(t, 30*time.Second, "the revoked token to stop working", func() error {
		if err := listInTenantNamespace(old); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("listing with the revoked token: %v", err)
		}
		return nil
	})

	out, err = run(t, append([]string{"kubeconfig", "shop"}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "✓ Secret kubelb/kubelb-cluster (key kubelb) written in the tenant cluster") {
		t.Errorf("kubeconfig printed no write")
	}
	renewed, err := ccmClient(t, tenantCluster.Client)
	if err != nil {
		t.Fatal(err)
	}
	if err := listInTenantNamespace(renewed); err != nil {
		t.Errorf("the kubeconfig copied after the revocation does not reach the hub: %v", err)
	}

	// Without a tenant cluster, onboard says what is missing; with an unknown tenant, the wait
	// for its kubeconfig ends naming the cause.
	if _, err := run(t, "kubeconfig", "shop", "--kubeconfig", hub.Kubeconfig); err == nil || !strings.Contains(err.Error(), "--tenant-kubeconfig or --tenant-context") {
		t.Errorf("kubeconfig without a tenant cluster: %v", err)
	}
	if _, err := run(t, append([]string{"kubeconfig", "nobody", "--timeout", "2s"}, flags...)...); err == nil || !strings.Contains(err.Error(), "there is no Tenant nobody") {
		t.Errorf("kubeconfig of an unknown tenant: %v", err)
	}
}
