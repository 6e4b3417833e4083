package ccm

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/nodeip"
)

// LabelUseAsLoadBalancer is nodeip.LabelUseAsLoadBalancer: the node label of the node sets,
// and, on a Service, the annotation that picks one.
const LabelUseAsLoadBalancer = nodeip.LabelUseAsLoadBalancer

// DefaultReservedPorts is nodeip.DefaultReservedPorts (the default of --reserved-ports).
const DefaultReservedPorts = nodeip.DefaultReservedPorts

// Reasons of the standalone node-IP mode's Events (see internal/nodeip).
const (
	// ReasonNoLoadBalancerNodes (Warning): no Ready node carries the node-set label the
	// Service asks for; it stays pending.
	ReasonNoLoadBalancerNodes = nodeip.ReasonNoLoadBalancerNodes
	// ReasonPortConflict (Warning): a port of the Service is reserved, or held on one of its
	// node addresses by a Service created earlier (named in the note); it stays pending.
	ReasonPortConflict = nodeip.ReasonPortConflict
	// ReasonInvalidNodeSet (Warning): the Service's kubelb.k8c.io/use-as-loadbalancer
	// annotation is not a valid label value.
	ReasonInvalidNodeSet = nodeip.ReasonInvalidNodeSet
)

// SetupStandalone adds the controllers of the standalone node-IP mode to mgr (a manager on
// the cluster itself; there is no hub): the node-IP controller (internal/nodeip) for the
// Services of the ccm's class, the node set chosen by each Service's annotation.
func SetupStandalone(mgr ctrl.Manager, opts Options) error {
	return nodeip.Setup(mgr, nodeip.Options{
		Name:     "ccm-node-ip",
		Owns:     func(svc *corev1.Service) bool { return ServiceClass(svc, opts.UseLoadBalancerClass) == OurClass },
		NodeSet:  nodeip.StandaloneNodeSet,
		Reserved: opts.ReservedPorts,
		NAT:      opts.NodeIPNAT,
		Metrics:  metrics.CCMNodeIP,
		Observe:  func(serving int) { metrics.CCMNodes.Set(float64(serving)) },
	})
}

// StandaloneReleaseReport is what ReleaseStandalone did.
type StandaloneReleaseReport struct {
	// Services are the Services whose address and condition were cleared ("ns/name").
	Services []string
	// Shadows are the 1:1 NAT shadow Services deleted ("ns/name").
	Shadows []string
}

// Summary is the report in one line.
func (r StandaloneReleaseReport) Summary() string {
	return fmt.Sprintf("cleared the address of %d Services; deleted %d NAT shadow Services (standalone mode: no hub)", len(r.Services), len(r.Shadows))
}

// ReleaseStandalone hands back what a standalone ccm gave the cluster (`ccm release
// --mode=standalone`, with the ccm stopped): the Services of its class that carry the
// address providers' condition get their status.loadBalancer and ConditionAddressAssigned
// cleared with the providers' own Clear (no other implementation writes the addresses of
// Services of kubelb's class), and the 1:1 NAT shadow Services are deleted. There is no
// finalizer and no hub in standalone mode. It is idempotent.
func ReleaseStandalone(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, useClass bool) (StandaloneReleaseReport, error) {
	var rep StandaloneReleaseReport
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return rep, fmt.Errorf("connecting to the cluster: %w", err)
	}
	list := &corev1.ServiceList{}
	if err := c.List(ctx, list); err != nil {
		return rep, fmt.Errorf("listing Services: %w", err)
	}
	log := ctrl.LoggerFrom(ctx)
	w := &lbaddress.Writer{Client: c, Recorder: discardEvents{}}
	var errs []error
	for i := range list.Items {
		svc := &list.Items[i]
		key := client.ObjectKeyFromObject(svc)
		switch {
		case svc.Labels[nodeip.LabelNATShadowOf] != "" && hubnames.IsManaged(svc):
			if err := c.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("deleting NAT shadow Service %s: %w", key, err))
				continue
			}
			log.Info("deleted NAT shadow Service", "service", key)
			rep.Shadows = append(rep.Shadows, key.String())
		case ServiceClass(svc, useClass) == OurClass && lbaddress.Serves(svc):
			var err error
			for range releaseRetries {
				if err = w.Clear(ctx, svc, true); !apierrors.IsConflict(err) {
					break
				}
				if err = c.Get(ctx, key, svc); err != nil {
					break
				}
			}
			if client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("clearing the status of Service %s: %w", key, err))
				continue
			}
			log.Info("cleared the address of Service", "service", key)
			rep.Services = append(rep.Services, key.String())
		}
	}
	return rep, errors.Join(errs...)
}
