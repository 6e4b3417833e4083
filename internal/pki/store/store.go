// Package store keeps the xDS CA of internal/pki in a Secret of the manager's namespace and
// holds each replica's xDS server credentials (Authority).
package store

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/pki"
)

// EnsureCA returns the CA kept in Secret pki.CASecretName of namespace, making it when it is
// absent. Several replicas may do this at once: whoever loses the create reads the winner's
// CA back (from r, which must not be a cache that may lag: use an API reader). A Secret that
// holds no valid CA is an error, never overwritten: delete it to make a new CA.
func EnsureCA(ctx context.Context, c client.Client, r client.Reader, namespace string) (*pki.CA, error) {
	key := types.NamespacedName{Namespace: namespace, Name: pki.CASecretName}
	sec := &corev1.Secret{}
	err := r.Get(ctx, key, sec)
	if apierrors.IsNotFound(err) {
		ca, cerr := pki.NewCA(time.Now())
		if cerr != nil {
			return nil, cerr
		}
		keyPEM, cerr := ca.KeyPEM()
		if cerr != nil {
			return nil, cerr
		}
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: pki.CASecretName, Namespace: namespace, Labels: map[string]string{
				kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue,
				pki.LabelXDSTLS:               "ca",
			}},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{pki.KeyCert: ca.CertPEM, pki.KeyKey: keyPEM},
		}
		cerr = c.Create(ctx, sec)
		if cerr == nil {
			return ca, nil
		}
		if !apierrors.IsAlreadyExists(cerr) {
			return nil, fmt.Errorf("creating the xDS CA Secret %s: %w", key, cerr)
		}
		// Another replica made it first: use that one.
		sec = &corev1.Secret{}
		err = r.Get(ctx, key, sec)
	}
	if err != nil {
		return nil, fmt.Errorf("getting the xDS CA Secret %s: %w", key, err)
	}
	return CAFromSecret(sec)
}

// CAFromSecret parses the CA of Secret pki.CASecretName.
func CAFromSecret(sec *corev1.Secret) (*pki.CA, error) {
	ca, err := pki.ParseCA(sec.Data[pki.KeyCert], sec.Data[pki.KeyKey])
	if err != nil {
		return nil, fmt.Errorf("reading the xDS CA from Secret %s/%s (delete it to make a new CA): %w", sec.Namespace, sec.Name, err)
	}
	return ca, nil
}

// RefreshInterval is how often a replica re-reads the CA Secret and checks its server
// certificate.
const RefreshInterval = 30 * time.Second

// Authority keeps one manager replica's xDS server credentials: the CA from the Secret and a
// server certificate for the xDS host issued from it, in memory. It re-reads the CA every
// RefreshInterval (a new CA — the Secret was deleted and made again — gives a new server
// certificate at once) and reissues the server certificate after pki.RenewFraction of its
// lifetime. ServerTLS hands the current material to each new TLS connection, so neither needs
// a restart.
type Authority struct {
	client    client.Client
	reader    client.Reader
	namespace string
	names     []string
	purpose   string
	log       logr.Logger
	now       func() time.Time

	mu      sync.RWMutex
	ca      *pki.CA
	server  *tls.Certificate
	renewAt time.Time
}

// NewAuthority returns the Authority of a replica: the CA Secret is in namespace (written
// with c, read with r, an API reader), and the server certificate names pki.ServerNames(xdsHost).
func NewAuthority(c client.Client, r client.Reader, namespace, xdsHost string, log logr.Logger) *Authority {
	return &Authority{client: c, reader: r, namespace: namespace, names: pki.ServerNames(xdsHost), purpose: "xDS server", log: log, now: time.Now}
}

// NewServingAuthority is NewAuthority for another server of the manager (purpose names it
// in logs and errors): its certificate, from the same CA, names pki.ServerNames(host).
func NewServingAuthority(c client.Client, r client.Reader, namespace, host, purpose string, log logr.Logger) *Authority {
	a := NewAuthority(c, r, namespace, host, log)
	a.purpose = purpose
	return a
}

// Refresh loads the CA (making it if absent) and issues a new server certificate when the CA
// changed or the current one is due for renewal.
func (a *Authority) Refresh(ctx context.Context) error {
	ca, err := EnsureCA(ctx, a.client, a.reader, a.namespace)
	if err != nil {
		return err
	}
	now := a.now()
	a.mu.RLock()
	same := a.ca != nil && a.ca.Fingerprint() == ca.Fingerprint()
	due := a.server == nil || !now.Before(a.renewAt)
	a.mu.RUnlock()
	if same && !due {
		return nil
	}
	cert, err := ca.IssueServer(a.names, now, pki.ServerLifetime)
	if err != nil {
		return fmt.Errorf("issuing the %s certificate: %w", a.purpose, err)
	}
	a.mu.Lock()
	a.ca, a.server, a.renewAt = ca, &cert, pki.RenewAt(cert.Leaf)
	a.mu.Unlock()
	a.log.Info(a.purpose+" certificate issued", "names", a.names, "ca", ca.Fingerprint(), "renewAt", a.renewAt.UTC())
	return nil
}

// Start refreshes at once and then every RefreshInterval until ctx is done
// (manager.Runnable). Errors are logged; the last good credentials stay.
func (a *Authority) Start(ctx context.Context) error {
	t := time.NewTicker(RefreshInterval)
	defer t.Stop()
	for {
		if err := a.Refresh(ctx); err != nil && ctx.Err() == nil {
			a.log.Error(err, "refreshing the "+a.purpose+" credentials")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection is false: every replica serves xDS (manager.LeaderElectionRunnable).
func (a *Authority) NeedLeaderElection() bool { return false }

// CA returns the CA last loaded, nil before the first Refresh.
func (a *Authority) CA() *pki.CA {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.ca
}

// ServerTLS is the TLS configuration of the xDS server: the current server certificate, and
// client certificates required and verified against the current CA.
func (a *Authority) ServerTLS() *tls.Config {
	return pki.ServerTLS(func() (*pki.CA, *tls.Certificate) {
		a.mu.RLock()
		defer a.mu.RUnlock()
		return a.ca, a.server
	})
}

// GetCertificate hands the current server certificate to a TLS server that does not ask for
// client certificates (tls.Config.GetCertificate), e.g. the admission webhook's.
func (a *Authority) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.server == nil {
		return nil, fmt.Errorf("no %s certificate yet", a.purpose)
	}
	return a.server, nil
}
