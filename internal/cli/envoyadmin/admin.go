// Package envoyadmin is `kubectl kubelb envoy config|clusters|stats <tenant>`: it reaches the
// admin interface of a Ready Envoy of a tenant's fleet (a port-forward through the hub's API
// server to 127.0.0.1:9901 in the pod) and prints what Envoy holds, with Envoy's names
// mapped back to the tenant's objects. Reaching the admin interface (Admin, Forward) is
// apart from fetching and mapping (Config, Clusters, Stats), which work on any Admin.
package envoyadmin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Admin is an Envoy admin interface.
type Admin interface {
	// Get returns the body of GET path (with its query) on the admin interface.
	Get(ctx context.Context, path string) ([]byte, error)
}

// HTTPAdmin is an admin interface at a base URL ("http://127.0.0.1:9901").
type HTTPAdmin struct {
	BaseURL string
	Client  *http.Client
}

// Get implements Admin.
func (a HTTPAdmin) Get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.BaseURL+path, nil)
	if err != nil {
		return nil, err
	}
	c := a.Client
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking Envoy's admin interface for %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading Envoy's answer to %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("envoy's admin interface answered %s to %s: %s", resp.Status, path, body)
	}
	return body, nil
}
