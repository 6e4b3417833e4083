package bench

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEventsByReasonSamplesNotesAndObjects: the sample keeps the first distinct notes in
// creation order, counts objects by how many Events each got and names the one with most,
// with its notes.
func TestEventsByReasonSamplesNotesAndObjects(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ev := func(sec int, reason, name, note string) eventsv1.Event {
		return eventsv1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(sec) * time.Second))},
			Reason: reason, Note: note, Regarding: corev1.ObjectReference{Kind: "LoadBalancer", Namespace: "tenant-a", Name: name}}
	}
	var events []eventsv1.Event
	for i := 8; i >= 0; i-- { // newest first: the sample must still follow creation order
		events = append(events, ev(i, "W", "lb"+string(rune('a'+i%3)), "note "+string(rune('0'+i))))
	}
	events = append(events, ev(9, "Other", "lba", "x"), ev(10, "Other", "lba", "x"))

	counts, samples := eventsByReason(events)
	if !reflect.DeepEqual(counts, map[string]int{"W": 9, "Other": 2}) {
		t.Errorf("counts %v", counts)
	}
	w := samples["W"]
	want := &EventSample{Messages: []string{"note 0", "note 1", "note 2", "note 3", "note 4"}, DistinctMessages: 9,
		Objects: 3, ObjectsByEvents: map[string]int{"3": 3}, Most: "LoadBalancer tenant-a/lba", MostEvents: 3,
		MostMessages: []string{"note 0", "note 3", "note 6"}}
	if !reflect.DeepEqual(w, want) {
		t.Errorf("sample of W:\n got %+v\nwant %+v", w, want)
	}
	o := samples["Other"]
	if o.DistinctMessages != 1 || o.Objects != 1 || o.ObjectsByEvents["2"] != 1 || o.MostEvents != 2 {
		t.Errorf("sample of Other: %+v", o)
	}
}
