package ssa

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
)

// conflictRetry is how soon a reconcile that lost an optimistic-concurrency race runs again.
const conflictRetry = time.Second

// RetryConflict turns a conflict (the object changed under the reconcile; the change brings
// it back anyway) into a quiet retry: it is not an error in the log. Other errors pass.
func RetryConflict(res ctrl.Result, err error) (ctrl.Result, error) {
	if err != nil && apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}
