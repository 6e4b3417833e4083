package framework

import (
	"fmt"
	"sort"
	"strings"

	"kubelb.dev/kubelb/internal/testenv"
)

// XDSVersions returns every version_info Envoy reports in its /config_dump (EDS included):
// one entry per dump type ("ClustersConfigDump", "ListenersConfigDump", ...) for the version
// it last accepted for that xDS type, and one per dynamic resource ("ClustersConfigDump
// dynamic_active_clusters <name>") for the version that resource came with. Two reads are equal
// when Envoy holds the same configuration at the same versions.
func (e *Envoy) XDSVersions(t testenv.TB) map[string]string {
	t.Helper()
	var doc struct {
		Configs []map[string]any `json:"configs"`
	}
	if err := e.ConfigDump("?include_eds", &doc); err != nil {
		t.Fatalf("reading Envoy's config dump: %v", err)
	}
	out := map[string]string{}
	for _, c := range doc.Configs {
		typ, _ := c["@type"].(string)
		typ = typ[strings.LastIndex(typ, ".")+1:]
		if v, ok := c["version_info"].(string); ok {
			out[typ] = v
		}
		for field, val := range c {
			items, ok := val.([]any)
			if !ok || !strings.HasPrefix(field, "dynamic_") {
				continue
			}
			for i, it := range items {
				name := firstString(it, "name", "cluster_name")
				if name == "" {
					name = fmt.Sprint(i)
				}
				if v := firstString(it, "version_info"); v != "" {
					out[typ+" "+field+" "+name] = v
				}
			}
		}
	}
	return out
}

// firstString finds, breadth first, the first string value under one of the keys.
func firstString(v any, keys ...string) string {
	queue := []any{v}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		switch x := cur.(type) {
		case map[string]any:
			for _, k := range keys {
				if s, ok := x[k].(string); ok && s != "" {
					return s
				}
			}
			names := make([]string, 0, len(x))
			for k := range x {
				names = append(names, k)
			}
			sort.Strings(names) // a stable walk
			for _, k := range names {
				queue = append(queue, x[k])
			}
		case []any:
			queue = append(queue, x...)
		}
	}
	return ""
}

// Counters returns the named Envoy counters or gauges, failing the test when Envoy does not
// report one of them.
func (e *Envoy) Counters(t testenv.TB, names ...string) map[string]int64 {
	t.Helper()
	out := make(map[string]int64, len(names))
	for _, n := range names {
		out[n] = e.Stat(t, n)
	}
	return out
}

// SubscriptionVersions returns the version_info of the last update Envoy accepted on each of
// its xDS subscriptions (the text readouts *.version_text: cluster_manager.cds.version_text,
// listener_manager.lds.version_text, ...), by name. Unlike the config dump's version_info,
// which Envoy leaves as it was when an update changes nothing, these follow every accepted
// response: they show the versions the control plane sent.
func (e *Envoy) SubscriptionVersions(t testenv.TB) map[string]string {
	t.Helper()
	body, err := e.Get("/stats?filter=version_text$")
	if err != nil {
		t.Fatalf("reading Envoy's stats: %v", err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok || !strings.HasSuffix(name, ".version_text") {
			continue
		}
		out[name] = strings.Trim(val, `"`)
	}
	if len(out) == 0 {
		t.Fatalf("Envoy reports no xDS subscription version:\n%s", body)
	}
	return out
}
