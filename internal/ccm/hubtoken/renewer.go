// Package hubtoken keeps the ccm's hub credentials alive. The kubeconfig the manager makes
// for a tenant carries a ServiceAccount token from the TokenRequest API that expires (24 h by
// default); the ccm reads it once at start. The Renewer serves the current token to every hub
// request, asks the hub for a new one for its own ServiceAccount after 80% of the token's
// lifetime (and at once when the hub answers 401), switches to it without restarting
// anything, and writes it back into the tenant Secret the kubeconfig came from, so that a
// restarted ccm starts from a fresh token.
package hubtoken

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"kubelb.dev/kubelb/internal/metrics"
)

// opToken is the "operation" label of TokenRequests in the ccm's hub request metrics.
const opToken = "token"

// Options configure the Renewer (from cmd/ccm flags).
type Options struct {
	// Secret is the Secret in the tenant cluster the hub kubeconfig came from (the ccm chart's
	// kubelb-cluster). Every renewed token is written back into it, so a restarted ccm starts
	// from a fresh token; a newer token found there (another replica's, or a fresh copy from
	// the hub) is taken over. Empty: renewal in memory only.
	Secret types.NamespacedName
	// SecretKey is the key of the kubeconfig in Secret; default DefaultSecretKey.
	SecretKey string
	// RenewAfterFraction of a token's lifetime passes before it is renewed; default
	// DefaultRenewAfterFraction. Tests lower it to renew within seconds.
	RenewAfterFraction float64
	// Logger logs renewals and failures; Setup uses the manager's.
	Logger logr.Logger
}

func (o Options) withDefaults() Options {
	if o.SecretKey == "" {
		o.SecretKey = DefaultSecretKey
	}
	if o.RenewAfterFraction == 0 {
		o.RenewAfterFraction = DefaultRenewAfterFraction
	}
	return o
}

// token is one hub token and when the renewer started to use it.
type token struct {
	raw       string
	claims    Claims
	installed time.Time
}

// tokenSource hands the current token to client-go's token transport
// (transport.ResettableTokenSourceWrapTransport), which sets it on every request and calls
// ResetTokenOlderThan when the hub answers 401.
type tokenSource struct {
	cur          atomic.Pointer[token]
	unauthorized chan struct{}
}

var _ transport.ResettableTokenSource = (*tokenSource)(nil)

// Token returns the current token.
func (s *tokenSource) Token() (*oauth2.Token, error) {
	t := s.cur.Load()
	return &oauth2.Token{AccessToken: t.raw, TokenType: "Bearer", Expiry: t.claims.ExpiresAt}, nil
}

// ResetTokenOlderThan is called after a 401 to a request sent at at: when the current token
// was in use then, the renewer is told to act now.
func (s *tokenSource) ResetTokenOlderThan(at time.Time) {
	if s.cur.Load().installed.Before(at) {
		select {
		case s.unauthorized <- struct{}{}:
		default:
		}
	}
}

func (s *tokenSource) install(raw string, c Claims, at time.Time) {
	s.cur.Store(&token{raw: raw, claims: c, installed: at})
}

// Renewer keeps the ccm's hub token fresh. It is a manager.Runnable that runs on every replica
// (each replica's hub client needs a valid token, leader or not).
type Renewer struct {
	src     *tokenSource
	base    *rest.Config // as loaded, for rendering a kubeconfig from scratch
	wrapped *rest.Config // serves src's token
	hub     typedcorev1.ServiceAccountsGetter
	secrets typedcorev1.SecretsGetter
	opts    Options
	log     logr.Logger
	first   time.Time // when the initial token is due
	now     func() time.Time
}

