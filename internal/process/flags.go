package process

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"kubelb.dev/kubelb/internal/version"
)

// FlagSet wraps a standard flag set so that --help lists flags with two dashes and a bad
// value is reported in one line naming the flag.
type FlagSet struct {
	*flag.FlagSet
	required []string
	version  bool
	topics   []topic
}

// topic is a heading of --help and the flags listed under it.
type topic struct {
	title string
	names []string
}

// Topic lists the named flags under title in --help, topics in the order they were added.
// Flags of no topic are listed last, under "Other flags".
func (f *FlagSet) Topic(title string, names ...string) {
	f.topics = append(f.topics, topic{title, names})
}

// ErrVersion is what Parse returns for --version: print the build information and exit 0.
var ErrVersion = errors.New("version requested")

// NewFlagSet returns a flag set for the named program holding only --version.
func NewFlagSet(program string) *FlagSet {
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := &FlagSet{FlagSet: fs}
	fs.BoolVar(&f.version, "version", false, "Print the version, commit and build date, and exit.")
	return f
}

// Required marks flags that must be given a non-empty value.
func (f *FlagSet) Required(names ...string) { f.required = append(f.required, names...) }

var singleDash = regexp.MustCompile(`(^|[ :])-([a-zA-Z])`)

// Parse parses args. It returns flag.ErrHelp for -h/--help, ErrVersion for --version
// (before any check of the other flags), and otherwise a one-line error that names the
// offending flag with two dashes.
func (f *FlagSet) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errors.New(singleDash.ReplaceAllString(err.Error(), "$1--$2"))
	}
	if f.version {
		return ErrVersion
	}
	if f.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", f.Arg(0))
	}
	for _, name := range f.required {
		if fl := f.Lookup(name); fl != nil && fl.Value.String() == "" {
			return fmt.Errorf("flag --%s is required", name)
		}
	}
	return nil
}

// Usage writes the help text: the flags by topic (see Topic), each with two dashes, its
// default, its meaning and, for an Enum, its choices.
func (f *FlagSet) Usage(w io.Writer, summary string) {
	fmt.Fprintf(w, "%s\n\nUsage: %s [flags]\n", summary, f.Name())
	listed := map[string]bool{}
	for _, t := range f.topics {
		fmt.Fprintf(w, "\n%s:\n", t.title)
		for _, name := range t.names {
			if fl := f.Lookup(name); fl != nil && !listed[name] {
				listed[name] = true
				writeFlag(w, fl)
			}
		}
	}
	heading := "Flags"
	if len(f.topics) > 0 {
		heading = "Other flags"
	}
	first := true
	f.VisitAll(func(fl *flag.Flag) {
		if listed[fl.Name] {
			return
		}
		if first {
			fmt.Fprintf(w, "\n%s:\n", heading)
			first = false
		}
		writeFlag(w, fl)
	})
}

// Untopical returns the flags that no Topic lists.
func (f *FlagSet) Untopical() []string {
	listed := map[string]bool{}
	for _, t := range f.topics {
		for _, n := range t.names {
			listed[n] = true
		}
	}
	var rest []string
	f.VisitAll(func(fl *flag.Flag) {
		if !listed[fl.Name] {
			rest = append(rest, fl.Name)
		}
	})
	return rest
}

func writeFlag(w io.Writer, fl *flag.Flag) {
	kind, usage := flag.UnquoteUsage(fl)
	line := "  --" + fl.Name
	switch v := fl.Value.(type) {
	case *Enum:
		kind = strings.Join(v.Allowed, "|")
	case *Address:
		kind = "host:port"
	}
	if kind != "" {
		line += " " + kind
	}
	fmt.Fprintf(w, "%s\n      %s", line, strings.ReplaceAll(usage, "\n", "\n      "))
	if fl.DefValue != "" {
		fmt.Fprintf(w, " (default %q)", fl.DefValue)
	}
	fmt.Fprintln(w)
}

// Enum is a string flag restricted to a set of values.
type Enum struct {
	Value   string
	Allowed []string
}

// String implements flag.Value.
func (e *Enum) String() string { return e.Value }

// Set implements flag.Value.
func (e *Enum) Set(v string) error {
	if !slices.Contains(e.Allowed, v) {
		return fmt.Errorf("must be one of %s", strings.Join(e.Allowed, ", "))
	}
	e.Value = v
	return nil
}

// Address is a host:port flag (host may be empty, port must be a number, or "0" to disable).
type Address struct{ Value string }

// String implements flag.Value.
func (a *Address) String() string { return a.Value }

