// Package envoyclusters reads the clusters page of Envoy's admin interface
// (GET /clusters?format=json): each cluster's hosts with their health, as the kubectl
// plugin prints them and tests check them.
package envoyclusters

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Path is the admin interface's page Parse reads.
const Path = "/clusters?format=json"

// Host is one upstream host of a cluster.
type Host struct {
	// Address is "ip:port" (IPv6 in brackets).
	Address string
	// Healthy is false when EDS or any health check marks the host unhealthy.
	Healthy bool
	// Why are the health flags that are set (failed_active_health_check, ...), sorted.
	Why []string
	// Connections is the host's cx_total.
	Connections int64
}

// Cluster is one cluster and its hosts.
type Cluster struct {
	Name  string
	Hosts []Host
}

// Parse reads the clusters page, in Envoy's order.
func Parse(body []byte) ([]Cluster, error) {
	var doc struct {
		ClusterStatuses []struct {
			Name         string `json:"name"`
			HostStatuses []struct {
				Address struct {
					SocketAddress struct {
						Address   string `json:"address"`
						PortValue int    `json:"port_value"`
					} `json:"socket_address"`
				} `json:"address"`
				Stats []struct {
					Name  string          `json:"name"`
					Value json.RawMessage `json:"value"`
				} `json:"stats"`
				HealthStatus map[string]any `json:"health_status"`
			} `json:"host_statuses"`
		} `json:"cluster_statuses"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("reading Envoy's clusters: %w", err)
	}
	out := make([]Cluster, 0, len(doc.ClusterStatuses))
	for _, c := range doc.ClusterStatuses {
		cl := Cluster{Name: c.Name, Hosts: []Host{}}
		for _, h := range c.HostStatuses {
			sa := h.Address.SocketAddress
			host := Host{Address: net.JoinHostPort(sa.Address, strconv.Itoa(sa.PortValue)),
				Healthy: h.HealthStatus["eds_health_status"] == "HEALTHY"}
			for k, v := range h.HealthStatus {
				if strings.HasPrefix(k, "failed_") && v == true {
					host.Healthy = false
					host.Why = append(host.Why, k)
				}
			}
			sort.Strings(host.Why)
			for _, s := range h.Stats {
				if s.Name == "cx_total" {
					host.Connections, _ = strconv.ParseInt(strings.Trim(string(s.Value), `"`), 10, 64)
				}
			}
			cl.Hosts = append(cl.Hosts, host)
		}
		out = append(out, cl)
	}
	return out, nil
}
