// The watch predicates of the Secret controller.

package secrets

import (
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// mirrorChanged passes hub SyncSecret events but updates of their status only (the manager's).
var mirrorChanged = predicate.Or[*v1alpha1.SyncSecret](
	predicate.TypedGenerationChangedPredicate[*v1alpha1.SyncSecret]{},
	predicate.TypedLabelChangedPredicate[*v1alpha1.SyncSecret]{})
