// Package xdsenvoy runs, for tests, a real Envoy fed over mutual-TLS ADS by a real xDS server
// (internal/xds) that serves one tenant's Envoy resources.
package xdsenvoy

import (
	"context"
	"net"
	"testing"

	"github.com/go-logr/logr/testr"

	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/xds"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/translator"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// Start serves res as tenant's resources on an xDS server on loopback (Serve) and starts an
// Envoy named name with the bootstrap of opts (Tenant and XDSAddress are set here;
// AdminAddress defaults to a free loopback port). Both stop when the test ends.
func Start(t *testing.T, name, tenant string, res translator.Resources, opts bootstrap.Options, eopts testsupport.EnvoyOptions) *testsupport.Envoy {
	t.Helper()
	addr, certs := Serve(t, tenant, xds.Resources(res))
	opts.Tenant, opts.XDSAddress = tenant, addr
	if opts.AdminAddress == "" {
		// A port of its own, not 0: the ready and stats listeners forward to it.
		opts.AdminAddress = testsupport.Loopback(testsupport.FreePort(t))
	}
	if eopts.Node == "" {
		eopts.Node = name
	}
	return testsupport.StartEnvoy(t, name, certs.Bootstrap(t, opts), eopts)
}

// Serve serves res as tenant's resources on a real xDS server on loopback, and returns its
// address and the PKI whose client certificates it trusts; it stops when the test ends.
func Serve(t *testing.T, tenant string, res xds.Resources) (string, *xdstest.PKI) {
	t.Helper()
	certs := xdstest.New(t)
	srv := xds.NewServer(testr.NewWithOptions(t, testr.Options{Verbosity: 1}), certs.ServerTLS())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	if _, err := srv.SetTenant(ctx, tenant, res); err != nil {
		t.Fatal(err)
	}
	return lis.Addr().String(), certs
}
