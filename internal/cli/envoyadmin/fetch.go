package envoyadmin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"kubelb.dev/kubelb/internal/envoyclusters"
)

// Config prints the names of the listeners, clusters and route configurations Envoy holds
// (with the xDS version of each kind), each with the object it serves; with raw, Envoy's
// whole /config_dump (secrets are redacted by Envoy).
func Config(ctx context.Context, a Admin, names *Names, raw bool, out io.Writer) error {
	body, err := a.Get(ctx, "/config_dump")
	if err != nil {
		return err
	}
	if raw {
		_, err := out.Write(body)
		return err
	}
	var dump struct {
		Configs []map[string]json.RawMessage `json:"configs"`
	}
	if err := json.Unmarshal(body, &dump); err != nil {
		return fmt.Errorf("reading Envoy's config dump: %w", err)
	}
	for _, c := range dump.Configs {
		var typ string
		_ = json.Unmarshal(c["@type"], &typ)
		kind, field, inner := "", "", ""
		switch {
		case strings.HasSuffix(typ, ".ListenersConfigDump"):
			kind, field, inner = "listener", "dynamic_listeners", "active_state"
		case strings.HasSuffix(typ, ".ClustersConfigDump"):
			kind, field, inner = "cluster", "dynamic_active_clusters", ""
		case strings.HasSuffix(typ, ".RoutesConfigDump"):
			kind, field, inner = "route configuration", "dynamic_route_configs", ""
		default:
			continue
		}
		var entries []map[string]json.RawMessage
		_ = json.Unmarshal(c[field], &entries)
		for _, e := range entries {
			if inner != "" {
				var st map[string]json.RawMessage
				if json.Unmarshal(e[inner], &st) != nil {
					// A listener that never became active: Envoy says why in error_state.
					if es, ok := e["error_state"]; ok {
						var name string
						_ = json.Unmarshal(e["name"], &name)
						fmt.Fprintf(out, "✗ %s %s: rejected by Envoy: %s\n", kind, names.Annotate(name), es)
					}
					continue
				}
				e = st
			}
			var version string
			_ = json.Unmarshal(e["version_info"], &version)
			var res struct {
				Name string `json:"name"`
			}
			for _, k := range []string{"listener", "cluster", "route_config"} {
				if r, ok := e[k]; ok {
					_ = json.Unmarshal(r, &res)
				}
			}
			fmt.Fprintf(out, "%s %s  version %s\n", kind, names.Annotate(res.Name), version)
		}
	}
	return nil
}

// Clusters prints every cluster with the object it serves and each host's health, one line
// each (✓ healthy, ✗ not, with Envoy's reasons). It returns the number of unhealthy hosts.
func Clusters(ctx context.Context, a Admin, names *Names, out io.Writer) (int, error) {
	body, err := a.Get(ctx, envoyclusters.Path)
	if err != nil {
		return 0, err
	}
	clusters, err := envoyclusters.Parse(body)
	if err != nil {
		return 0, err
	}
	sort.Slice(clusters, func(i, j int) bool { return clusters[i].Name < clusters[j].Name })
	bad := 0
	for _, c := range clusters {
		fmt.Fprintf(out, "cluster %s\n", names.Annotate(c.Name))
		if len(c.Hosts) == 0 {
			fmt.Fprintln(out, "  ✗ no endpoints: check the tenant's nodes (Addresses) and the Service's NodePorts")
			bad++
		}
		for _, h := range c.Hosts {
			if h.Healthy {
				fmt.Fprintf(out, "  ✓ %s healthy\n", h.Address)
				continue
			}
			bad++
			fmt.Fprintf(out, "  ✗ %s unhealthy (%s): the hub cannot reach this NodePort; check the node's firewall and the Service's endpoints\n",
				h.Address, strings.Join(h.Why, ", "))
		}
	}
	return bad, nil
}

// Stats prints Envoy's counters and gauges whose name contains filter (all when empty), one
// per line; those of a cluster or listener are followed by the object they count.
func Stats(ctx context.Context, a Admin, names *Names, filter string, out io.Writer) error {
	path := "/stats"
	if filter != "" {
		path += "?filter=" + url.QueryEscape(regexp.QuoteMeta(filter))
	}
	body, err := a.Get(ctx, path)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		name, _, _ := strings.Cut(line, ":")
		fmt.Fprintln(out, line+statOwner(names, name))
	}
	return nil
}

// statOwner is "  (<object>)" for a stat of a cluster, a listener or a listener's filter
// (http., tcp., udp.: their stat prefix) Envoy's names map back.
func statOwner(names *Names, stat string) string {
	for _, prefix := range []string{"cluster.", "listener.", "http.", "tcp.", "udp."} {
		rest, ok := strings.CutPrefix(stat, prefix)
		if !ok {
			continue
		}
		// The owner's name is a prefix of rest ending before a dot (the stat's own name
		// may have dots, and so may an owner's).
		for i := range len(rest) {
			if rest[i] != '.' {
				continue
			}
			if of := names.Of(rest[:i]); of != "" {
				return "  (" + of + ")"
			}
		}
	}
	return ""
}
