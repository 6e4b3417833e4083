// Package dropped holds the Warning Event that tells a tenant which of its annotations were
// not copied onto its hub Service, once per set of keys and object.
package dropped

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/settings"
)

// ReasonAnnotationsDropped is the reason of the Warning Event naming the annotations
// propagateAllAnnotations did not copy onto a hub Service.
const ReasonAnnotationsDropped = "AnnotationsDropped"

// Annotations tells, with a Warning Event on the tenant object, which annotations
// propagateAllAnnotations did not copy onto its hub Service because they steer a hub load
// balancer or DNS (settings.SteeringAnnotationPrefixes): once per set of keys and object
// (this manager's memory: a restart tells again once). The zero value is ready to use.
type Annotations struct {
	mu   sync.Mutex
	told map[types.NamespacedName]string // the keys last told of, joined by ","
}

// Warn records the Event when dropped (sorted keys) differs from what was last told for obj.
func (d *Annotations) Warn(recorder events.EventRecorder, obj client.Object, dropped []string) {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	keys := strings.Join(dropped, ",")
	d.mu.Lock()
	told := d.told[key] == keys
	switch {
	case keys == "":
		delete(d.told, key)
	case d.told == nil:
		d.told = map[types.NamespacedName]string{key: keys}
	default:
		d.told[key] = keys
	}
	d.mu.Unlock()
	if told || keys == "" {
		return
	}
	recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonAnnotationsDropped, "Reconcile", "%s", settings.DroppedAnnotationsNote(dropped))
}

// Forget drops what was told for an object that is gone.
func (d *Annotations) Forget(key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.told, key)
}
