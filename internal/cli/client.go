package cli

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/process"
)

// RequestTimeout bounds each API request of a command, so an unreachable cluster is an error
// and not a hang.
const RequestTimeout = 30 * time.Second

// NewClient is a client of the cluster cfg points at, knowing kubelb's kinds (process.Scheme).
func NewClient(cfg *rest.Config) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = RequestTimeout
	}
	c, err := client.New(cfg, client.Options{Scheme: process.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	return c, nil
}

// Client is a client of the cluster the flags select (NewClient).
func (o *Options) Client() (client.Client, error) {
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil, err
	}
	return NewClient(cfg)
}
