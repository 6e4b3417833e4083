package trafficpolicy

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// resolveConnectionLifetime checks connectionLimit's maxConnectionDuration,
// maxRequestsPerConnection and maxStreamDuration into out: each only ends connections or
// streams sooner than Envoy would (no limit by default), so the bounds keep them within
// what the IR allows.
func resolveConnectionLifetime(l *v1alpha1.ClientTrafficConnectionLimit, out *ClientSettings) []error {
	var errs []error
	var err error
	if out.MaxConnectionDuration, err = clientDuration("connection.connectionLimit.maxConnectionDuration", l.MaxConnectionDuration, MaxConnectionDuration); err != nil {
		errs = append(errs, err)
	}
	if out.MaxStreamDuration, err = clientDuration("connection.connectionLimit.maxStreamDuration", l.MaxStreamDuration, MaxStreamDuration); err != nil {
		errs = append(errs, err)
	}
	if n := l.MaxRequestsPerConnection; n != nil {
		if *n < 1 || *n > MaxRequestsPerConnection {
			errs = append(errs, fmt.Errorf("connection.connectionLimit.maxRequestsPerConnection %d is out of range; use 1 to %d", *n, MaxRequestsPerConnection))
		} else {
			out.MaxRequestsPerConnection = uint32(*n)
		}
	}
	return errs
}

// resolveClientValidation checks tls.clientValidation: 1 to MaxClientCARefs references to
// ConfigMaps or Secrets (core group) of the policy's namespace, and a mode kubelb serves
// (RequireAndVerify, or VerifyIfGiven, which the deprecated optional also asks for).
func resolveClientValidation(v *v1alpha1.ClientTrafficClientValidation) (*ClientValidation, []error) {
	const field = "tls.clientValidation"
	var errs []error
	out := &ClientValidation{}
	switch m := v.Mode; m {
	case "", ClientValidationRequireAndVerify:
		if m != "" && isTrue(v.Optional) {
			errs = append(errs, fmt.Errorf("%s.optional is true but mode is %s; give one", field, m))
		}
		out.Optional = isTrue(v.Optional)
	case ClientValidationVerifyIfGiven:
		out.Optional = true
	case "Request", "RequireAny":
		errs = append(errs, fmt.Errorf("%s.mode %s is not yet supported by kubelb (certificates that do not verify would be accepted); use RequireAndVerify or VerifyIfGiven", field, m))
	default:
		errs = append(errs, fmt.Errorf("%s.mode %q is not a mode; use RequireAndVerify or VerifyIfGiven", field, truncate(m)))
	}
	switch n := len(v.CACertificateRefs); {
	case n == 0:
		errs = append(errs, errors.New(field+".caCertificateRefs is empty; name a ConfigMap or Secret with the CA certificates in its key ca.crt"))
	case n > MaxClientCARefs:
		errs = append(errs, fmt.Errorf("%s.caCertificateRefs has %d entries, at most %d", field, n, MaxClientCARefs))
		return nil, errs
	}
	for i, r := range v.CACertificateRefs {
		at := fmt.Sprintf("%s.caCertificateRefs[%d]", field, i)
		kind := r.Kind
		if kind == "" {
			kind = "Secret" // the CRD's default
		}
		switch {
		case (r.Group != "" && r.Group != "core") || (kind != "ConfigMap" && kind != "Secret"):
			errs = append(errs, fmt.Errorf("%s is a %s; name a ConfigMap or a Secret (core group)", at, truncate(refKind(r.Group, kind))))
		case r.Namespace != "":
			// The policy's namespace is its Gateway's: another namespace would need a
			// ReferenceGrant the ccm does not read for policies yet.
			errs = append(errs, fmt.Errorf("%s names namespace %s: only the policy's own namespace is supported by kubelb; leave namespace out", at, truncate(r.Namespace)))
		case len(validation.IsDNS1123Subdomain(r.Name)) > 0:
			errs = append(errs, fmt.Errorf("%s name %q is not an object name", at, truncate(r.Name)))
		default:
			ref := CARef{Kind: kind, Name: r.Name}
			if !slices.Contains(out.Refs, ref) {
				out.Refs = append(out.Refs, ref)
			}
		}
	}
	return out, errs
}

func refKind(group, kind string) string {
	if group == "" || group == "core" {
		return kind
	}
	return kind + "." + group
}
