// Package hubschema knows which fields the hub's kubelb.k8c.io/v1alpha1 CRDs declare, as the
// hub's API server publishes them (OpenAPI v3), and leaves out of an object what they do not
// declare. A ccm writing to a hub whose CRDs are older than its own — a KubeLB CE hub, or an
// older kubelb — sends only what that hub knows: server-side apply refuses a field a
// structural schema does not declare, where a create or update would have pruned it.
package hubschema

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Group and Version are the API the schema covers.
const (
	Group   = "kubelb.k8c.io"
	Version = "v1alpha1"
)

// Schema is the shape of every kind of Group/Version the hub serves. The zero value and nil
// know no kind: Prune leaves every object as it is.
type Schema struct {
	kinds map[string]*node
}

// node is one schema of a structural CRD schema, reduced to what pruning needs.
type node struct {
	// any: unknown fields are kept here and below (x-kubernetes-preserve-unknown-fields, or a
	// schema that says nothing about its fields, such as a $ref that cannot be resolved).
	any        bool
	props      map[string]*node
	items      *node
	additional *node
}

// Parse reads the OpenAPI v3 document of Group/Version (the body of
// /openapi/v3/apis/kubelb.k8c.io/v1alpha1) and keeps the schema of each kind it declares.
func Parse(doc []byte) (*Schema, error) {
	var d struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("reading the OpenAPI document of %s/%s: %w", Group, Version, err)
	}
	raw := make(map[string]map[string]any, len(d.Components.Schemas))
	for name, r := range d.Components.Schemas {
		var m map[string]any
		if err := json.Unmarshal(r, &m); err != nil {
			return nil, fmt.Errorf("reading the OpenAPI schema %s: %w", name, err)
		}
		raw[name] = m
	}
	s := &Schema{kinds: map[string]*node{}}
	for _, m := range raw {
		kind := kindOf(m)
		if kind == "" {
			continue
		}
		s.kinds[kind] = build(m, raw, 0)
	}
	return s, nil
}

// kindOf is the kind of Group/Version a top-level schema declares (its
// x-kubernetes-group-version-kind), or "".
func kindOf(m map[string]any) string {
	gvks, _ := m["x-kubernetes-group-version-kind"].([]any)
	for _, g := range gvks {
		gvk, _ := g.(map[string]any)
		if gvk["group"] == Group && gvk["version"] == Version {
			k, _ := gvk["kind"].(string)
			return k
		}
	}
	return ""
}

// maxDepth bounds $ref chains and nesting: no kubelb schema comes near it.
const maxDepth = 64

// build turns one OpenAPI schema into a node, resolving $ref and allOf.
func build(m map[string]any, refs map[string]map[string]any, depth int) *node {
	n := &node{}
	if depth > maxDepth {
		n.any = true
		return n
	}
	if ref, ok := m["$ref"].(string); ok {
		target, found := refs[strings.TrimPrefix(ref, "#/components/schemas/")]
		if !found {
			n.any = true
			return n
		}
		merge(n, build(target, refs, depth+1))
	}
	if all, ok := m["allOf"].([]any); ok {
		for _, a := range all {
			if am, ok := a.(map[string]any); ok {
				merge(n, build(am, refs, depth+1))
			}
		}
	}
	if v, _ := m["x-kubernetes-preserve-unknown-fields"].(bool); v {
		n.any = true
	}
	if props, ok := m["properties"].(map[string]any); ok {
		if n.props == nil {
			n.props = map[string]*node{}
		}
		for k, v := range props {
			if vm, ok := v.(map[string]any); ok {
				n.props[k] = build(vm, refs, depth+1)
			}
		}
	}
	if items, ok := m["items"].(map[string]any); ok {
		n.items = build(items, refs, depth+1)
	}
	switch ap := m["additionalProperties"].(type) {
	case map[string]any:
		n.additional = build(ap, refs, depth+1)
	case bool:
		if ap {
			n.additional = &node{any: true}
		}
	}
	return n
}

// merge adds what b declares to a.
func merge(a, b *node) {
	a.any = a.any || b.any
	for k, v := range b.props {
		if a.props == nil {
			a.props = map[string]*node{}
		}
		a.props[k] = v
	}
	if b.items != nil {
		a.items = b.items
	}
	if b.additional != nil {
		a.additional = b.additional
	}
}

// Knows tells whether the hub serves kind.
func (s *Schema) Knows(kind string) bool {
	if s == nil {
		return false
	}
	_, ok := s.kinds[kind]
	return ok
}

// Prune removes from obj (an object of kind, as unstructured content) every field the hub's
// schema of kind does not declare, and returns their paths ("spec.ipFamilies",
// "spec.endpoints[].ports[].appProtocol"), sorted, each once. apiVersion, kind and metadata
// are never touched; an unknown kind, or a nil Schema, removes nothing.
func (s *Schema) Prune(kind string, obj map[string]any) []string {
	if s == nil {
		return nil
	}
	root, ok := s.kinds[kind]
	if !ok || root.any {
		return nil
	}
	found := map[string]bool{}
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind", "metadata":
			continue
		}
		child, declared := root.props[k]
		if !declared {
			delete(obj, k)
			found[k] = true
			continue
		}
		prune(child, v, k, found)
	}
	return sorted(found)
}

// Undeclared returns what Prune would remove from obj, leaving obj as it is.
func (s *Schema) Undeclared(kind string, obj map[string]any) []string {
	if s == nil || !s.Knows(kind) {
		return nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		return nil
	}
	return s.Prune(kind, c)
}

// prune removes from v what n does not declare, recording the paths below path.
func prune(n *node, v any, path string, found map[string]bool) {
	if n == nil || n.any {
		return
	}
	switch val := v.(type) {
	case map[string]any:
		for k, child := range val {
			if c, ok := n.props[k]; ok {
				prune(c, child, path+"."+k, found)
				continue
			}
			if n.additional != nil {
				prune(n.additional, child, path+"{}", found)
				continue
			}
			if n.props == nil && n.items == nil {
				// A schema that declares no properties and no additionalProperties is an
				// object the API server would prune whole; it is not one kubelb writes, and
				// saying "everything is undeclared" helps nobody: keep it.
				continue
			}
			delete(val, k)
			found[path+"."+k] = true
		}
	case []any:
		if n.items == nil {
			return
		}
		for _, item := range val {
			prune(n.items, item, path+"[]", found)
		}
	}
}

func sorted(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
