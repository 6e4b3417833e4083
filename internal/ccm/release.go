package ccm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm/secrets"
	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/logging"
	"kubelb.dev/kubelb/internal/metrics"
)

// DefaultHubWait is how long Release waits for the hub by default before it releases the
// tenant side alone.
const DefaultHubWait = 30 * time.Second

// hubRetry is how soon Release asks a hub that failed at once again, within the hub wait.
const hubRetry = time.Second

// hubRequestTimeout bounds one request of Release to the hub once it answered.
const hubRequestTimeout = 15 * time.Second

// ReleaseReport is what Release did.
type ReleaseReport struct {
	// Namespace is the tenant's namespace on the hub.
	Namespace string
	// HubReachable tells whether the hub answered within the wait; when false nothing was
	// deleted on the hub.
	HubReachable bool
	// Services, Secrets and Layer7 are the tenant objects released ("ns/name"; Layer7:
	// "Kind ns/name").
	Services, Secrets, Layer7 []string
	// Twins are the NodePort twins deleted ("ns/name").
	Twins []string
	// MirrorsOfGone counts the hub LoadBalancers and Routes whose tenant object no longer
	// existed, deleted.
	MirrorsOfGone int
	// AddressesDeleted tells whether Addresses/default was deleted.
	AddressesDeleted bool
	// HubErrors are the failures on the hub alone, after it answered (the tenant side was
	// released all the same).
	HubErrors []string
	// LeftOnHub are the objects of the tenant's namespace on the hub still there and not
	// being deleted after the release ("Kind/name"), as the hub API server answered.
	LeftOnHub []string
}

// Summary is the report in one line.
func (r ReleaseReport) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "released %d Services, %d Secrets, %d Ingresses/Gateway API objects; deleted %d NodePort Services",
		len(r.Services), len(r.Secrets), len(r.Layer7), len(r.Twins))
	switch {
	case !r.HubReachable:
		fmt.Fprintf(&b, "; the hub was not reachable: nothing was deleted there, the mirrors in namespace %s are left (deleting the Tenant on the hub removes them)", r.Namespace)
	case len(r.HubErrors) > 0:
		fmt.Fprintf(&b, "; %d errors on the hub (logged), left in namespace %s: %s", len(r.HubErrors), r.Namespace, strings.Join(r.LeftOnHub, ", "))
	case len(r.LeftOnHub) > 0:
		fmt.Fprintf(&b, "; left in namespace %s on the hub: %s", r.Namespace, strings.Join(r.LeftOnHub, ", "))
	default:
		fmt.Fprintf(&b, "; nothing of this cluster is left in namespace %s on the hub", r.Namespace)
	}
	return b.String()
}

// ReleaseOptions configure Release.
type ReleaseOptions struct {
	// Options are the ccm's options: ClusterName (the tenant's namespace on the hub),
	// UseLoadBalancerClass, EnableCloudProvider, and the Layer 7 and Secret options: as the
	// ccm's controllers (and its RBAC), the release leaves the kinds they switch off alone.
	Options
	// HubWait bounds the wait for the hub's first answers (0: DefaultHubWait); when it runs
	// out the tenant side is released alone.
	HubWait time.Duration
}

