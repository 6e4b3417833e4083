package envoycp

// The apply and the publish of a rebuild: the back end's Envoy resources go to the xDS
// server (push: skipped when the IR equals the one last pushed), and what came of the
// translation to the status store (report), whose leader-only writer turns it into
// conditions.

import (
	"context"
	"fmt"
	"slices"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// Snapshots is what the reconciler needs of the xDS server (*xds.Server implements it).
type Snapshots interface {
	SetTenant(ctx context.Context, tenant string, res xds.Resources) (bool, error)
	RemoveTenant(tenant string)
	TypeVersion(tenant, typeURL string) string
}

var _ Snapshots = (*xds.Server)(nil)

// built is the last IR of a tenant that reached the xDS server, with what came of it.
type built struct {
	cfg      *ir.Config
	problems ir.Problems // of the back end
	owners   map[string]map[string][]ir.ObjectRef
}

// push runs the back end (with the tenant's cache) and sets the snapshot, unless the IR
// equals the one last pushed.
func (r *Reconciler) push(ctx context.Context, tenant string, cfg *ir.Config, back *translator.Cache) (*built, bool, error) {
	r.mu.Lock()
	last := r.last[tenant]
	r.mu.Unlock()
	if last != nil && last.cfg.Equal(cfg) {
		return last, false, nil
	}
	res, problems, err := back.Translate(cfg)
	if err != nil {
		return nil, false, fmt.Errorf("building the Envoy resources of tenant %s: %w", tenant, err)
	}
	// The tenant's rate-limit service gets its configuration from the same snapshot.
	if rlc, err := translator.RateLimitConfig(cfg); err != nil {
		return nil, false, fmt.Errorf("building the rate-limit configuration of tenant %s: %w", tenant, err)
	} else if rlc != nil {
		res[resource.RateLimitConfigType] = []types.Resource{rlc}
	}
	changed, err := r.snapshots.SetTenant(ctx, tenant, res)
	if err != nil {
		return nil, false, fmt.Errorf("setting the Envoy snapshot of tenant %s: %w", tenant, err)
	}
	b := &built{cfg: cfg, problems: problems, owners: back.Owners(cfg)}
	r.mu.Lock()
	r.last[tenant] = b
	r.mu.Unlock()
	return b, changed, nil
}

// report is what the status writer needs to know of this translation of in: out is the
// front ends' result with what the tenant's settings held back (translate.Held.With), b
// what the back end made of it; the objects waiting for a listener port that were not
// translated at their own version are left out, those that were have no verdict yet.
func (r *Reconciler) report(in *translate.Input, held translate.Held, waiting translate.Waiting, out translate.Result, b *built) *status.Report {
	rep := &status.Report{
		Objects:  translate.Generations(in, held),
		Waiting:  waiting.Translated,
		Problems: slices.Concat(out.Problems, b.problems),
		Owners:   b.owners,
		Versions: map[string]string{},
		Routes:   out.Routes,
	}
	rep.Problems.Sort()
	rep.Objects, rep.Problems, rep.Routes = waiting.Untold(rep.Objects, rep.Problems, rep.Routes)
	for _, typeURL := range xds.TypeURLs {
		if v := r.snapshots.TypeVersion(in.Tenant, typeURL); v != "" {
			rep.Versions[typeURL] = v
		}
	}
	return rep
}
