package loadbalancer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hostnames"
	"kubelb.dev/kubelb/internal/translate"
)

// AnnotationDNSHostname is external-dns's annotation listing the hostnames of a Service's
// address; the Route controller puts the tenant's LoadBalancer hostnames on kubelb-ingress.
const AnnotationDNSHostname = "external-dns.alpha.kubernetes.io/hostname"

// DesiredCertificate is the cert-manager Certificate of a LoadBalancer's hostname: named
// hubnames.HostnameSecretName(lb name) in the LoadBalancer's namespace, controlled by the
// LoadBalancer, for exactly the hostname, issued by the ClusterIssuer issuer, into the Secret
// of the same name, which carries the labels of the Certificate.
func DesiredCertificate(lb *kubelbv1alpha1.LoadBalancer, hostname, issuer string) *unstructured.Unstructured {
	name := hubnames.HostnameSecretName(lb.Name)
	labels := map[string]any{}
	for k, v := range hubnames.CertificateLabels(lb.Name) {
		labels[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": hubnames.CertificateGVK.GroupVersion().String(),
		"kind":       hubnames.CertificateGVK.Kind,
		"metadata": map[string]any{
			"name":      name,
			"namespace": lb.Namespace,
			"labels":    labels,
			"ownerReferences": []any{map[string]any{
				"apiVersion":         kubelbv1alpha1.GroupVersion.String(),
				"kind":               "LoadBalancer",
				"name":               lb.Name,
				"uid":                string(lb.UID),
				"controller":         true,
				"blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{
			"secretName": name,
			"dnsNames":   []any{hostname},
			"issuerRef": map[string]any{
				"group": hubnames.CertificateGVK.Group,
				"kind":  "ClusterIssuer",
				"name":  issuer,
			},
			"secretTemplate": map[string]any{"labels": labels},
		},
	}}
	return u
}

// usableCertificate reports whether a Secret holds a certificate and key that parse.
func usableCertificate(s *corev1.Secret) bool {
	_, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	return err == nil
}

// certificateUpToDate reports whether the existing Certificate has every label and spec field
// of the desired one and its controller reference.
func certificateUpToDate(existing, desired *unstructured.Unstructured) bool {
	for k, v := range desired.GetLabels() {
		if existing.GetLabels()[k] != v {
			return false
		}
	}
	if !equality.Semantic.DeepEqual(existing.GetOwnerReferences(), desired.GetOwnerReferences()) {
		return false
	}
	want, _ := desired.Object["spec"].(map[string]any)
	have, _ := existing.Object["spec"].(map[string]any)
	for k, v := range want {
		if !equality.Semantic.DeepEqual(have[k], v) {
			return false
		}
	}
	return true
}

// certAPI says whether cert-manager's Certificate API is served, asking the REST mapper at
// most once per certAPIRecheck (and again after an error that says it is not).
type certAPI struct {
	mapper meta.RESTMapper
	mu     sync.Mutex
	served bool
	at     time.Time
}

// certAPIRecheck is how long the answer of certAPI is kept; a LoadBalancer waiting for
// cert-manager is retried as often.
const certAPIRecheck = time.Minute

func (c *certAPI) Served() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < certAPIRecheck {
		return c.served
	}
	_, err := c.mapper.RESTMapping(hubnames.CertificateGVK.GroupKind(), hubnames.CertificateGVK.Version)
	c.served, c.at = err == nil, time.Now()
	return c.served
}

// Forget drops the kept answer (an error said the API is gone).
func (c *certAPI) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = time.Time{}
}

// errForeignCertificate means a Certificate of the hostname's name was not made for the LoadBalancer.
var errForeignCertificate = errors.New("exists and was not made by kubelb for this LoadBalancer; rename or delete it")

// hostnameState is what the reconcile found of a LoadBalancer's hostname.
type hostnameState struct {
	hostname string // "" when none is served
	problem  string // why the asked-for (or generated) hostname is not used
	reason   string
	tls      bool
	dns      bool
	certErr  error // the Certificate could not be made: in the Hostname condition
}