// Release hands back everything of kubelb in the tenant cluster, once (`ccm release`, run
// when the ccm is uninstalled, with the ccm stopped): for every Service, Secret, Ingress and
// Gateway API object that carries kubelb's finalizer or is mirrored in the tenant's namespace
// on the hub it runs the controllers' own release — the hub mirror (LoadBalancer, Route,
// SyncSecret) is deleted, the status the ccm wrote is cleared, the finalizer goes — then it
// deletes the hub mirrors of objects that are gone, Addresses/default, and every NodePort
// twin. It is idempotent. When the hub does not answer within HubWait, the tenant side is
// released all the same and the report says that the hub's objects were left. tenantCfg and
// hubCfg are the two clusters (hubCfg nil: the hub's credentials are gone, the tenant side
// is released alone); the caller bounds the whole run with ctx.
func Release(ctx context.Context, tenantCfg, hubCfg *rest.Config, scheme *runtime.Scheme, o ReleaseOptions) (ReleaseReport, error) {
	ns := HubNamespace(o.ClusterName)
	rep := ReleaseReport{Namespace: ns}
	if ns == "" {
		return rep, errors.New("the tenant's namespace on the hub (ClusterName) is required")
	}
	log := ctrl.LoggerFrom(ctx)
	tenant, err := client.New(tenantCfg, client.Options{Scheme: scheme})
	if err != nil {
		return rep, fmt.Errorf("connecting to the tenant cluster: %w", err)
	}
	wait := o.HubWait
	if wait <= 0 {
		wait = DefaultHubWait
	}
	var hub client.Client
	var hubReader client.Reader
	if hubCfg != nil {
		// A refused connection fails at once: ask again until the wait runs out.
		deadline := time.Now().Add(wait)
		for {
			var stop func()
			hub, hubReader, stop, err = startReleaseHub(ctx, hubCfg, scheme, ns, time.Until(deadline))
			if err == nil {
				defer stop()
				break
			}
			stop()
			if time.Until(deadline) < hubRetry || ctx.Err() != nil {
				logging.Warn(log, "WARNING: the hub did not answer; releasing the tenant side only", "wait", wait.String(), "error", err.Error())
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(hubRetry):
			}
		}
	}
	rep.HubReachable = hub != nil

	var errs []error
	svcs := &ServiceReconciler{Tenant: tenant, Hub: hub, Recorder: discardEvents{}, Namespace: ns,
		UseClass: o.UseLoadBalancerClass, External: !o.EnableCloudProvider,
		warn: newWarnOnce(), managed: metrics.NewManagedSet(metrics.CCMManagedServices)}
	released, gone, err := svcs.releaseAll(ctx)
	rep.Services, rep.MirrorsOfGone = released, gone
	errs = append(errs, err)

	l7, err := ccmsource.ReleaseAll(ctx, tenant, hub, tenant.RESTMapper(), ns, sourceOptions(o.Options))
	rep.Layer7, rep.Twins = l7.Released, l7.Twins
	rep.MirrorsOfGone += l7.RoutesOfGone
	rep.HubErrors = append(rep.HubErrors, l7.HubErrors...)
	errs = append(errs, err)

	if o.secretOptions().Enabled() {
		rep.Secrets, err = secrets.ReleaseAll(ctx, tenant, hub, ns)
		errs = append(errs, err)
	}

	if hub != nil {
		addrs := &v1alpha1.Addresses{}
		addrs.Namespace, addrs.Name = ns, v1alpha1.DefaultAddressesName
		switch err := hub.Delete(ctx, addrs); {
		case err == nil:
			rep.AddressesDeleted = true
			log.Info("deleted Addresses", "addresses", client.ObjectKeyFromObject(addrs))
		case !apierrors.IsNotFound(err):
			rep.HubErrors = append(rep.HubErrors, fmt.Sprintf("deleting Addresses %s/%s: %v", ns, addrs.Name, err))
		}
		left, err := leftOnHub(ctx, hubReader, ns)
		rep.LeftOnHub = left
		if err != nil {
			rep.HubErrors = append(rep.HubErrors, err.Error())
		}
	}
	for _, e := range rep.HubErrors {
		logging.Warn(log, "WARNING: on the hub: "+e)
	}
	return rep, errors.Join(errs...)
}

// startReleaseHub starts a cache of the tenant's namespace on the hub with the indexes the
// controllers' release code looks mirrors up by, and waits up to wait for it to sync. It
// returns a client reading from that cache and an uncached reader, or nil clients and the
// error when the hub did not answer in time. stop ends the cache.
func startReleaseHub(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, ns string, wait time.Duration) (client.Client, client.Reader, func(), error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = hubRequestTimeout
	hubCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	stop := func() { cancel(); <-done }
	hub, err := cluster.New(cfg, func(co *cluster.Options) {
		co.Scheme = scheme
		co.Cache.DefaultNamespaces = map[string]cache.Config{ns: {}}
	})
	if err != nil {
		close(done)
		return nil, nil, stop, fmt.Errorf("connecting to the management cluster: %w", err)
	}
	idx := hub.GetFieldIndexer()
	err = errors.Join(idx.IndexField(ctx, &v1alpha1.LoadBalancer{}, indexOrigin, originIndex),
		ccmsource.IndexHub(ctx, idx), secrets.IndexHub(ctx, idx))
	if err != nil {
		close(done)
		return nil, nil, stop, err
	}
	go func() {
		defer close(done)
		_ = hub.Start(hubCtx)
	}()
	waitCtx, cancelWait := context.WithTimeout(hubCtx, wait)
	defer cancelWait()
	for _, obj := range []client.Object{&v1alpha1.LoadBalancer{}, &v1alpha1.Route{}, &v1alpha1.SyncSecret{}} {
		if _, err := hub.GetCache().GetInformer(waitCtx, obj, cache.BlockUntilSynced(false)); err != nil {
			return nil, nil, stop, fmt.Errorf("watching the tenant's namespace %s on the hub: %w", ns, err)
		}
	}
	if !hub.GetCache().WaitForCacheSync(waitCtx) {
		return nil, nil, stop, fmt.Errorf("no complete answer from the hub about namespace %s within %v", ns, wait)
	}
	return hub.GetClient(), hub.GetAPIReader(), stop, nil
}