// New makes a Renewer for the bearer token in hubCfg (BearerToken, or the file
// BearerTokenFile names). secrets reaches the tenant cluster's Secrets; it is needed only
// with Options.Secret. It fails with ErrNotServiceAccountToken when hubCfg carries no
// ServiceAccount token with an expiry (client certificates, an exec plugin, a legacy token):
// there is nothing to renew.
func New(hubCfg *rest.Config, secrets typedcorev1.SecretsGetter, opts Options) (*Renewer, error) {
	opts = opts.withDefaults()
	if opts.RenewAfterFraction <= 0 || opts.RenewAfterFraction >= 1 {
		return nil, fmt.Errorf("hub token renewal: RenewAfterFraction %v must be between 0 and 1", opts.RenewAfterFraction)
	}
	if opts.Secret.Name != "" && secrets == nil {
		return nil, errors.New("hub token renewal: a Secret to write back to needs a tenant client")
	}
	raw := hubCfg.BearerToken
	if raw == "" && hubCfg.BearerTokenFile != "" {
		b, err := os.ReadFile(hubCfg.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("hub token renewal: reading the token file %s: %w", hubCfg.BearerTokenFile, err)
		}
		raw = strings.TrimSpace(string(b))
	}
	if raw == "" {
		return nil, fmt.Errorf("%w: the hub kubeconfig has no bearer token", ErrNotServiceAccountToken)
	}
	claims, err := ParseToken(raw)
	if err != nil {
		return nil, err
	}
	r := &Renewer{
		src:     &tokenSource{unauthorized: make(chan struct{}, 1)},
		base:    rest.CopyConfig(hubCfg),
		secrets: secrets,
		opts:    opts,
		log:     opts.Logger,
		now:     time.Now,
	}
	r.src.install(raw, claims, r.now())
	r.first = initialRenewAt(claims, r.now(), opts.RenewAfterFraction)

	// The static token gives way to the token source: client-go would otherwise set it first.
	r.wrapped = rest.CopyConfig(hubCfg)
	r.wrapped.BearerToken, r.wrapped.BearerTokenFile = "", ""
	r.wrapped.Wrap(transport.ResettableTokenSourceWrapTransport(r.src))
	cs, err := kubernetes.NewForConfig(r.wrapped)
	if err != nil {
		return nil, fmt.Errorf("hub token renewal: creating the hub client: %w", err)
	}
	r.hub = cs.CoreV1()
	return r, nil
}

// Setup makes a Renewer for hubCfg's token, adds it to mgr (a manager of the tenant cluster,
// whose client writes Options.Secret) and returns the config every hub client must use from
// now on: it sends the current token. When hubCfg carries no ServiceAccount token with an
// expiry, it logs why and returns hubCfg as it is.
func Setup(mgr ctrl.Manager, hubCfg *rest.Config, opts Options) (*rest.Config, error) {
	if opts.Logger.GetSink() == nil {
		opts.Logger = mgr.GetLogger().WithName("hubtoken")
	}
	var secrets typedcorev1.SecretsGetter
	if opts.Secret.Name != "" {
		// A plain client: the ccm may read and write this one Secret, not list or watch Secrets.
		cs, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
		if err != nil {
			return nil, fmt.Errorf("hub token renewal: creating the tenant client: %w", err)
		}
		secrets = cs.CoreV1()
	}
	r, err := New(hubCfg, secrets, opts)
	if errors.Is(err, ErrNotServiceAccountToken) {
		opts.Logger.Info("hub credentials are not a ServiceAccount token that expires; nothing to renew", "reason", err.Error())
		return hubCfg, nil
	}
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(r); err != nil {
		return nil, err
	}
	return r.Config(), nil
}

// Config returns a copy of the hub config that sends the current token with every request.
func (r *Renewer) Config() *rest.Config { return rest.CopyConfig(r.wrapped) }

// Current returns the token in use and its claims.
func (r *Renewer) Current() (string, Claims) {
	t := r.src.cur.Load()
	return t.raw, t.claims
}

// NeedLeaderElection is false: every replica's hub client needs a valid token.
func (r *Renewer) NeedLeaderElection() bool { return false }

