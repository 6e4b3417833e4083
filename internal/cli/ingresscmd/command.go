package ingresscmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/spf13/cobra"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/cli"
)

// Read reads the Ingresses of manifests (several YAML documents, JSON, or a List); other
// kinds are skipped.
func Read(r io.Reader, where string) ([]networkingv1.Ingress, error) {
	var out []networkingv1.Ingress
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	for doc := 1; ; doc++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", where, doc, err)
		}
		items := []unstructured.Unstructured{*u}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s, document %d: %w", where, doc, err)
			}
			items = list.Items
		}
		for _, it := range items {
			if it.GetKind() != "Ingress" {
				continue
			}
			var ing networkingv1.Ingress
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(it.Object, &ing); err != nil {
				return nil, fmt.Errorf("%s, document %d: %w", where, doc, err)
			}
			if ing.Namespace == "" {
				ing.Namespace = "default"
			}
			out = append(out, ing)
		}
	}
}

// Write writes the objects of res as YAML documents to out, and the notes, per Ingress, to
// errOut.
func Write(res Result, out, errOut io.Writer) error {
	var objs []any
	for _, g := range res.Gateways {
		objs = append(objs, g)
	}
	for _, r := range res.HTTPRoutes {
		objs = append(objs, r)
	}
	for _, p := range res.Policies {
		objs = append(objs, p.Object)
	}
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		// Without the empty status: these are objects to apply.
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			return err
		}
		delete(m, "status")
		if b, err = yaml.Marshal(m); err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(out, "---")
		}
		if _, err := out.Write(b); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(res.Notes) {
		fmt.Fprintf(errOut, "Ingress %s: cannot be fully expressed:\n", k)
		for _, n := range res.Notes[k] {
			fmt.Fprintf(errOut, "  - %s\n", n)
		}
	}
	return nil
}

func sortedKeys(m map[string][]string) []string { return slices.Sorted(maps.Keys(m)) }

// Command is `kubectl kubelb ingress` with its subcommand convert.
func Command(o *cli.Options) *cobra.Command {
	c := &cobra.Command{Use: "ingress", Short: "Work with Ingresses: convert them to Gateway API", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
	var files []string
	var all bool
	opts := Options{}
	conv := &cobra.Command{
		Use:   "convert [-f FILE...] [-A]",
		Short: "Write Gateway API objects (Gateway, HTTPRoutes) and policies for Ingresses, and say what cannot be expressed",
		Long: "convert reads Ingresses (from files, - for stdin, or from the cluster) and writes on stdout\n" +
			"a Gateway per namespace and HTTPRoutes, with the ingress-nginx annotations that map onto\n" +
			"Gateway API: ssl-redirect and force-ssl-redirect (an HTTP route redirecting to HTTPS),\n" +
			"rewrite-target (URLRewrite), permanent-/temporal-redirect and app-root (RequestRedirect),\n" +
			"enable-cors (CORS), affinity cookie (sessionPersistence), canary (weighted backendRefs, a\n" +
			"header match), and as Envoy Gateway's policies, which kubelb reads: allowlist-, whitelist- and\n" +
			"denylist-source-range, auth-type basic (SecurityPolicy), proxy-connect-timeout, limit-rps/-rpm,\n" +
			"upstream-hash-by and load-balance (BackendTrafficPolicy), upstream-vhost (URLRewrite),\n" +
			"mirror-target (RequestMirror). On stderr\n" +
			"it names, per Ingress, what cannot be expressed. See docs/ingress-nginx.md.",
		Example: "  kubectl kubelb ingress convert -A > gateway-api.yaml\n" +
			"  kubectl get ingress -n shop -o yaml | kubectl kubelb ingress convert -f -",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ings []networkingv1.Ingress
			if len(files) == 0 {
				var err error
				if ings, err = fromCluster(cmd.Context(), o, all); err != nil {
					return err
				}
			}
			for _, f := range files {
				r := o.Streams.In
				if f != "-" {
					fh, err := os.Open(f)
					if err != nil {
						return err
					}
					defer fh.Close()
					r = fh
				}
				got, err := Read(r, f)
				if err != nil {
					return err
				}
				ings = append(ings, got...)
			}
			return Write(Convert(ings, opts), o.Streams.Out, o.Streams.ErrOut)
		},
	}
	conv.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest file with Ingresses (YAML or JSON, several documents or a List); - for stdin")
	conv.Flags().BoolVarP(&all, "all-namespaces", "A", false, "read the Ingresses of every namespace of the cluster")
	conv.Flags().StringVar(&opts.GatewayClass, "gateway-class", "kubelb", "gatewayClassName of the Gateways written")
	conv.Flags().StringVar(&opts.GatewayName, "gateway-name", "ingress", "name of the Gateway written in each namespace")
	c.AddCommand(conv)
	return c
}

// fromCluster lists the Ingresses of the current namespace (all with all).
func fromCluster(ctx context.Context, o *cli.Options, all bool) ([]networkingv1.Ingress, error) {
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	if err := networkingv1.AddToScheme(s); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	var opts []client.ListOption
	if !all {
		ns, err := o.CurrentNamespace()
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.InNamespace(ns))
	}
	var list networkingv1.IngressList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing Ingresses: %w", err)
	}
	return list.Items, nil
}
