package syncsecret

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// floodSize is how many SyncSecrets the attacker queues at once.
const floodSize = 200 // within the default spec.limits.syncSecrets (250): every one gets its Secret

// TestFloodingTenantDoesNotDelayOthers is issue 26's proof that one tenant's flood of
// objects does not starve another in a controller keyed by object. The attacker's
// floodSize SyncSecrets and the victim's one are all queued at once (the manager starts with
// them in place, the attacker's first in the list); the victim's hub Secret must appear
// while most of the attacker's are still to be made. Before, the workqueue was first in,
// first out: the victim's request came after every one of the attacker's.
func TestFloodingTenantDoesNotDelayOthers(t *testing.T) {
	c := testenv.Start(t, "hub", testenv.Options{})
	h := &hub{Cluster: c, t: t}
	h.namespace("tenant-b", true)
	h.namespace("tenant-v", true)
	for i := range floodSize {
		h.create(syncSecret("tenant-b", fmt.Sprintf("flood-%03d", i), "apps", fmt.Sprintf("s%03d", i), "", map[string][]byte{"a": []byte("1")}))
	}
	victim := syncSecret("tenant-v", "token", "apps", "token", "", map[string][]byte{"a": []byte("1")})
	h.create(victim)

	started := time.Now()
	testenv.StartManager(t, c.Config, func(mgr ctrl.Manager) error {
		return SetupWithManager(mgr, Options{})
	})
	attackerMade := func() int {
		var list corev1.SecretList
		if err := c.Client.List(t.Context(), &list, client.InNamespace("tenant-b"), client.HasLabels{LabelSyncSecret}); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	made := 0
	testsupport.Eventually(t, 120*time.Second, "the victim's hub Secret", func() error {
		s := &corev1.Secret{}
		if err := c.Client.Get(t.Context(), client.ObjectKey{Namespace: victim.Namespace, Name: string(victim.UID)}, s); err != nil {
			return err
		}
		made = attackerMade()
		return nil
	})
	took := time.Since(started)
	testsupport.Eventually(t, 120*time.Second, "every attacker Secret", func() error {
		if n := attackerMade(); n < floodSize {
			return fmt.Errorf("%d of %d", n, floodSize)
		}
		return nil
	})
	t.Logf("the victim's Secret was made %v after the manager started, with %d of the attacker's %d made; the attacker's all %v after",
		took.Round(time.Millisecond), made, floodSize, time.Since(started).Round(time.Millisecond))
	if made > floodSize/2 {
		t.Errorf("%d of the attacker's %d Secrets were made before the victim's one: the victim waited behind the flood", made, floodSize)
	}
}