// Start renews the token until ctx ends. Failures are logged, reported by
// kubelb_ccm_kubelb_cluster_connected, and retried with back-off; they never stop the ccm.
func (r *Renewer) Start(ctx context.Context) error {
	_, c := r.Current()
	r.log.Info("renewing the hub token", "serviceAccount", c.Namespace+"/"+c.ServiceAccount,
		"expiresAt", stamp(c.ExpiresAt), "renewAt", stamp(r.first), "secret", r.secretName())
	p := plan{renewAt: r.first}
	renewBackoff, writeBackoff := newBackoff(), newBackoff()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		now := r.now()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(max(p.next(now).Sub(now), 0))
		select {
		case <-ctx.Done():
			return nil
		case <-r.src.unauthorized:
			p.unauthorized = true
			continue
		case <-timer.C:
		}

		now = r.now()
		if !now.Before(p.renewDue(now)) {
			if r.renew(ctx, &p) {
				renewBackoff = newBackoff()
			} else {
				p.retryAt = r.now().Add(renewBackoff.Step())
			}
		}
		if !p.writeAt.IsZero() && !r.now().Before(p.writeAt) {
			if err := r.writeBack(ctx); err != nil && ctx.Err() == nil {
				r.log.Error(err, "failed to write the renewed hub token back; retrying", "secret", r.secretName())
				p.writeAt = r.now().Add(writeBackoff.Step())
			} else {
				p.writeAt, writeBackoff = time.Time{}, newBackoff()
			}
		}
	}
}

// renew takes a newer token from the tenant Secret or asks the hub for one, and installs it.
// It reports whether the renewer now holds a token it has no reason to distrust.
func (r *Renewer) renew(ctx context.Context, p *plan) bool {
	cur := r.src.cur.Load()
	if r.adopt(ctx, cur, p) {
		return true
	}
	start := r.now()
	raw, claims, err := r.request(ctx, cur)
	metrics.CCMOperations.WithLabelValues(opToken, metrics.Result(err)).Inc()
	metrics.CCMOperationDuration.WithLabelValues(opToken).Observe(r.now().Sub(start).Seconds())
	if err != nil && ctx.Err() != nil {
		return false // shutting down
	}
	if err != nil {
		// A 401 here means the current token is dead: any other token in the Secret is better.
		p.unauthorized = p.unauthorized || apierrors.IsUnauthorized(err)
		r.report(err, cur)
		return false
	}
	r.src.install(raw, claims, start)
	select { // a 401 to the previous token is answered
	case <-r.src.unauthorized:
	default:
	}
	metrics.CCMClusterConnected.Set(1)
	*p = plan{renewAt: renewAt(start, claims.Lifetime(), r.opts.RenewAfterFraction)}
	if r.opts.Secret.Name != "" {
		p.writeAt = start
	}
	r.log.Info("renewed the hub token", "expiresAt", stamp(claims.ExpiresAt), "renewAt", stamp(p.renewAt))
	return true
}

// request asks the hub's TokenRequest API, with the current token, for a new token of the
// same ServiceAccount, audiences and lifetime.
func (r *Renewer) request(ctx context.Context, cur *token) (string, Claims, error) {
	c := cur.claims
	ttl := requestTTL(c, r.now())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: c.Audiences, ExpirationSeconds: ptr.To(int64(ttl / time.Second)),
	}}
	out, err := r.hub.ServiceAccounts(c.Namespace).CreateToken(ctx, c.ServiceAccount, tr, metav1.CreateOptions{})
	if err != nil {
		return "", Claims{}, fmt.Errorf("requesting a token for ServiceAccount %s/%s on the hub: %w", c.Namespace, c.ServiceAccount, err)
	}
	claims, err := ParseToken(out.Status.Token)
	if err != nil {
		return "", Claims{}, fmt.Errorf("parsing the hub's new token for ServiceAccount %s/%s: %w", c.Namespace, c.ServiceAccount, err)
	}
	if claims.Namespace != c.Namespace || claims.ServiceAccount != c.ServiceAccount {
		return "", Claims{}, fmt.Errorf("the hub's new token is for ServiceAccount %s/%s, not %s/%s",
			claims.Namespace, claims.ServiceAccount, c.Namespace, c.ServiceAccount)
	}
	return out.Status.Token, claims, nil
}