// Set implements flag.Value.
func (a *Address) Set(v string) error {
	if v == "0" {
		a.Value = v
		return nil
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("want host:port, e.g. :8080")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	a.Value = v
	return nil
}

// Undocumented returns the flags that a reference page does not mention as `--name`.
func (f *FlagSet) Undocumented(doc string) []string {
	var missing []string
	f.VisitAll(func(fl *flag.Flag) {
		if !strings.Contains(doc, "`--"+fl.Name+"`") {
			missing = append(missing, fl.Name)
		}
	})
	return missing
}

// NotYetHelp starts the help text of a flag that is accepted but not implemented yet.
const NotYetHelp = "Not yet implemented: accepted and ignored (a warning is logged). "

// NotYetSet returns, of the named flags (flags a binary accepts but does not act on yet),
// those given on the command line with a value other than their default, as --name=value in
// the order of names. A flag given with its default value asks for nothing and is left out,
// so a chart that always passes the defaults causes no warning.
func (f *FlagSet) NotYetSet(names []string) []string {
	visited := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { visited[fl.Name] = true })
	var set []string
	for _, name := range names {
		fl := f.Lookup(name)
		if fl == nil || !visited[name] || fl.Value.String() == fl.DefValue {
			continue
		}
		set = append(set, "--"+name+"="+fl.Value.String())
	}
	return set
}

// NotYetWarning is the one start-up warning about not-yet flags that were set (see
// NotYetSet), or "" when none was.
func (f *FlagSet) NotYetWarning(names []string) string {
	set := f.NotYetSet(names)
	if len(set) == 0 {
		return ""
	}
	return "WARNING: these flags are accepted but not implemented yet, and are ignored: " + strings.Join(set, ", ")
}

// DocSection returns the part of a Markdown page from the line starting with heading up to the
// next heading of the same level ("" when the heading is missing), so that a binary's flags
// are checked in its own section when two binaries share a flag name.
func DocSection(doc, heading string) string {
	i := strings.Index(doc, "\n"+heading)
	if i < 0 {
		return ""
	}
	rest := doc[i+1:]
	level := heading[:strings.IndexByte(heading+" ", ' ')+1] // "## "
	if j := strings.Index(rest[len(heading):], "\n"+level); j >= 0 {
		return rest[:len(heading)+j+1]
	}
	return rest
}

// NotYetUndocumented returns the named flags that have no row in a reference page (a table
// line that starts with "| `--name`"), or a row that does not say "not yet".
func NotYetUndocumented(doc string, names []string) []string {
	var missing []string
	for _, name := range names {
		rows, marked := 0, 0
		for _, line := range strings.Split(doc, "\n") {
			if strings.HasPrefix(line, "| `--"+name+"`") {
				rows++
				if strings.Contains(strings.ToLower(line), "not yet") {
					marked++
				}
			}
		}
		if rows == 0 || marked < rows {
			missing = append(missing, name)
		}
	}
	return missing
}

// VersionLine is what --version prints: program, version, commit and build date.
func VersionLine(program string) string {
	v := version.Get()
	return fmt.Sprintf("%s %s (commit %s, built %s)", program, v.GitVersion, v.GitCommit, v.BuildDate)
}

// Main runs a binary: parse its flags (--help prints the usage and exits 0, --version prints
// VersionLine and exits 0; a bad flag exits 2 with one line naming it), then run (a failure
// exits 1).
func Main[O any](program, summary string, parse func([]string) (O, *FlagSet, error), run func(O) error) {
	MainArgs(program, summary, os.Args[1:], parse, run)
}

// MainArgs is Main with the arguments given (a subcommand's, after its name).
func MainArgs[O any](program, summary string, args []string, parse func([]string) (O, *FlagSet, error), run func(O) error) {
	o, fs, err := parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage(os.Stdout, summary)
		return
	}
	if errors.Is(err, ErrVersion) {
		fmt.Println(VersionLine(program))
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", program, err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		_ = logOut.Close() // the next line is the last one
		fmt.Fprintf(os.Stderr, "%s: %v\n", program, err)
		os.Exit(1)
	}
}

// DeprecatedHelp starts the help text of a flag that is accepted for compatibility and
// ignored.
const DeprecatedHelp = "Deprecated: accepted and ignored (a warning is logged). "

// DeprecatedBool defines a boolean flag that is accepted (so that command lines written for
// KubeLB CE keep working) and ignored.
func (f *FlagSet) DeprecatedBool(name string, value bool, usage string) {
	f.Bool(name, value, DeprecatedHelp+usage)
}

// DeprecatedWarning is the one start-up warning about deprecated flags given on the command
// line (whatever their value), or "" when none was.
func (f *FlagSet) DeprecatedWarning(names []string) string {
	visited := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { visited[fl.Name] = true })
	var set []string
	for _, name := range names {
		if fl := f.Lookup(name); fl != nil && visited[name] {
			set = append(set, "--"+name+"="+fl.Value.String())
		}
	}
	if len(set) == 0 {
		return ""
	}
	return "WARNING: these flags are deprecated, have no effect, and will be removed: " + strings.Join(set, ", ")
}

// GivenWarning names the flags of names that were given, in a warning saying they are not
// used <when> and are ignored; "" when none was given.
func (f *FlagSet) GivenWarning(names []string, when string) string {
	var given []string
	f.Visit(func(fl *flag.Flag) {
		if slices.Contains(names, fl.Name) {
			given = append(given, "--"+fl.Name)
		}
	})
	if len(given) == 0 {
		return ""
	}
	return fmt.Sprintf("WARNING: these flags are not used %s, and are ignored: %s", when, strings.Join(given, ", "))
}
