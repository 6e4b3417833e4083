package envoycp

// The gather: one tenant's scope, read from the caches. Nothing here decides what is
// translated or what an object's status says: that is translate's (Hold, Run).

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/logging"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
)

// BuildInput reads one tenant's translation input: its Scope, less what the tenant's
// settings and limits hold back (translate.Hold), as Run gets it.
func BuildInput(ctx context.Context, c, owned client.Reader, managerNamespace, tenant string, opts translate.Options) (translate.Input, error) {
	scope, err := Build(ctx, c, owned, managerNamespace, tenant, opts, nil)
	in, _ := translate.Hold(scope.Input, scope.Holds)
	return in, err
}

// Scope is what the controller gathers of one tenant: the translation input before anything
// is held back, and what the tenant's settings and limits hold back.
type Scope struct {
	// Input holds, from c (the manager's cache): the tenant's settings (Config "default" in
	// managerNamespace and the Tenant: endpoint policy, header limits, upstream options,
	// limits), the hub ranges (ServiceCIDRs, Nodes), and the tenant's LoadBalancers, Routes
	// and Addresses. From owned (a reader of the Services and Secrets labelled managed-by:
	// kubelb; c itself will do): the hub Services the Route controller made (hubnames.IsRouteService)
	// and the hub Secrets made from SyncSecrets (hubnames.IsSyncedSecret), the LoadBalancers' hub
	// Services (hubnames.LoadBalancerOf: their targetPorts are the listener ports), and the Secrets
	// cert-manager issued for the Certificates the LoadBalancer controller made for
	// LoadBalancer hostnames (hostnameSecrets), and the manager's OIDC cookie keys
	// (hubnames.IsOIDCCookieKeys). Nothing else of the tenant namespace is read.
	Input translate.Input
	// Holds are the tenant's LoadBalancers and Routes its limits refuse (quota.Admission, the
	// same verdict the LoadBalancer and Route controllers act on), its Addresses over
	// spec.limits.addresses, and whether its load balancing or Ingress is disabled.
	Holds translate.Holds
}

