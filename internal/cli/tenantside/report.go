// Package tenantside holds the commands of kubectl kubelb for the people of a tenant cluster:
// `status <kind>/<name>` (app teams: follow one object to the hub and say which step fails)
// and `check tenant [--pre]` (tenant admins: hub, token, permissions, ccm, nodes, CRDs and
// classes). Both work with the tenant kubeconfig and the ccm's hub kubeconfig (Hub). The
// checks are plain functions returning Steps; the cobra commands only parse and print.
package tenantside

import (
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// State is the outcome of one Step.
type State int

// States of a Step.
const (
	// OK: the step holds.
	OK State = iota
	// Failed: the step does not hold; the Step's Hint says what to do.
	Failed
	// Skipped: the step does not apply, or could not be judged (the Detail says why).
	Skipped
	// Pending: the hub has no verdict on the step yet, or cannot give one (its Hint says
	// why); it does not fail the command.
	Pending
)

// mark is the state's mark at the start of a line.
func (s State) mark() string {
	switch s {
	case OK:
		return "✓"
	case Failed:
		return "✗"
	case Pending:
		return "?"
	}
	return "-"
}

// Step is one line of a report: a check of check tenant, or a step of status.
type Step struct {
	Name   string
	State  State
	Detail string
	// Hint says what to do when the step failed.
	Hint string
}

func ok(name, format string, args ...any) Step {
	return Step{Name: name, State: OK, Detail: fmt.Sprintf(format, args...)}
}

func skipped(name, format string, args ...any) Step {
	return Step{Name: name, State: Skipped, Detail: fmt.Sprintf(format, args...)}
}

func failed(name, hint, format string, args ...any) Step {
	return Step{Name: name, State: Failed, Detail: fmt.Sprintf(format, args...), Hint: hint}
}

func pending(name, hint, format string, args ...any) Step {
	return Step{Name: name, State: Pending, Detail: fmt.Sprintf(format, args...), Hint: hint}
}

// FirstFailed is the first failed step, or nil.
func FirstFailed(steps []Step) *Step {
	for i := range steps {
		if steps[i].State == Failed {
			return &steps[i]
		}
	}
	return nil
}

// Pendings are the names of the pending steps.
func Pendings(steps []Step) []string {
	var out []string
	for _, s := range steps {
		if s.State == Pending {
			out = append(out, s.Name)
		}
	}
	return out
}

// PrintSteps writes one line per step, and the hint of each failed or pending step under it.
func PrintSteps(w io.Writer, steps []Step) {
	for _, s := range steps {
		fmt.Fprintf(w, "%s %s: %s\n", s.State.mark(), s.Name, oneLine(s.Detail))
		if (s.State == Failed || s.State == Pending) && s.Hint != "" {
			fmt.Fprintf(w, "    hint: %s\n", oneLine(s.Hint))
		}
	}
}

// PrintConditions writes the conditions of one object, one a line, under a heading.
func PrintConditions(w io.Writer, heading string, conds []metav1.Condition) {
	if len(conds) == 0 {
		fmt.Fprintf(w, "%s: no conditions\n", heading)
		return
	}
	fmt.Fprintf(w, "%s:\n", heading)
	for _, c := range conds {
		line := fmt.Sprintf("  %s=%s", c.Type, c.Status)
		if c.Reason != "" {
			line += " " + c.Reason
		}
		if c.Message != "" {
			line += ": " + oneLine(c.Message)
		}
		fmt.Fprintln(w, line)
	}
}

// oneLine keeps a text on one line: messages come from the hub and may hold newlines.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
