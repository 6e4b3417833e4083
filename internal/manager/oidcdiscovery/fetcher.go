// Package oidcdiscovery reads the OpenID Connect discovery documents
// (<issuer>/.well-known/openid-configuration) of the tenants' OIDC logins that give no
// endpoints, for the translation (translate.Input.OIDCProviders). Tenants are untrusted, so
// the read is the hub's own connection to an address a tenant chose: the issuer's host is
// resolved here (never by a proxy or the system's dialer), only the addresses the tenant's
// endpoint policy allows are dialled, over TLS verifying the host's certificate, with no
// redirect followed, within Timeout, and at most MaxDocumentBytes are read. What was read is
// kept per tenant and issuer, read again after Refresh (a failure after RetryAfter), and a
// tenant is told (its rebuild requeued) when one of its documents changes. A rebuild never
// waits on a read: Want returns what is known and starts the reads missing.
package oidcdiscovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"kubelb.dev/kubelb/internal/trafficpolicy"
	"kubelb.dev/kubelb/internal/translate"
)

// Bounds of the reads.
const (
	// Timeout bounds the lookup of the issuer's host, and the read of the document.
	Timeout = 5 * time.Second
	// MaxDocumentBytes bounds the document read.
	MaxDocumentBytes = 64 << 10
	// MaxAddrs bounds the addresses of the host tried.
	MaxAddrs = 4
	// Refresh: a document read is read again after this.
	Refresh = time.Hour
	// RetryAfter: a read that failed is tried again after this.
	RetryAfter = time.Minute
	// Parallel bounds the reads in flight, all tenants together.
	Parallel = 4
)

// Resolver looks up the addresses of a host name; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Fetcher reads and keeps the discovery documents of the tenants' issuers.
type Fetcher struct {
	resolver Resolver
	// roots verify the issuers' certificates; nil: the system's.
	roots *x509.CertPool
	now   func() time.Time
	sem   chan struct{}

	mu      sync.Mutex
	entries map[key]*entry
	changed map[string]bool // tenants to rebuild
	signal  chan struct{}
}

type key struct{ tenant, issuer string }

type entry struct {
	doc     translate.OIDCProvider
	read    bool // doc holds an answer
	at      time.Time
	running bool
}

// New makes a Fetcher resolving with resolver and verifying certificates with roots (nil:
// the system's).
func New(resolver Resolver, roots *x509.CertPool) *Fetcher {
	return &Fetcher{resolver: resolver, roots: roots, now: time.Now, sem: make(chan struct{}, Parallel),
		entries: map[key]*entry{}, changed: map[string]bool{}, signal: make(chan struct{}, 1)}
}

// Want returns what was read of tenant's issuers (an issuer not read yet is missing) and
// starts the reads missing or stale, dialling only the addresses allowed admits (the tenant's
// endpoint policy). The tenant's other issuers are forgotten. It never waits on a read.
func (f *Fetcher) Want(tenant string, issuers []string, allowed func(netip.Addr) bool) map[string]translate.OIDCProvider {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	wanted := map[string]bool{}
	var out map[string]translate.OIDCProvider
	for _, iss := range issuers {
		wanted[iss] = true
		k := key{tenant, iss}
		e := f.entries[k]
		if e == nil {
			e = &entry{}
			f.entries[k] = e
		}
		if e.read {
			if out == nil {
				out = map[string]translate.OIDCProvider{}
			}
			out[iss] = e.doc
		}
		wait := Refresh
		if e.doc.Error != "" {
			wait = RetryAfter
		}
		if !e.running && (!e.read || now.Sub(e.at) >= wait) {
			e.running = true
			go f.read(tenant, iss, allowed)
		}
	}
	for k := range f.entries {
		if k.tenant == tenant && !wanted[k.issuer] && !f.entries[k].running {
			delete(f.entries, k)
		}
	}
	return out
}

// Forget drops what was read for tenant (its namespace is gone).
func (f *Fetcher) Forget(tenant string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, e := range f.entries {
		if k.tenant == tenant && !e.running {
			delete(f.entries, k)
		}
	}
	delete(f.changed, tenant)
}

