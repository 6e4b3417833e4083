package status

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
)

// A LoadBalancer's status has two producers, the LoadBalancer controller (ports, address,
// Ready) and the leader-only Writer (Programmed), both written by the Sink, and a new
// LoadBalancer would cost a status write of each. To write a new LoadBalancer's status once:
//   - the LoadBalancer controller carries the Programmed verdict (LoadBalancerProgrammed)
//     in its own status write when the latest Report knows the LoadBalancer at its
//     generation, and its first write waits a bounded while for that Report (AwaitVerdict:
//     Publish requeues the LoadBalancer when it comes);
//   - the Writer leaves a LoadBalancer alone until the LoadBalancer controller has written
//     Ready (its first status write carries the verdict when it is known; the Writer hears
//     of the Ready condition's appearance).
// Neither gives a verdict while a port of the LoadBalancer is pending: envoycp leaves a
// LoadBalancer whose hub Service has no listener port for it yet out of the Report, or lists
// it in Report.Waiting (translate.Settled), and the translation that follows the allocation
// gives the verdict.

// LoadBalancerProgrammed is the Programmed condition of lb as the Writer would write it,
// from the tenant's latest Report and its TenantState's rejections (read through reader), and
// whether it is known: false when the Report does not describe lb at its generation, or the
// verdict is transient.
func (s *Store) LoadBalancerProgrammed(ctx context.Context, reader client.Reader, lb *v1alpha1.LoadBalancer) (metav1.Condition, bool, error) {
	report := s.Get(lb.Namespace)
	if report == nil {
		return metav1.Condition{}, false, nil
	}
	ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: lb.Namespace, Name: lb.Name}
	gen, ok := report.Objects[ref]
	if !ok || gen != lb.Generation || !report.GivesVerdict(ref) {
		return metav1.Condition{}, false, nil
	}
	rejections, err := readRejections(ctx, reader, lb.Namespace)
	if err != nil {
		return metav1.Condition{}, false, err
	}
	var problems []ir.Problem
	for _, p := range report.Problems { // problems of a port (a section) are the object's
		if p.Object.Object() == ref {
			problems = append(problems, p)
		}
	}
	for _, p := range rejectionProblems(report, rejections) {
		if p.Object.Object() == ref {
			problems = append(problems, p)
		}
	}
	return Programmed(gen, problems), true, nil
}

// readRejections reads a tenant's rejections from its TenantState (none when it has none).
func readRejections(ctx context.Context, reader client.Reader, tenant string) ([]Rejected, error) {
	ts := &v1alpha1.TenantState{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: tenant, Name: hubnames.TenantStateName}, ts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting TenantState %s/%s: %w", tenant, hubnames.TenantStateName, err)
	}
	out := make([]Rejected, 0, len(ts.Status.Rejections))
	for _, r := range ts.Status.Rejections {
		out = append(out, Rejected{Proxy: r.Proxy, TypeURL: r.TypeURL, Version: r.Version, Message: r.Message})
	}
	return out, nil
}

// ProgrammedEvent records the Event of a change of a Programmed condition from prev (nil:
// none) to cond, as the Writer does: a Warning when it is False or has warnings, a Normal one
// when it recovered; nothing when its meaning did not change.
func ProgrammedEvent(recorder events.EventRecorder, obj *v1alpha1.LoadBalancer, prev *metav1.Condition, cond metav1.Condition) {
	(&Writer{recorder: recorder}).event(obj, prev, cond)
}
