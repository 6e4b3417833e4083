package tenantside

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The ccm as the kubelb-ccm chart installs it.
const (
	// ccmAppName is the app.kubernetes.io/name label of the chart's Deployment.
	ccmAppName = "kubelb-ccm"
	// ccmContainer is the name of the ccm's container.
	ccmContainer = "ccm"
	// ccmKubeconfigVolume is the volume that carries the hub kubeconfig into the ccm's Pod.
	ccmKubeconfigVolume = "kubelb-kubeconfig"
	// ccmLeaseName is the ccm's leader election Lease (cmd/ccm's leaderElectionID).
	ccmLeaseName = "kubelb-ccm.kubelb.k8c.io"
	// Defaults of the chart: the Secret holding the hub kubeconfig, in the release namespace.
	defaultCCMNamespace = "kubelb"
	defaultSecretName   = "kubelb-cluster"
	defaultSecretKey    = "kubelb"
)

// CCM is the ccm's Deployment in the tenant cluster, as far as the checks need it.
type CCM struct {
	Namespace, Name string
	// ReadyReplicas of the Deployment.
	ReadyReplicas, Replicas int32
	// Args are the ccm container's flags ("--flag" → value; "true" for a bare flag).
	Args map[string]string
	// SecretName and SecretKey locate the hub kubeconfig Secret in Namespace.
	SecretName, SecretKey string
}

// Flag is the value of one of the ccm's flags, or def when it is not given.
func (c *CCM) Flag(name, def string) string {
	if c == nil {
		return def
	}
	if v, ok := c.Args[name]; ok {
		return v
	}
	return def
}

// FindCCM finds the ccm's Deployment: the one labelled app.kubernetes.io/name=kubelb-ccm, in
// any namespace. It returns nil (and no error) when there is none.
func FindCCM(ctx context.Context, c client.Reader) (*CCM, error) {
	list := &appsv1.DeploymentList{}
	if err := c.List(ctx, list, client.MatchingLabels{"app.kubernetes.io/name": ccmAppName}); err != nil {
		return nil, fmt.Errorf("listing the ccm's Deployment: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	d := &list.Items[0]
	out := &CCM{Namespace: d.Namespace, Name: d.Name, ReadyReplicas: d.Status.ReadyReplicas, Args: map[string]string{},
		SecretName: defaultSecretName, SecretKey: defaultSecretKey}
	if d.Spec.Replicas != nil {
		out.Replicas = *d.Spec.Replicas
	}
	for _, ct := range d.Spec.Template.Spec.Containers {
		if ct.Name == ccmContainer || len(d.Spec.Template.Spec.Containers) == 1 {
			out.Args = ParseFlags(append(append([]string{}, ct.Command...), ct.Args...))
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == ccmKubeconfigVolume && v.Secret != nil {
			out.SecretName = v.Secret.SecretName
			if len(v.Secret.Items) > 0 {
				out.SecretKey = v.Secret.Items[0].Key
			}
		}
	}
	return out, nil
}

// ParseFlags reads "--name=value", "--name value" and bare "--name" (value "true") from a
// command line; other words are ignored.
func ParseFlags(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name := "--" + strings.TrimLeft(a, "-")
		if k, v, found := strings.Cut(name, "="); found {
			out[k] = v
			continue
		}
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out[name] = args[i+1]
			i++
			continue
		}
		out[name] = "true"
	}
	return out
}