// Build reads one tenant's Scope. The quota verdict comes from verdicts, the manager's one
// quota.Store (the LoadBalancer and Route controllers act on the same), which works out what
// it needs of each object once per change of it; nil computes it over the objects read
// (quota.Admission), as a client without the manager's cache must.
func Build(ctx context.Context, c, owned client.Reader, managerNamespace, tenant string, opts translate.Options, verdicts *quota.Store) (Scope, error) {
	log := ctrl.LoggerFrom(ctx)
	config, tn, err := settings.Read(ctx, c, managerNamespace, hubnames.TenantName(tenant))
	if err != nil {
		return Scope{}, err
	}
	set := settings.Resolve(config, tn)
	if len(set.InvalidEndpointPolicy) > 0 {
		logging.Warn(log, "WARNING: endpoint policy entries that are not CIDRs are ignored", "tenant", tenant, "entries", set.InvalidEndpointPolicy)
	}
	limits, ignored := translate.HeaderLimits(set.Envoy.HeaderLimits)
	if len(ignored) > 0 {
		logging.Warn(log, "WARNING: header limits out of Envoy's range are ignored", "tenant", tenant, "fields", ignored)
	}
	hub, err := hubRanges(ctx, c)
	if err != nil {
		return Scope{}, err
	}

	// Translation only reads its input: the cache's objects are used without a deep copy.
	lbs, addrs, routes := &v1alpha1.LoadBalancerList{}, &v1alpha1.AddressesList{}, &v1alpha1.RouteList{}
	secrets := &corev1.SecretList{}
	managed := client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}
	for _, l := range []struct {
		from client.Reader
		list client.ObjectList
		what string
		opts []client.ListOption
	}{
		{c, lbs, "LoadBalancers", nil},
		{c, addrs, "Addresses", nil},
		{c, routes, "Routes", nil},
		{owned, secrets, "the synced Secrets", []client.ListOption{managed}},
	} {
		opts := append([]client.ListOption{client.InNamespace(tenant), client.UnsafeDisableDeepCopy}, l.opts...)
		if err := l.from.List(ctx, l.list, opts...); err != nil {
			return Scope{}, fmt.Errorf("listing %s of %s: %w", l.what, tenant, err)
		}
	}
	routeSvcs, hubSvcs, err := hubServicesOf(ctx, owned, tenant)
	if err != nil {
		return Scope{}, err
	}
	in := translate.Input{
		Tenant:        tenant,
		LoadBalancers: lbs.Items,
		Addresses:     make(map[string]v1alpha1.Addresses, len(addrs.Items)),
		Routes:        routes.Items,
		// The tenant's spec.upstream (Config, Tenant) in place of the manager's defaults.
		Options:      opts.WithUpstream(set.Upstream),
		Policy:       set.EndpointPolicy,
		HeaderLimits: limits,
		DNS:          set.DNS,
	}
	in.Policy.Hub = hub
	// The endpoint limits bound the translation itself: it stops merging a cluster's
	// endpoints at the limit, so an oversized input never costs more than what is kept.
	in.Options.MaxEndpointsPerCluster = set.Limits.EndpointsPerCluster
	in.Options.MaxEndpoints = set.Limits.Endpoints
	// The health-check budget: the tenant's own, at most its share of the hub's total.
	budget, err := HealthCheckBudget(ctx, c, set.Limits)
	if err != nil {
		return Scope{}, err
	}
	in.Options.HealthCheckProbesPerSecond = budget
	in.Options.HealthCheckProxies = int(set.Envoy.Replicas)
	in.Options.AccessLog = set.Envoy.AccessLog != nil && set.Envoy.AccessLog.Enabled
	in.Options.IngressSSLRedirect = set.IngressSSLRedirect
	if in.Options.RateLimitService, err = rateLimitService(ctx, owned, tenant, set); err != nil {
		return Scope{}, err
	}
	in.StaticAddresses = set.StaticAddresses
	if in.DefaultCertificate, in.DefaultCertificateProblem, err = defaultCertificate(ctx, owned, set.IngressDefaultCertificate); err != nil {
		return Scope{}, err
	}
	for _, a := range addrs.Items {
		in.Addresses[a.Name] = a
	}
	for _, svc := range routeSvcs {
		in.RouteServices = append(in.RouteServices, *svc)
	}
	in.HubServices = hubSvcs
	for i := range secrets.Items {
		switch s := &secrets.Items[i]; {
		case hubnames.IsSyncedSecret(s):
			in.Secrets = append(in.Secrets, *s)
		case hubnames.IsOIDCCookieKeys(s):
			in.OIDCCookieKeys = s.Data
		}
	}
	if in.HostnameSecrets, err = hostnameSecrets(ctx, c, in.LoadBalancers, secrets.Items); err != nil {
		return Scope{}, err
	}
	// The caches list in no fixed order; sorted, the same state always gives the same input.
	byName := func(a, b corev1.Service) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(in.RouteServices, byName)
	slices.SortFunc(in.Secrets, func(a, b corev1.Secret) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(in.Routes, func(a, b v1alpha1.Route) int { return cmp.Compare(a.Name, b.Name) })
	var verdict quota.Verdict
	if verdicts != nil {
		if verdict, err = verdicts.LoadAdmission(ctx, tenant, set); err != nil {
			return Scope{}, err
		}
	} else {
		verdict = quota.Admission(tenant, lbs.Items, routes.Items, set)
	}
	scope := Scope{Input: in, Holds: holds(tenant, verdict, addrs.Items, set)}
	if refused := scope.Holds.RefusedAddresses; len(refused) > 0 {
		log.V(1).Info("Addresses over the tenant's limit are not used", "tenant", tenant, "addresses", refused)
	}
	return scope, nil
}

// holds are what the tenant's settings and its limits' verdicts hold back.
func holds(tenant string, verdict quota.Verdict, addrs []v1alpha1.Addresses, set settings.Tenant) translate.Holds {
	h := translate.Holds{
		LoadBalancingDisabled: set.DisableLoadBalancer,
		IngressDisabled:       set.DisableIngress,
		RefusedLoadBalancers:  refusals(verdict, quota.KindLoadBalancer),
		RefusedRoutes:         refusals(verdict, quota.KindRoute),
	}
	// Addresses beyond spec.limits.addresses (oldest first) are left out.
	items := make([]quota.Item, 0, len(addrs))
	for _, a := range addrs {
		if a.DeletionTimestamp.IsZero() {
			items = append(items, quota.Item{Name: a.Name, Created: a.CreationTimestamp.Time})
		}
	}
	h.RefusedAddresses = quota.AdmitItems(tenant, quota.KindAddresses, items,
		quota.ItemLimits{Count: set.Limits.Addresses, CountField: "addresses", Bytes: -1}).RefusedNames()
	return h
}

