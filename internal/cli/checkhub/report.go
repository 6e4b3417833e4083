package checkhub

import (
	"fmt"
	"io"
)

// Status is the outcome of one check.
type Status int

const (
	// Pass: nothing to do.
	Pass Status = iota
	// Warn: worth knowing, not a failure (the exit status stays 0).
	Warn
	// Fail: something does not work; the check's hint says what to do.
	Fail
	// Skip: not checked, and why.
	Skip
)

// mark is the status's mark at the start of a printed line.
func (s Status) mark() string {
	switch s {
	case Pass:
		return "✓"
	case Warn:
		return "!"
	case Fail:
		return "✗"
	}
	return "-"
}

// Check is the result of one check: one line, and a hint for a failure or a warning.
type Check struct {
	Name   string
	Status Status
	Detail string
	Hint   string
}

// Print writes one line per check, in order, with the hint of each failed or warned check
// under it, and returns the number of failed checks.
func Print(w io.Writer, checks []Check) (failed int) {
	for _, c := range checks {
		fmt.Fprintf(w, "%s %s: %s\n", c.Status.mark(), c.Name, c.Detail)
		if c.Hint != "" && (c.Status == Fail || c.Status == Warn) {
			fmt.Fprintf(w, "    → %s\n", c.Hint)
		}
		if c.Status == Fail {
			failed++
		}
	}
	return failed
}
