package tenant

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationTokenAudiences, on a tenant namespace, lists (space-separated) the audiences of
// the token the manager minted for the ccm: the hub API server's own. The manager chart's
// ValidatingAdmissionPolicy "<release>-tenant-tokens" reads it (namespaceObject) and refuses
// a TokenRequest of the tenant's ServiceAccounts for any other audience, so a tenant cannot
// mint a token of the hub's issuer for another service (a cloud's workload identity, a
// vault) that trusts that issuer. Only the manager writes tenant namespaces.
const AnnotationTokenAudiences = "kubelb.k8c.io/token-audiences"

// tokenAudiences returns the "aud" claim of a ServiceAccount token, sorted (the signature is
// not checked: the token comes from the API server's TokenRequest or the manager's own Secret).
func tokenAudiences(token string) ([]string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("decoding the token's claims: %w", err)
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, fmt.Errorf("decoding the token's claims: %w", err)
	}
	var auds []string
	var one string
	if err := json.Unmarshal(claims.Aud, &one); err == nil {
		auds = []string{one}
	} else if err := json.Unmarshal(claims.Aud, &auds); err != nil {
		return nil, fmt.Errorf("the token's aud claim is neither a string nor a list of strings")
	}
	auds = slices.DeleteFunc(auds, func(a string) bool { return a == "" || strings.ContainsAny(a, " \t\n") })
	if len(auds) == 0 {
		return nil, fmt.Errorf("the token has no audience")
	}
	slices.Sort(auds)
	return slices.Compact(auds), nil
}

// ensureTokenAudiences records on the tenant namespace the audiences of the ccm's token
// (AnnotationTokenAudiences), which the chart's admission policy allows the tenant's own
// TokenRequests.
func (r *Reconciler) ensureTokenAudiences(ctx context.Context, ns, token string) error {
	auds, err := tokenAudiences(token)
	if err != nil {
		return fmt.Errorf("reading the audiences of the ccm's token in namespace %s: %w", ns, err)
	}
	want := strings.Join(auds, " ")
	cur := &corev1.Namespace{}
	if err := r.owned.Get(ctx, types.NamespacedName{Name: ns}, cur); err == nil && cur.Annotations[AnnotationTokenAudiences] == want {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationTokenAudiences: want}}})
	if err != nil {
		return err
	}
	obj := &corev1.Namespace{}
	obj.Name = ns
	if err := r.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("annotating namespace %s with the ccm token's audiences: %w", ns, err)
	}
	return nil
}
