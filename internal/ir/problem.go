package ir

import (
	"cmp"
	"fmt"
	"slices"
)

// ObjectRef names a hub object, and optionally one section of it (a port such as
// "TCP/80 (http)", a listener, a rule), that IR elements are made from and problems are
// reported on.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Section   string `json:"section,omitempty"`
}

// Object returns the ref without its section: the object itself.
func (r ObjectRef) Object() ObjectRef { r.Section = ""; return r }

// String renders "Kind namespace/name" plus " [section]".
func (r ObjectRef) String() string {
	s := r.Kind + " " + r.Name
	if r.Namespace != "" {
		s = r.Kind + " " + r.Namespace + "/" + r.Name
	}
	if r.Section != "" {
		s += " [" + r.Section + "]"
	}
	return s
}

// Compare orders refs by kind, namespace, name and section.
func (r ObjectRef) Compare(o ObjectRef) int {
	// Field by field, stopping at the first that differs: owners are sorted by the
	// thousands (cmp.Or would compare every field every time).
	if c := cmp.Compare(r.Kind, o.Kind); c != 0 {
		return c
	}
	if c := cmp.Compare(r.Namespace, o.Namespace); c != 0 {
		return c
	}
	if c := cmp.Compare(r.Name, o.Name); c != 0 {
		return c
	}
	return cmp.Compare(r.Section, o.Section)
}

// NormalizeRefs sorts refs and drops duplicates; nil for none.
func NormalizeRefs(refs []ObjectRef) []ObjectRef {
	if len(refs) == 0 {
		return nil
	}
	sortIn(refs, ObjectRef.Compare)
	return slices.Compact(refs) // writes nothing when there is no repeat
}

// Severity says what a problem means for the section it concerns.
type Severity string

// Severities.
const (
	// SeverityError: the section is not served (no listener, or a listener that cannot work).
	SeverityError Severity = "Error"
	// SeverityWarning: the section is served, but degraded or with part of its input ignored.
	SeverityWarning Severity = "Warning"
)

// Problem is something wrong with an object (or one section of it) found while translating
// it, building its Envoy resources, or reported by Envoy. Controllers write problems as
// conditions and Events on the object.
type Problem struct {
	Object   ObjectRef `json:"object"`
	Severity Severity  `json:"severity"`
	// Reason is CamelCase, for conditions and Events.
	Reason string `json:"reason"`
	// Message says what happened and what to do, for humans. The tenant reads it (conditions
	// and Events in its namespace, the ccm's Events): it names only the tenant's own objects
	// and values, never the hub's ranges, addresses or resolver answers.
	Message string `json:"message"`
	// Detail is what the platform team needs and the tenant may not read (the hub range that
	// denied an endpoint, what the hub's DNS answered): only the manager's log shows it.
	Detail string `json:"detail,omitempty"`
}

// String renders the problem for logs and condition messages.
func (p Problem) String() string {
	if p.Object.Section != "" {
		return fmt.Sprintf("%s: %s: %s", p.Object.Section, p.Reason, p.Message)
	}
	return fmt.Sprintf("%s: %s", p.Reason, p.Message)
}

// Problems is a list of problems.
type Problems []Problem

// ProblemSet collects problems, folding identical ones, in time linear in their number (a
// tenant's input can make very many).
type ProblemSet struct {
	list Problems
	seen map[Problem]struct{}
}

// Add records a problem unless an identical one is already there.
func (s *ProblemSet) Add(obj ObjectRef, sev Severity, reason, format string, args ...any) {
	s.AddMessage(obj, sev, reason, fmt.Sprintf(format, args...))
}

// AddMessage is Add with the message already made (one message reported on many objects is
// formatted once).
func (s *ProblemSet) AddMessage(obj ObjectRef, sev Severity, reason, message string) {
	s.AddProblem(Problem{Object: obj, Severity: sev, Reason: reason, Message: message})
}

// AddProblem records a problem unless an identical one is already there.
func (s *ProblemSet) AddProblem(p Problem) {
	if s.seen == nil {
		s.seen = map[Problem]struct{}{}
	}
	if _, ok := s.seen[p]; ok {
		return
	}
	s.seen[p] = struct{}{}
	s.list = append(s.list, p)
}

// Len is the number of problems recorded so far.
func (s *ProblemSet) Len() int { return len(s.list) }

// Since returns a copy of the problems recorded after the first n (Len before), in the order
// they were recorded.
func (s *ProblemSet) Since(n int) Problems {
	if n >= len(s.list) {
		return nil
	}
	return slices.Clone(s.list[n:])
}

// List returns the problems sorted (Problems.Sort); nil for none.
func (s *ProblemSet) List() Problems {
	s.list.Sort()
	return s.list
}

// Sort orders problems by object and then by the order they were found in (stable), so the
// same input always gives the same list.
func (ps Problems) Sort() {
	slices.SortStableFunc(ps, func(a, b Problem) int { return a.Object.Object().Compare(b.Object.Object()) })
}

// Compact removes the repeats of a problem from problems sorted by Sort (which groups them
// by object), keeping the first of each, in place: ProblemSet's folding without its map, for
// many problems of which few objects have more than one.
func (ps Problems) Compact() Problems {
	out := ps[:0]
	group := 0 // where the current object's problems start in out
	for _, p := range ps {
		if len(out) > group && out[group].Object.Object() != p.Object.Object() {
			group = len(out)
		}
		if !slices.Contains(out[group:], p) {
			out = append(out, p)
		}
	}
	clear(ps[len(out):])
	return out
}

// ByObject groups problems by object (sections dropped from the key).
func (ps Problems) ByObject() map[ObjectRef][]Problem {
	out := map[ObjectRef][]Problem{}
	for _, p := range ps {
		k := p.Object.Object()
		out[k] = append(out[k], p)
	}
	return out
}