// leftOnHub lists, from the hub API server, the objects of kubelb's kinds in namespace ns
// that are not being deleted ("Kind/name", sorted).
func leftOnHub(ctx context.Context, hub client.Reader, ns string) ([]string, error) {
	var out []string
	for kind, list := range map[string]client.ObjectList{
		"LoadBalancer": &v1alpha1.LoadBalancerList{}, "Route": &v1alpha1.RouteList{},
		"SyncSecret": &v1alpha1.SyncSecretList{}, "Addresses": &v1alpha1.AddressesList{},
	} {
		if err := hub.List(ctx, list, client.InNamespace(ns)); err != nil {
			return out, fmt.Errorf("listing %s in %s on the hub: %w", kind, ns, err)
		}
		items, err := metaItems(list)
		if err != nil {
			return out, err
		}
		for _, obj := range items {
			if obj.GetDeletionTimestamp() == nil {
				out = append(out, kind+"/"+obj.GetName())
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// releaseAll releases every Service that carries the finalizer or has a mirror on the hub
// (r.Hub nil: the hub is out of reach, the tenant side only), then deletes the mirrors whose
// Service is gone. It returns the Services released and the count of mirrors of gone
// Services deleted.
func (r *ServiceReconciler) releaseAll(ctx context.Context) ([]string, int, error) {
	todo := map[types.NamespacedName]bool{}
	mirrored := map[types.NamespacedName]bool{}
	if r.Hub != nil {
		lbs := &v1alpha1.LoadBalancerList{}
		if err := r.Hub.List(ctx, lbs, client.InNamespace(r.Namespace)); err != nil {
			return nil, 0, fmt.Errorf("listing LoadBalancers in %s: %w", r.Namespace, err)
		}
		for i := range lbs.Items {
			if key, ok := originOf(&lbs.Items[i]); ok {
				todo[key], mirrored[key] = true, true
			}
		}
	}
	list := &corev1.ServiceList{}
	if err := r.Tenant.List(ctx, list); err != nil {
		return nil, 0, fmt.Errorf("listing Services: %w", err)
	}
	for i := range list.Items {
		if controllerutil.ContainsFinalizer(&list.Items[i], v1alpha1.CleanupFinalizer) {
			todo[client.ObjectKeyFromObject(&list.Items[i])] = true
		}
	}
	keys := make([]types.NamespacedName, 0, len(todo))
	for k := range todo {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })

	var released []string
	gone := 0
	var errs []error
	for _, key := range keys {
		ctx := ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("service", key))
		found, err := r.releaseOne(ctx, key)
		switch {
		case err != nil:
			errs = append(errs, err)
		case found:
			released = append(released, key.String())
		case mirrored[key]:
			gone++
		}
	}
	return released, gone, errors.Join(errs...)
}

// releaseOne releases Service key, again on a conflict with the Service as it is now; when
// it is gone its mirrors are deleted. found tells whether the Service exists.
func (r *ServiceReconciler) releaseOne(ctx context.Context, key types.NamespacedName) (found bool, err error) {
	log := ctrl.LoggerFrom(ctx)
	hubFailed := r.Hub == nil
	for range releaseRetries {
		svc := &corev1.Service{}
		if err := r.Tenant.Get(ctx, key, svc); err != nil {
			if !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("getting Service %s: %w", key, err)
			}
			if hubFailed {
				return false, nil
			}
			if err := r.deleteMirrors(ctx, nil, key, ""); err != nil {
				logging.Warn(log, "WARNING: could not delete the mirror of a Service that is gone", "error", err.Error())
			}
			return false, nil
		}
		if !hubFailed {
			err = r.release(ctx, svc)
			if err == nil || apierrors.IsConflict(err) {
				if !apierrors.IsConflict(err) {
					break
				}
				continue
			}
			// The hub failed us: the Service is not held hostage; what stays on the hub is
			// reported.
			logging.Warn(log, "WARNING: could not release the Service on the hub; releasing it in the tenant only", "error", err.Error())
			hubFailed = true
		}
		err = nil
		if controllerutil.ContainsFinalizer(svc, v1alpha1.CleanupFinalizer) {
			if err = r.releaseTenant(ctx, svc, nil); err == nil {
				log.Info("released Service (tenant side only)")
			}
		}
		if !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		return true, fmt.Errorf("releasing Service %s: %w", key, err)
	}
	return true, nil
}

// releaseRetries bounds the attempts at one object that keeps changing under the release.
const releaseRetries = 5

// discardEvents is the Event recorder of the one-shot release: what it does is logged.
type discardEvents struct{}

// Eventf records nothing.
func (discardEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// metaItems returns the items of a list as objects.
func metaItems(list client.ObjectList) ([]client.Object, error) {
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("reading a list: %w", err)
	}
	out := make([]client.Object, 0, len(items))
	for _, it := range items {
		if obj, ok := it.(client.Object); ok {
			out = append(out, obj)
		}
	}
	return out, nil
}