// report logs a failed renewal and, when the hub rejected the token or could not be
// reached, sets kubelb_ccm_kubelb_cluster_connected to 0.
func (r *Renewer) report(err error, cur *token) {
	c := cur.claims
	kv := []any{"serviceAccount", c.Namespace + "/" + c.ServiceAccount, "expiresAt", stamp(c.ExpiresAt), "expired", !r.now().Before(c.ExpiresAt)}
	switch {
	case apierrors.IsUnauthorized(err):
		metrics.CCMClusterConnected.Set(0)
		r.log.Error(err, "the hub rejected the ccm's token: it expired, or its ServiceAccount was deleted or re-created; "+
			"copy the hub's Secret "+c.Namespace+"/kubelb-ccm-kubeconfig into the tenant cluster again", append(kv, "secret", r.secretName())...)
	case apierrors.IsNotFound(err):
		r.log.Error(err, "failed to renew the hub token: its ServiceAccount is gone on the hub (deleted to revoke its tokens?); retrying", kv...)
	case apierrors.IsForbidden(err):
		// The token works; the Role lacks the right to renew it (a manager older than this ccm).
		r.log.Error(err, "the hub does not let the ccm renew its token: the Tenant's Role lacks create on serviceaccounts/token "+
			"for "+c.ServiceAccount+" (upgrade the manager); the token works until it expires", kv...)
	default:
		var status apierrors.APIStatus
		if !errors.As(err, &status) || status.Status().Code >= 500 {
			metrics.CCMClusterConnected.Set(0)
		}
		r.log.Error(err, "failed to renew the hub token; retrying", kv...)
	}
}

// adopt takes over the token in the tenant Secret when it is better than the current one: a
// later token of the same ServiceAccount (another replica renewed), or, once the hub has
// rejected the current token, any other token (someone copied a fresh kubeconfig in).
func (r *Renewer) adopt(ctx context.Context, cur *token, p *plan) bool {
	if r.opts.Secret.Name == "" {
		return false
	}
	sec, err := r.secrets.Secrets(r.opts.Secret.Namespace).Get(ctx, r.opts.Secret.Name, metav1.GetOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		r.log.Error(err, "failed to read the tenant Secret for a newer hub token", "secret", r.secretName())
		return false
	}
	raw := KubeconfigToken(sec.Data[r.opts.SecretKey])
	if raw == "" || raw == cur.raw {
		return false
	}
	claims, err := ParseToken(raw)
	if err != nil {
		return false
	}
	newer := claims.SameServiceAccount(cur.claims) && claims.ExpiresAt.After(cur.claims.ExpiresAt)
	if !newer && !p.unauthorized {
		return false
	}
	now := r.now()
	r.src.install(raw, claims, now)
	*p = plan{renewAt: initialRenewAt(claims, now, r.opts.RenewAfterFraction)}
	r.log.Info("took over the hub token in the tenant Secret", "secret", r.secretName(), "expiresAt", stamp(claims.ExpiresAt), "renewAt", stamp(p.renewAt))
	return true
}

// writeBack writes the current token into the tenant Secret, unless it holds it already or
// holds a later token of the same ServiceAccount (another replica's).
func (r *Renewer) writeBack(ctx context.Context) error {
	cur := r.src.cur.Load()
	secrets := r.secrets.Secrets(r.opts.Secret.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec, err := secrets.Get(ctx, r.opts.Secret.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading Secret %s: %w", r.secretName(), err)
		}
		old := sec.Data[r.opts.SecretKey]
		if raw := KubeconfigToken(old); raw == cur.raw {
			return nil
		} else if c, err := ParseToken(raw); err == nil && c.SameServiceAccount(cur.claims) && !c.ExpiresAt.Before(cur.claims.ExpiresAt) {
			return nil
		}
		kubeconfig, err := renderKubeconfig(old, r.base, cur.raw)
		if err != nil {
			return err
		}
		if bytes.Equal(kubeconfig, old) {
			return nil
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[r.opts.SecretKey] = kubeconfig
		if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating Secret %s: %w", r.secretName(), err)
		}
		r.log.Info("wrote the renewed hub token into the tenant Secret", "secret", r.secretName(), "key", r.opts.SecretKey)
		return nil
	})
}

// stamp formats a time for the log.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func (r *Renewer) secretName() string {
	if r.opts.Secret.Name == "" {
		return ""
	}
	return r.opts.Secret.String()
}
