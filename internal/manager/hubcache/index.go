package hubcache

import (
	"context"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// indexed holds the (field indexer, field) pairs IndexOnce registered: several controllers of
// one manager need the same index on its cache, and a cache refuses a field indexed twice.
var indexed sync.Map

type indexKey struct {
	idx   client.FieldIndexer
	field string
}

// IndexOnce registers the field index field of obj's kind with idx (a manager's field
// indexer), once per indexer and field; what of registers, when it fails, is said in the error.
func IndexOnce(ctx context.Context, idx client.FieldIndexer, obj client.Object, field, what string, fn client.IndexerFunc) error {
	key := indexKey{idx, field}
	if _, done := indexed.LoadOrStore(key, struct{}{}); done {
		return nil
	}
	if err := idx.IndexField(ctx, obj, field, fn); err != nil {
		indexed.Delete(key)
		return fmt.Errorf("indexing %s: %w", what, err)
	}
	return nil
}