// refusals are the objects of kind the verdict refuses, by name, with its messages.
func refusals(v quota.Verdict, kind quota.Kind) map[string]string {
	names := v.RefusedNames(kind)
	if len(names) == 0 {
		return nil
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		out[name], _ = v.Refused(kind, name)
	}
	return out
}

// hostnameSecrets returns the certificates of LoadBalancer hostnames by LoadBalancer name:
// the Secret hubnames.HostnameSecretName(lb) that cert-manager issued
// (hubnames.IsHostnameSecret: labels from the Certificate's secretTemplate, cert-manager's
// certificate-name annotation) for a Certificate the LoadBalancer controller made for that
// LoadBalancer (hubnames.OwnsCertificate: its labels and controller reference). The
// Certificates are read as metadata from c, only for such Secrets: none is read where
// cert-manager issued nothing, so a hub without cert-manager is never asked for them.
func hostnameSecrets(ctx context.Context, c client.Reader, lbs []v1alpha1.LoadBalancer, secrets []corev1.Secret) (map[string]corev1.Secret, error) {
	byName := make(map[string]*corev1.Secret)
	for i := range secrets {
		if hubnames.IsHostnameSecret(&secrets[i]) {
			byName[secrets[i].Name] = &secrets[i]
		}
	}
	if len(byName) == 0 {
		return nil, nil
	}
	out := map[string]corev1.Secret{}
	for i := range lbs {
		lb := &lbs[i]
		s, ok := byName[hubnames.HostnameSecretName(lb.Name)]
		if !ok || s.Labels[v1alpha1.LabelLoadBalancerName] != lb.Name {
			continue
		}
		cert := &metav1.PartialObjectMetadata{}
		cert.SetGroupVersionKind(hubnames.CertificateGVK)
		err := c.Get(ctx, client.ObjectKey{Namespace: lb.Namespace, Name: s.Name}, cert)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("getting Certificate %s/%s: %w", lb.Namespace, s.Name, err)
		}
		if hubnames.OwnsCertificate(cert, lb) {
			out[lb.Name] = *s
		}
	}
	return out, nil
}

// hubRanges lists the hub's ServiceCIDRs and Nodes from the cache and returns their ranges.
func hubRanges(ctx context.Context, c client.Reader) ([]translate.PolicyRule, error) {
	cidrs := &networkingv1.ServiceCIDRList{}
	if err := c.List(ctx, cidrs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ServiceCIDRs: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	return translate.HubRanges(cidrs.Items, nodes.Items), nil
}

// defaultCertificate reads the tenant's default Ingress certificate (ref, nil for none) from
// owned, the Secrets labelled managed-by: kubelb: the Secret, or why it cannot be used.
func defaultCertificate(ctx context.Context, owned client.Reader, ref *types.NamespacedName) (*corev1.Secret, string, error) {
	if ref == nil {
		return nil, "", nil
	}
	s := &corev1.Secret{}
	switch err := owned.Get(ctx, *ref, s); {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("Secret %s was not found among the hub Secrets labelled %s=%s", ref, v1alpha1.LabelManagedBy, v1alpha1.LabelManagedByValue), nil
	case err != nil:
		return nil, "", fmt.Errorf("reading the default Ingress certificate %s: %w", ref, err)
	case s.Type != corev1.SecretTypeTLS:
		return nil, fmt.Sprintf("Secret %s is of type %q, not %s", ref, s.Type, corev1.SecretTypeTLS), nil
	}
	return s, "", nil
}

// hubServiceIndex is the index OwnedReader adds to the owned cache's Service informer: a
// Service's namespace and what kubelb made it for (hubServiceKey), worked out once per
// change of the Service, not once per rebuild of its tenant.
const hubServiceIndex = "kubelb-hub-service"

// hubServiceKey is a hub Service's key in hubServiceIndex: "<namespace>/route" for a Service
// of Routes (hubnames.IsRouteService), "<namespace>/lb" for a LoadBalancer's
// (hubnames.LoadBalancerOf); none for any other.
func hubServiceKey(obj any) ([]string, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, nil
	}
	if hubnames.IsRouteService(svc) {
		return []string{svc.Namespace + "/route"}, nil
	}
	if lb := hubnames.LoadBalancerOf(svc); lb != "" {
		return []string{svc.Namespace + "/lb"}, nil
	}
	return nil, nil
}

