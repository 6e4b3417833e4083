// Package tenantcmd is `kubectl kubelb tenant onboard|kubeconfig|revoke`: the platform team
// creates a Tenant on the hub and has the kubeconfig the manager writes for the tenant's ccm
// copied straight into the tenant cluster (never to disk), copies it again after a
// revocation, and revokes every token of a tenant.
package tenantcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/tenant"
)

// Copy is where the ccm's kubeconfig goes in the tenant cluster: the Secret the kubelb-ccm
// chart reads (values kubelb.kubeconfigSecretName and kubelb.kubeconfigSecretKey) in the
// ccm's namespace.
type Copy struct {
	// Client of the tenant cluster; nil: no tenant cluster was named.
	Client               client.Client
	Namespace, Name, Key string
}

func (c Copy) String() string { return c.Namespace + "/" + c.Name }

// Onboard creates Tenant name on the hub (or keeps the one there), waits up to timeout for
// the manager to write the ccm's kubeconfig and writes it into the tenant cluster.
func Onboard(ctx context.Context, hub client.Client, name string, dst Copy, timeout time.Duration, out io.Writer) error {
	t := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}}
	switch err := hub.Create(ctx, t); {
	case err == nil:
		fmt.Fprintf(out, "✓ Tenant %s created on the hub\n", name)
	case apierrors.IsAlreadyExists(err):
		fmt.Fprintf(out, "✓ Tenant %s is on the hub already\n", name)
	default:
		return fmt.Errorf("creating Tenant %s on the hub: %w", name, err)
	}
	if err := CopyKubeconfig(ctx, hub, name, dst, timeout, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "  next: helm install kubelb-ccm charts/kubelb-ccm -n %s --set kubelb.tenantName=%s\n", dst.Namespace, name)
	return nil
}

// CopyKubeconfig waits up to timeout for the hub's current kubeconfig of tenant name (one
// whose token belongs to the tenant's current ServiceAccount) and writes it into dst.
func CopyKubeconfig(ctx context.Context, hub client.Client, name string, dst Copy, timeout time.Duration, out io.Writer) error {
	if dst.Client == nil {
		return errors.New("name the tenant cluster to write the kubeconfig into: --tenant-kubeconfig or --tenant-context")
	}
	sec, err := waitKubeconfig(ctx, hub, name, timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "✓ the manager wrote the ccm's kubeconfig (%s/%s; its token expires %s)\n",
		sec.Namespace, sec.Name, sec.Annotations[tenant.AnnotationTokenExpiresAt])
	if err := write(ctx, dst, sec.Data[kubelbv1alpha1.CCMKubeconfigSecretKey]); err != nil {
		return err
	}
	fmt.Fprintf(out, "✓ Secret %s (key %s) written in the tenant cluster\n", dst, dst.Key)
	fmt.Fprintf(out, "  a running ccm takes the new copy by itself\n")
	return nil
}

// waitKubeconfig returns the hub's kubeconfig Secret of tenant name once its token belongs
// to the tenant's current ServiceAccount (after a revocation the old Secret stays until the
// manager re-creates the ServiceAccount).
func waitKubeconfig(ctx context.Context, hub client.Client, name string, timeout time.Duration) (*corev1.Secret, error) {
	ns := hubnames.TenantNamespace(name)
	var sec *corev1.Secret
	// The reads use ctx, not the poll's context: a read the deadline cuts short is no error.
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		sa := &corev1.ServiceAccount{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenant.ServiceAccountName}, sa); err != nil {
			return false, ignoreMissing(err)
		}
		s := &corev1.Secret{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, s); err != nil {
			return false, ignoreMissing(err)
		}
		if len(s.Data[kubelbv1alpha1.CCMKubeconfigSecretKey]) == 0 || s.Annotations[tenant.AnnotationServiceAccountUID] != string(sa.UID) {
			return false, nil // the manager has not written the current ServiceAccount's token yet
		}
		sec = s
		return true, nil
	})
	if err == nil {
		return sec, nil
	}
	if !wait.Interrupted(err) {
		return nil, fmt.Errorf("reading the kubeconfig of tenant %s on the hub: %w", name, err)
	}
	why := ""
	t := &kubelbv1alpha1.Tenant{}
	if gerr := hub.Get(ctx, client.ObjectKey{Name: name}, t); gerr == nil {
		if c := meta.FindStatusCondition(t.Status.Conditions, tenant.ConditionReady); c != nil {
			why = fmt.Sprintf(" (Tenant %s: phase %s, %s: %s)", name, t.Status.Phase, c.Reason, c.Message)
		} else {
			why = fmt.Sprintf(" (Tenant %s has no status: is the manager running? kubectl kubelb check hub)", name)
		}
	} else if apierrors.IsNotFound(gerr) {
		why = fmt.Sprintf(" (there is no Tenant %s: kubectl kubelb tenant onboard %s)", name, name)
	}
	return nil, fmt.Errorf("the manager wrote no current kubeconfig Secret %s/%s within %s%s",
		ns, kubelbv1alpha1.CCMKubeconfigSecretName, timeout, why)
}

