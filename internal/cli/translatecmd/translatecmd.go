// Package translatecmd is `kubectl kubelb translate -f FILE`: the manager's translation run
// offline on manifests (hub objects as `kubectl get -o yaml` writes them, and tenant Services
// of type LoadBalancer as the ccm mirrors them), printing the problems the manager would put
// in conditions and, with -o yaml|json, the Envoy resources it would serve.
package translatecmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// Result is what the manager would make of a tenant.
type Result struct {
	// Problems are what the manager puts in the objects' conditions, sorted.
	Problems ir.Problems
	// Resources are the Envoy resources the tenant's fleet would be served.
	Resources translator.Resources
	// Routes are the statuses of the Routes, by name, as the ccm copies them back.
	Routes map[string]translate.RouteStatus
}

// Errors counts the problems of severity Error: sections the manager would not serve.
func (r Result) Errors() int {
	n := 0
	for _, p := range r.Problems {
		if p.Severity == ir.SeverityError {
			n++
		}
	}
	return n
}

// Document is the -o yaml|json form of a Result: the problems and the Envoy resources by
// kind (snake_case field names, as in Envoy's docs); secrets by name only.
type Document struct {
	Tenant    string       `json:"tenant"`
	Problems  []ir.Problem `json:"problems,omitempty"`
	Listeners []any        `json:"listeners,omitempty"`
	Routes    []any        `json:"routes,omitempty"`
	Clusters  []any        `json:"clusters,omitempty"`
	Endpoints []any        `json:"endpoints,omitempty"`
	Secrets   []string     `json:"secrets,omitempty"`
}

// NewDocument makes the Document of a Result. Secrets carry private keys: only their
// names are kept.
func NewDocument(tenant string, r Result) (Document, error) {
	d := Document{Tenant: tenant, Problems: r.Problems}
	for _, k := range []struct {
		typeURL string
		into    *[]any
	}{
		{resource.ListenerType, &d.Listeners}, {resource.RouteType, &d.Routes},
		{resource.ClusterType, &d.Clusters}, {resource.EndpointType, &d.Endpoints},
	} {
		list, err := translator.Plain(r.Resources[k.typeURL])
		if err != nil {
			return Document{}, err
		}
		*k.into = list
	}
	for _, s := range r.Resources[resource.SecretType] {
		d.Secrets = append(d.Secrets, cache.GetResourceName(s))
	}
	return d, nil
}

// Options of the command.
type Options struct {
	Files  []string
	Output string // "", "yaml" or "json"
	// Tenant is the tenant's hub namespace; empty: the manifests'.
	Tenant string
}

// Run reads the manifests, translates them and writes the result to out: one line per
// problem (and the notes of what was assumed) or, with Output, the Document. It returns an
// error when a problem is an Error (a section the manager would not serve).
func Run(ctx context.Context, o Options, in io.Reader, out io.Writer) error {
	switch o.Output {
	case "", "yaml", "json":
	default:
		return fmt.Errorf("unknown output format %q: use yaml or json", o.Output)
	}
	if len(o.Files) == 0 {
		return fmt.Errorf("no manifests: give them with -f FILE (- for stdin)")
	}
	scheme := process.Scheme()
	m, err := ReadFiles(o.Files, in, scheme)
	if err != nil {
		return err
	}
	hub, err := BuildHub(m, scheme, o.Tenant)
	if err != nil {
		return err
	}
	r, err := Translate(ctx, hub)
	if err != nil {
		return fmt.Errorf("translating tenant %s: %w", hub.Tenant, err)
	}
	if o.Output != "" {
		d, err := NewDocument(hub.Tenant, r)
		if err != nil {
			return err
		}
		var b []byte
		if o.Output == "json" {
			b, err = json.MarshalIndent(d, "", "  ")
			b = append(b, '\n')
		} else {
			b, err = yaml.Marshal(d)
		}
		if err != nil {
			return err
		}
		if _, err := out.Write(b); err != nil {
			return err
		}
	} else {
		printProblems(out, hub, m, r)
	}
	if n := r.Errors(); n > 0 {
		return fmt.Errorf("%d of the tenant's sections would not be served (problems of severity Error)", n)
	}
	return nil
}

// printProblems writes the notes and one line per problem, for people.
func printProblems(out io.Writer, hub *Hub, m Manifests, r Result) {
	for _, n := range m.Ignored {
		fmt.Fprintf(out, "note: ignored %s\n", n)
	}
	for _, n := range hub.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	fmt.Fprintf(out, "tenant %s: %d listeners, %d clusters, %d route configurations\n", hub.Tenant,
		len(r.Resources[resource.ListenerType]), len(r.Resources[resource.ClusterType]), len(r.Resources[resource.RouteType]))
	if len(r.Problems) == 0 {
		fmt.Fprintln(out, "✓ no problems: the manager would serve every object as given")
		return
	}
	for _, p := range r.Problems {
		mark := "✗"
		if p.Severity != ir.SeverityError {
			mark = "!"
		}
		fmt.Fprintf(out, "%s %s %s/%s: %s %s\n", mark, p.Object.Kind, p.Object.Namespace, p.Object.Name, p.Severity, p.String())
	}
}

// Command is `kubectl kubelb translate`.
func Command(o *cli.Options) *cobra.Command {
	opts := Options{}
	c := &cobra.Command{
		Use:   "translate -f FILE [-f FILE...] [-o yaml|json]",
		Short: "Translate manifests offline as the manager would: the problems, and the Envoy configuration",
		Long: "translate runs the manager's translation on manifests, with no cluster: hub objects\n" +
			"(LoadBalancer, Route, Addresses, SyncSecret, Config, Tenant, the hub Services) as\n" +
			"`kubectl get -o yaml` writes them, and tenant manifests (Services of type LoadBalancer,\n" +
			"Ingresses, Gateways and Gateway API routes with their backend Services and TLS Secrets),\n" +
			"mirrored with the ccm's own functions. It prints the problems the manager would put in the objects'\n" +
			"conditions (exit 1 when one is an Error) and, with -o yaml|json, the Envoy listeners,\n" +
			"route configurations, clusters and endpoints (secrets by name only).",
		Example: "  kubectl get loadbalancers,routes,addresses,services -n tenant-a -o yaml > hub.yaml\n" +
			"  kubectl kubelb translate -f hub.yaml\n" +
			"  kubectl kubelb translate -f service.yaml -o yaml\n" +
			"  kubectl get ingresses,services,secrets -n shop -o yaml | kubectl kubelb translate -f - -n tenant-shop",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Tenant = o.Namespace
			return Run(cmd.Context(), opts, o.Streams.In, o.Streams.Out)
		},
	}
	c.Flags().StringSliceVarP(&opts.Files, "filename", "f", nil, "manifest file (YAML or JSON, several documents or a List); - for stdin")
	c.Flags().StringVarP(&opts.Output, "output", "o", "", "print the problems and Envoy resources as: yaml, json")
	return c
}
