package admission

import (
	"bytes"
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"

	"kubelb.dev/kubelb/internal/pki"
)

// ConfigurationName is the ValidatingWebhookConfiguration the kubelb-manager chart installs
// and the manager keeps the CA bundle of (the only one its RBAC lets it touch).
const ConfigurationName = "kubelb-tenant-objects"

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=kubelb-tenant-objects,verbs=get;update

// CABundle keeps caBundle of every webhook of the ValidatingWebhookConfiguration Name equal
// to the manager's CA, so the API server trusts the webhook's serving certificate (issued
// from that CA): at start and every Interval. A Runnable of the leader.
type CABundle struct {
	Client   client.Client
	Reader   client.Reader // an API reader: the manager does not cache webhook configurations
	Name     string
	CA       func() *pki.CA
	Interval time.Duration
	Log      logr.Logger
}

// Start implements manager.Runnable.
func (b *CABundle) Start(ctx context.Context) error {
	t := time.NewTicker(b.Interval)
	defer t.Stop()
	missing := false
	for {
		err := b.Sync(ctx)
		switch {
		case apierrors.IsNotFound(err):
			if !missing {
				b.Log.Info("the ValidatingWebhookConfiguration is missing: the API server does not ask the webhook, and tenants' byte limits are enforced only on what the manager serves", "name", b.Name)
			}
			missing = true
		case err != nil && ctx.Err() == nil:
			b.Log.Error(err, "keeping the admission webhook's CA bundle", "name", b.Name)
		default:
			missing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection is true: one writer.
func (b *CABundle) NeedLeaderElection() bool { return true }

// Sync sets the CA bundle once (no write when it is already right).
func (b *CABundle) Sync(ctx context.Context) error {
	ca := b.CA()
	if ca == nil {
		return fmt.Errorf("no CA loaded yet")
	}
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := b.Reader.Get(ctx, client.ObjectKey{Name: b.Name}, vwc); err != nil {
			return err
		}
		changed = false
		for i := range vwc.Webhooks {
			if !bytes.Equal(vwc.Webhooks[i].ClientConfig.CABundle, ca.CertPEM) {
				vwc.Webhooks[i].ClientConfig.CABundle = ca.CertPEM
				changed = true
			}
		}
		if !changed {
			return nil
		}
		return b.Client.Update(ctx, vwc)
	})
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return fmt.Errorf("setting the CA bundle of ValidatingWebhookConfiguration %s: %w", b.Name, err)
	}
	if !changed {
		return nil
	}
	b.Log.Info("set the admission webhook's CA bundle", "name", b.Name, "ca", ca.Fingerprint())
	return nil
}