// ignoreMissing lets polling go on over a NotFound and stops it over any other error.
func ignoreMissing(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// write puts kubeconfig into the Secret of dst, making its namespace when missing.
func write(ctx context.Context, dst Copy, kubeconfig []byte) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dst.Namespace}}
	if err := dst.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("creating namespace %s in the tenant cluster: %w", dst.Namespace, err)
	}
	sec := &corev1.Secret{}
	err := dst.Client.Get(ctx, client.ObjectKey{Namespace: dst.Namespace, Name: dst.Name}, sec)
	if apierrors.IsNotFound(err) {
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: dst.Namespace, Name: dst.Name},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{dst.Key: kubeconfig},
		}
		if err := dst.Client.Create(ctx, sec); err != nil {
			return fmt.Errorf("creating Secret %s in the tenant cluster: %w", dst, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Secret %s in the tenant cluster: %w", dst, err)
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[dst.Key] = kubeconfig
	if err := dst.Client.Update(ctx, sec); err != nil {
		return fmt.Errorf("updating Secret %s in the tenant cluster: %w", dst, err)
	}
	return nil
}

// Revoke makes every token of tenant name stop working: it deletes the tenant's ServiceAccount
// on the hub (tokens are bound to its UID; the manager makes a new one, with a new kubeconfig,
// 12 s later), then the Tenant when deleteTenant, then the copy in the tenant cluster when
// dst names one.
func Revoke(ctx context.Context, hub client.Client, name string, dst Copy, deleteTenant bool, out io.Writer) error {
	ns := hubnames.TenantNamespace(name)
	if err := hub.Get(ctx, client.ObjectKey{Name: name}, &kubelbv1alpha1.Tenant{}); err != nil {
		return fmt.Errorf("reading Tenant %s on the hub: %w", name, err)
	}
	sa := &corev1.ServiceAccount{}
	err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenant.ServiceAccountName}, sa)
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(out, "✓ ServiceAccount %s/%s is gone already: no token of it works\n", ns, tenant.ServiceAccountName)
	case err != nil:
		return fmt.Errorf("reading ServiceAccount %s/%s on the hub: %w", ns, tenant.ServiceAccountName, err)
	default:
		if err := hub.Delete(ctx, sa, client.Preconditions{UID: &sa.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting ServiceAccount %s/%s on the hub: %w", ns, tenant.ServiceAccountName, err)
		}
		fmt.Fprintf(out, "✓ ServiceAccount %s/%s deleted: every token of it stops working within 10 s\n", ns, tenant.ServiceAccountName)
	}
	if deleteTenant {
		if err := hub.Delete(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Tenant %s on the hub: %w", name, err)
		}
		fmt.Fprintf(out, "✓ Tenant %s deleted: the manager takes its namespace %s apart\n", name, ns)
	}
	if dst.Client == nil {
		fmt.Fprintf(out, "! the copy in the tenant cluster was left: name the cluster with --tenant-kubeconfig or --tenant-context to delete it\n")
	} else {
		err := dst.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dst.Namespace, Name: dst.Name}})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Secret %s in the tenant cluster: %w", dst, err)
		}
		fmt.Fprintf(out, "✓ Secret %s deleted in the tenant cluster\n", dst)
	}
	if !deleteTenant {
		fmt.Fprintf(out, "  next: the manager makes a new ServiceAccount and kubeconfig in about 12 s; give the ccm the new one with\n"+
			"  kubectl kubelb tenant kubeconfig %s --tenant-context <its cluster>\n", name)
	}
	return nil
}