// OwnedReader reads the hub Services and Secrets labelled managed-by: kubelb from the
// cache that holds only those: Reader for lists; Informers for the tenant's hub Services,
// read only from the informer's store through hubServiceIndex, so a rebuild of a tenant of
// thousands of LoadBalancers neither copies nor classifies each one's hub Service.
type OwnedReader struct {
	client.Reader
	Informers cache.Informers

	mu      sync.Mutex
	indexed bool
	indexer toolscache.Indexer // nil once indexed: the informer has no store to index (List and classify)
}

// index returns the Service informer's store with hubServiceIndex, added on first use.
func (o *OwnedReader) index(ctx context.Context) (toolscache.Indexer, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.indexed {
		return o.indexer, nil
	}
	inf, err := o.Informers.GetInformer(ctx, &corev1.Service{})
	if err != nil {
		return nil, err
	}
	if idx, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		if err := inf.AddIndexers(toolscache.Indexers{hubServiceIndex: hubServiceKey}); err != nil {
			return nil, err
		}
		o.indexer = idx.GetIndexer()
	}
	o.indexed = true
	return o.indexer, nil
}

// loadBalancerNamed is the LoadBalancer of a Service hubServiceKey found to be a
// LoadBalancer's: the name hubnames.LoadBalancerOf gave, without its checks again.
func loadBalancerNamed(svc *corev1.Service) string {
	if lb := svc.Labels[v1alpha1.LabelLoadBalancerName]; lb != "" {
		return lb
	}
	return metav1.GetControllerOfNoCopy(svc).Name
}

// hubServicesOf reads the tenant's hub Services of Routes, and of LoadBalancers by
// LoadBalancer name, read only: through hubServiceIndex when owned is an OwnedReader, else
// listed and classified.
func hubServicesOf(ctx context.Context, owned client.Reader, tenant string) ([]*corev1.Service, map[string]*corev1.Service, error) {
	var routes []*corev1.Service
	lbs := map[string]*corev1.Service{}
	if o, ok := owned.(*OwnedReader); ok {
		idx, err := o.index(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("indexing the hub Services: %w", err)
		}
		if idx != nil {
			items, err := idx.ByIndex(hubServiceIndex, tenant+"/route")
			if err != nil {
				return nil, nil, fmt.Errorf("listing the Route hub Services of %s: %w", tenant, err)
			}
			for _, item := range items {
				routes = append(routes, item.(*corev1.Service))
			}
			if items, err = idx.ByIndex(hubServiceIndex, tenant+"/lb"); err != nil {
				return nil, nil, fmt.Errorf("listing the hub Services of %s: %w", tenant, err)
			}
			for _, item := range items {
				svc := item.(*corev1.Service)
				lbs[loadBalancerNamed(svc)] = svc
			}
			return routes, lbs, nil
		}
	}
	list := &corev1.ServiceList{}
	if err := owned.List(ctx, list, client.InNamespace(tenant), client.UnsafeDisableDeepCopy,
		client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}); err != nil {
		return nil, nil, fmt.Errorf("listing the hub Services of %s: %w", tenant, err)
	}
	for i := range list.Items {
		svc := &list.Items[i]
		if hubnames.IsRouteService(svc) {
			routes = append(routes, svc)
		} else if lb := hubnames.LoadBalancerOf(svc); lb != "" {
			lbs[lb] = svc
		}
	}
	return routes, lbs, nil
}

// rateLimitService is the address of the tenant's rate-limit service ("IP:port": the cluster
// IP of the Service envoyfleet makes, envoyfleet.RateLimitName) when the Config has a
// rate-limit store and that Service has its address; "" otherwise, and the tenant's global
// rate limits are OverPlatformBound. A Service made (or changed) rebuilds the tenant
// (rateLimitServiceChanged).
func rateLimitService(ctx context.Context, owned client.Reader, tenant string, set settings.Tenant) (string, error) {
	if set.RateLimit == nil {
		return "", nil
	}
	svc := &corev1.Service{}
	if err := owned.Get(ctx, types.NamespacedName{Namespace: tenant, Name: envoyfleet.RateLimitName}, svc); apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("getting the rate-limit Service of %s: %w", tenant, err)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if !envoyfleet.IsRateLimitService(svc) || err != nil || !ip.IsValid() || ip.IsUnspecified() {
		return "", nil
	}
	return netip.AddrPortFrom(ip, envoyfleet.RateLimitGRPCPort).String(), nil
}