// read reads one document in the background and records it, telling the tenant when it
// changed.
func (f *Fetcher) read(tenant, issuer string, allowed func(netip.Addr) bool) {
	f.sem <- struct{}{}
	doc := f.Fetch(context.Background(), issuer, allowed)
	<-f.sem
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entries[key{tenant, issuer}]
	if e == nil {
		e = &entry{}
		f.entries[key{tenant, issuer}] = e
	}
	e.running = false
	if e.read && e.doc == doc {
		e.at = f.now()
		return
	}
	e.doc, e.read, e.at = doc, true, f.now()
	f.changed[tenant] = true
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// Forward sends a GenericEvent named after each tenant whose documents changed to events,
// until ctx ends.
func (f *Fetcher) Forward(ctx context.Context, events chan<- event.GenericEvent) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.signal:
		}
		f.mu.Lock()
		tenants := make([]string, 0, len(f.changed))
		for t := range f.changed {
			tenants = append(tenants, t)
		}
		clear(f.changed)
		f.mu.Unlock()
		for _, t := range tenants {
			ev := event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: t}}}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}
}

// document is what kubelb reads of a discovery document.
type document struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
}

// errDenied: no address of the issuer's host may be dialled.
var errDenied = errors.New("none of its host's addresses may be reached: " + translate.DeniedByPolicy)

// Fetch reads issuer's discovery document now, dialling only the addresses allowed admits;
// what it gives, or why not in words a tenant may read (never the hub's addresses or rules).
func (f *Fetcher) Fetch(ctx context.Context, issuer string, allowed func(netip.Addr) bool) translate.OIDCProvider {
	fail := func(format string, args ...any) translate.OIDCProvider {
		return translate.OIDCProvider{Error: fmt.Sprintf(format, args...)}
	}
	if err := trafficpolicy.CheckOIDCIssuer(issuer); err != nil {
		return fail("%v", err)
	}
	u, err := url.Parse(strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration")
	if err != nil {
		return fail("the issuer is not a URL")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = f.resolver.LookupNetIP(ctx, "ip", host); err != nil || len(addrs) == 0 {
		return fail("its host %s could not be resolved", host)
	}
	var dial []string
	for _, a := range addrs {
		if a = a.Unmap(); a.IsValid() && a.Zone() == "" && allowed(a) && len(dial) < MaxAddrs {
			dial = append(dial, net.JoinHostPort(a.String(), port))
		}
	}
	if len(dial) == 0 {
		return fail("%v", errDenied)
	}
	dialer := &net.Dialer{Timeout: Timeout}
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var errs []error
			for _, d := range dial {
				c, err := dialer.DialContext(ctx, "tcp", d)
				if err == nil {
					return c, nil
				}
				errs = append(errs, err)
			}
			return nil, errors.Join(errs...)
		},
		TLSClientConfig:        &tls.Config{ServerName: host, RootCAs: f.roots, MinVersion: tls.VersionTLS12},
		DisableKeepAlives:      true,
		ResponseHeaderTimeout:  Timeout,
		MaxResponseHeaderBytes: 16 << 10,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail("the issuer is not a URL")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var cert *tls.CertificateVerificationError
		if errors.As(err, &cert) {
			return fail("its certificate could not be verified for %s", host)
		}
		return fail("it could not be read from %s (connection failed or timed out)", host)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail("%s answered %d", u.Path, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
	if err != nil {
		return fail("it could not be read from %s (connection failed or timed out)", host)
	}
	if len(body) > MaxDocumentBytes {
		return fail("it is over %d KiB", MaxDocumentBytes>>10)
	}
	var doc document
	if err := json.Unmarshal(body, &doc); err != nil {
		return fail("it is not a JSON object")
	}
	if doc.Issuer != issuer {
		return fail("it names the issuer %s, not %s", strconv.Quote(cut(doc.Issuer)), issuer)
	}
	if err := trafficpolicy.CheckOIDCDiscovered(doc.AuthorizationEndpoint, doc.TokenEndpoint); err != nil {
		return fail("its endpoints cannot be used: %v", err)
	}
	return translate.OIDCProvider{AuthorizationEndpoint: doc.AuthorizationEndpoint, TokenEndpoint: doc.TokenEndpoint}
}

// cut shortens a value of the document for a message.
func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