// Hostname condition reasons.
const (
	// ConditionHostname says whether the LoadBalancer's hostname (spec.hostname or generated
	// from the tenant's wildcard domain) is assigned. Absent when it has none.
	ConditionHostname = "Hostname"
	// ReasonHostnameAssigned: the hostname is in status.hostname.
	ReasonHostnameAssigned = "HostnameAssigned"
	// ReasonHostnameInvalid: the hostname is not a usable DNS name, or explicit hostnames
	// are not allowed.
	ReasonHostnameInvalid = "InvalidHostname"
	// ReasonHostnameConflict: an older LoadBalancer of the tenant has the same hostname, or
	// an older LoadBalancer of another tenant holds it (hostnames.HostnameHeldElsewhere).
	ReasonHostnameConflict = "HostnameConflict"
	// ReasonCertificateFailed: the cert-manager Certificate could not be made.
	ReasonCertificateFailed = "CertificateFailed"
	// ReasonHostnameNotServed: the tenant's Ingress Service, which serves LoadBalancer
	// hostnames, cannot be made (no listener port left, or a Service of its name in the way).
	ReasonHostnameNotServed = "HostnameNotServed"
)

// hostnameOwner returns the LoadBalancer that keeps host among lbs (the oldest, then by
// name; those being deleted left out), as the translation decides.
func hostnameOwner(lbs []kubelbv1alpha1.LoadBalancer, tenantName string, dns translate.DNS, host string) string {
	var best *kubelbv1alpha1.LoadBalancer
	for i := range lbs {
		o := &lbs[i]
		if !o.DeletionTimestamp.IsZero() {
			continue
		}
		if h, err := translate.LoadBalancerHostname(o, tenantName, dns); err != nil || h != host {
			continue
		}
		if best == nil || o.CreationTimestamp.Before(&best.CreationTimestamp) ||
			(o.CreationTimestamp.Equal(&best.CreationTimestamp) && o.Name < best.Name) {
			best = o
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// hostnameCondition is the Hostname condition, nil when the LoadBalancer has no hostname.
func hostnameCondition(st hostnameState, generation int64) *metav1.Condition {
	c := &metav1.Condition{Type: ConditionHostname, ObservedGeneration: generation}
	switch {
	case st.problem != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, st.reason, st.problem
	case st.hostname == "":
		return nil
	case st.certErr != nil:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonCertificateFailed
		c.Message = fmt.Sprintf("The hostname %s is assigned, but its Certificate was not made: %s", st.hostname, st.certErr)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonHostnameAssigned
		c.Message = fmt.Sprintf("The LoadBalancer is served on https://%s (TLS enabled: %v, DNS record: %v).", st.hostname, st.tls, st.dns)
	}
	return c
}

// hostnameStatus is status.hostname for the state; nil without a hostname.
func hostnameStatus(st hostnameState) *kubelbv1alpha1.HostnameStatus {
	if st.hostname == "" || st.problem != "" {
		return nil
	}
	return &kubelbv1alpha1.HostnameStatus{Hostname: st.hostname, TLSEnabled: st.tls, DNSRecordCreated: st.dns}
}

// dnsAnnotated reports whether the annotation value lists host.
func dnsAnnotated(value, host string) bool {
	return slices.Contains(strings.Split(value, ","), host)
}

// reconcileHostname computes the LoadBalancer's hostname, keeps its Certificate (when
// cert-manager is served and the tenant has a default ClusterIssuer) and reads whether its
// Secret and DNS annotation are in place. It returns when to look again for cert-manager.
func (r *Reconciler) reconcileHostname(ctx context.Context, lb *kubelbv1alpha1.LoadBalancer, tenantName string, dns translate.DNS, issuer string) (hostnameState, time.Duration, error) {
	var st hostnameState
	host, err := translate.LoadBalancerHostname(lb, tenantName, dns)
	switch {
	case err != nil:
		st.reason = ReasonHostnameInvalid
		st.problem = "The hostname is not used: " + err.Error() + "."
		if errors.Is(err, translate.ErrExplicitHostnameNotAllowed) {
			st.problem += " Remove spec.hostname, or ask the hub's admin to allow explicit hostnames (dns.allowExplicitHostnames of the Tenant or Config)."
		}
	case host != "":
		lbs := &kubelbv1alpha1.LoadBalancerList{}
		if err := r.client.List(ctx, lbs, client.InNamespace(lb.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return st, 0, fmt.Errorf("listing the LoadBalancers of %s: %w", lb.Namespace, err)
		}
		held := false
		if lb.Spec.Hostname != "" {
			held, err = hostnames.HostnameHeldElsewhere(ctx, r.client, r.opts.Namespace, lb, host)
			if err != nil {
				return st, 0, err
			}
		}
		if owner := hostnameOwner(lbs.Items, tenantName, dns, host); owner != "" && owner != lb.Name {
			st.reason = ReasonHostnameConflict
			st.problem = fmt.Sprintf("The hostname %s is already the hostname of the older LoadBalancer %s; choose another spec.hostname.", host, owner)
		} else if held {
			// Never name the other tenant or its object.
			st.reason = ReasonHostnameConflict
			st.problem = fmt.Sprintf("The hostname %s is held by another tenant; it gets no certificate and no DNS record. Choose another spec.hostname.", host)
		} else {
			st.hostname = host
		}
	}
	requeue, err := r.syncCertificate(ctx, lb, &st, issuer)
	if err != nil {
		return st, 0, err
	}
	if st.hostname == "" {
		return st, requeue, nil
	}
	// Its Certificate stays: the hostname is the LoadBalancer's, and is served as soon as the
	// Ingress Service can be made (a change of this problem requeues the LoadBalancer).
	if problem := r.opts.Ingress.Of(lb.Namespace); problem != "" {
		st.reason = ReasonHostnameNotServed
		st.problem = fmt.Sprintf("The hostname %s is not served: %s.", st.hostname, problem)
		return st, requeue, nil
	}
	ingress := &corev1.Service{}
	err = r.client.Get(ctx, client.ObjectKey{Namespace: lb.Namespace, Name: kubelbv1alpha1.IngressServiceName}, ingress)
	switch {
	case err == nil:
		st.dns = ingress.Labels[kubelbv1alpha1.LabelIngressService] == "true" && dnsAnnotated(ingress.Annotations[AnnotationDNSHostname], st.hostname)
	case !apierrors.IsNotFound(err):
		return st, 0, fmt.Errorf("getting the Ingress Service of %s: %w", lb.Namespace, err)
	}
	return st, requeue, nil
}

// syncCertificate applies (or deletes) the Certificate of the hostname and sets st.tls.
func (r *Reconciler) syncCertificate(ctx context.Context, lb *kubelbv1alpha1.LoadBalancer, st *hostnameState, issuer string) (time.Duration, error) {
	if !r.certs.Served() {
		if st.hostname != "" && issuer != "" {
			return certAPIRecheck, nil // cert-manager may come
		}
		return 0, nil
	}
	name := hubnames.HostnameSecretName(lb.Name)
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(hubnames.CertificateGVK)
	err := r.client.Get(ctx, client.ObjectKey{Namespace: lb.Namespace, Name: name}, existing)
	switch {
	case meta.IsNoMatchError(err):
		r.certs.Forget()
		return certAPIRecheck, nil
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return 0, fmt.Errorf("getting Certificate %s/%s: %w", lb.Namespace, name, err)
	}
	ours := existing != nil && hubnames.OwnsCertificate(existing, lb)
	if st.hostname == "" || issuer == "" {
		if ours {
			if err := r.client.Delete(ctx, existing, client.Preconditions{UID: ptrUID(existing)}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return 0, fmt.Errorf("deleting Certificate %s/%s: %w", lb.Namespace, name, err)
			}
		}
		return 0, nil
	}
	if !validLabelValue(lb.Name) {
		st.certErr = fmt.Errorf("the LoadBalancer's name %q cannot label its Certificate", lb.Name)
		return 0, nil
	}
	if existing != nil && !ours {
		st.certErr = fmt.Errorf("certificate %s/%s %w", lb.Namespace, name, errForeignCertificate)
		return 0, nil
	}
	desired := DesiredCertificate(lb, st.hostname, issuer)
	if existing == nil || !certificateUpToDate(existing, desired) {
		err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership)
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			st.certErr = err
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("applying Certificate %s/%s: %w", lb.Namespace, name, err)
		}
	}
	secret := &corev1.Secret{}
	err = r.secrets.Get(ctx, client.ObjectKey{Namespace: lb.Namespace, Name: name}, secret)
	switch {
	case err == nil:
		st.tls = hubnames.IsHostnameSecret(secret) && usableCertificate(secret)
	case !apierrors.IsNotFound(err):
		return 0, fmt.Errorf("getting Secret %s/%s: %w", lb.Namespace, name, err)
	}
	return 0, nil
}

func ptrUID(o client.Object) *types.UID { u := o.GetUID(); return &u }

// validLabelValue reports whether the LoadBalancer's name can label its Certificate.
func validLabelValue(v string) bool { return len(validation.IsValidLabelValue(v)) == 0 }
