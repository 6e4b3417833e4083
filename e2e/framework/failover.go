package framework

import (
	"encoding/json"
	"fmt"
	"strings"

	"kubelb.dev/kubelb/internal/testenv"
)

// DumpedResource is one dynamic resource as Envoy's config dump shows it.
type DumpedResource struct {
	Name string
	// Version is the version_info it came with, LastUpdated when Envoy last took a changed
	// copy of it (an unchanged copy re-sent leaves both as they were).
	Version, LastUpdated string
	// Config is the resource itself, as JSON.
	Config string
}

// ServiceResources are the dynamic listener Envoy has on port, the cluster that listener
// proxies to and that cluster's endpoint assignment, from its config dump: what serves one
// Layer 4 port.
type ServiceResources struct {
	Listener, Cluster, Endpoints DumpedResource
}

// ServiceResources reads the resources of the active listener on port (see
// ServiceResources); it fails the test when there is none.
func (e *Envoy) ServiceResources(t testenv.TB, port int32) ServiceResources {
	t.Helper()
	var doc struct {
		Configs []map[string]json.RawMessage `json:"configs"`
	}
	if err := e.ConfigDump("?include_eds", &doc); err != nil {
		t.Fatalf("reading Envoy's config dump: %v", err)
	}
	type entry struct {
		Name        string         `json:"name"`
		ClusterName string         `json:"cluster_name"`
		Version     string         `json:"version_info"`
		LastUpdated string         `json:"last_updated"`
		ActiveState map[string]any `json:"active_state"`
		Cluster     map[string]any `json:"cluster"`
		Assignment  map[string]any `json:"endpoint_config"`
	}
	list := func(c map[string]json.RawMessage, field string) []entry {
		var out []entry
		if raw, ok := c[field]; ok {
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("reading Envoy's config dump %s: %v", field, err)
			}
		}
		return out
	}
	dumped := func(name, version, updated string, cfg any) DumpedResource {
		b, _ := json.Marshal(cfg)
		return DumpedResource{Name: name, Version: version, LastUpdated: updated, Config: string(b)}
	}
	var out ServiceResources
	var clusters, assignments []entry
	for _, c := range doc.Configs {
		clusters = append(clusters, list(c, "dynamic_active_clusters")...)
		assignments = append(assignments, list(c, "dynamic_endpoint_configs")...)
		for _, l := range list(c, "dynamic_listeners") {
			listener, _ := l.ActiveState["listener"].(map[string]any)
			if listener == nil || !strings.Contains(jsonOf(listener["address"]), fmt.Sprintf(`"port_value":%d`, port)) {
				continue
			}
			v, _ := l.ActiveState["version_info"].(string)
			u, _ := l.ActiveState["last_updated"].(string)
			out.Listener = dumped(l.Name, v, u, listener)
		}
	}
	if out.Listener.Name == "" {
		t.Fatalf("Envoy has no active listener on port %d", port)
	}
	var listener any
	_ = json.Unmarshal([]byte(out.Listener.Config), &listener)
	cluster := firstString(listener, "cluster")
	for _, c := range clusters {
		if name, _ := c.Cluster["name"].(string); name == cluster {
			out.Cluster = dumped(name, c.Version, c.LastUpdated, c.Cluster)
		}
	}
	for _, a := range assignments {
		if name, _ := a.Assignment["cluster_name"].(string); name == cluster {
			out.Endpoints = dumped(name, a.Version, a.LastUpdated, a.Assignment)
		}
	}
	if out.Cluster.Name == "" {
		t.Fatalf("Envoy has no active cluster %q (of the listener on port %d)", cluster, port)
	}
	return out
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
