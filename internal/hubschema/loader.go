package hubschema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
)

// DefaultInterval is how often a Loader asks the hub whether its schema changed: one small
// request (the OpenAPI v3 index, whose URLs carry a hash of each document).
const DefaultInterval = time.Minute

// Loader keeps the hub's current Schema: read at start, read again when the hash the hub
// publishes for Group/Version changes (checked every Interval) and when Refresh is called
// (e.g. after the hub refused a field). Until the first read succeeds Current is nil, which
// prunes nothing. It is a controller-runtime Runnable (Start).
type Loader struct {
	// Interval between checks; DefaultInterval when zero.
	Interval time.Duration
	// Log receives one line per schema read and per failure to read it.
	Log logr.Logger
	// LeftOut, when set, is told of every object of kind from which Fit or Prune left
	// fields out (their paths).
	LeftOut func(kind string, removed []string)

	paths func() (map[string]openapi.GroupVersion, error)

	mu      sync.RWMutex
	current *Schema
	hash    string
	refresh chan struct{}
	// tried is closed once the first read was tried (Start), so that nothing is written to
	// the hub before the ccm knows what the hub declares.
	tried     chan struct{}
	triedOnce sync.Once
	// failing suppresses a repeated log line while the schema cannot be read.
	failing bool
}

// NewLoader reads the hub's OpenAPI v3 through cfg (any authenticated user may: the
// system:discovery role).
func NewLoader(cfg *rest.Config, log logr.Logger) (*Loader, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("making the hub's discovery client: %w", err)
	}
	return newLoader(dc.OpenAPIV3().Paths, log), nil
}

func newLoader(paths func() (map[string]openapi.GroupVersion, error), log logr.Logger) *Loader {
	return &Loader{Log: log, paths: paths, refresh: make(chan struct{}, 1), tried: make(chan struct{})}
}

// FirstReadWait bounds how long Current waits for the first read of a started Loader.
const FirstReadWait = 10 * time.Second

// Current is the schema last read, or nil. Until the first read was tried it waits for it,
// at most FirstReadWait.
func (l *Loader) Current() *Schema {
	if l == nil {
		return nil
	}
	select {
	case <-l.tried:
	default:
		t := time.NewTimer(FirstReadWait)
		select {
		case <-l.tried:
		case <-t.C:
		}
		t.Stop()
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.current
}

// Refresh asks for the schema to be read again now (without waiting).
func (l *Loader) Refresh() {
	if l == nil {
		return
	}
	select {
	case l.refresh <- struct{}{}:
	default:
	}
}

// Start reads the schema, then keeps it current until ctx ends.
func (l *Loader) Start(ctx context.Context) error {
	interval := l.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	l.Load(ctx)
	l.triedOnce.Do(func() { close(l.tried) })
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-l.refresh:
		}
		l.Load(ctx)
	}
}

// NeedLeaderElection: every replica of the ccm writes with the schema it reads.
func (l *Loader) NeedLeaderElection() bool { return false }

// errNotServed is the hub serving no kubelb.k8c.io/v1alpha1 at all.
var errNotServed = errors.New("the hub serves no " + Group + "/" + Version)

// Load reads the schema when the hub's hash of it changed (or nothing was read yet). A
// failure keeps the schema read before.
func (l *Loader) Load(ctx context.Context) {
	if err := l.load(ctx); err != nil {
		l.mu.Lock()
		first := !l.failing
		l.failing = true
		l.mu.Unlock()
		if first {
			l.Log.Info("cannot read the hub's schema of kubelb's CRDs; writing every field the ccm knows until it can", "error", err.Error())
		}
		return
	}
	l.mu.Lock()
	l.failing = false
	l.mu.Unlock()
}

func (l *Loader) load(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	paths, err := l.paths()
	if err != nil {
		return fmt.Errorf("reading the hub's OpenAPI v3 index: %w", err)
	}
	gv, ok := paths["apis/"+Group+"/"+Version]
	if !ok {
		return errNotServed
	}
	url := gv.ServerRelativeURL()
	_, hash, _ := strings.Cut(url, "hash=")
	l.mu.RLock()
	same := l.current != nil && hash != "" && hash == l.hash
	l.mu.RUnlock()
	if same {
		return nil
	}
	doc, err := gv.Schema("application/json")
	if err != nil {
		return fmt.Errorf("reading the hub's OpenAPI v3 of %s/%s: %w", Group, Version, err)
	}
	s, err := Parse(doc)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.current, l.hash = s, hash
	l.mu.Unlock()
	l.Log.Info("read the hub's schema of kubelb's CRDs", "kinds", len(s.kinds), "hash", hash)
	return nil
}

// toContent is obj as unstructured content (through JSON, as the client sends it).
func toContent(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// Reported remembers what was said once: per key (a kind and its paths, or an object's UID),
// the last note. Changed tells whether note is new for key, and remembers it.
type Reported struct {
	mu   sync.Mutex
	seen map[string]string
}

// Changed tells whether key had another note before (or none), and records note.
func (r *Reported) Changed(key, note string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]string{}
	}
	if prev, ok := r.seen[key]; ok && prev == note {
		return false
	}
	r.seen[key] = note
	return true
}

// Forget drops key (an object that is gone).
func (r *Reported) Forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, key)
}

// Fit removes from obj (a typed object of kind, changed in place) what the hub's current
// schema does not declare, so that it compares with what the hub holds, and returns the
// removed paths and what the user loses by them (Unavailable). Without a schema, or for a
// kind the hub does not serve, obj stays as it is.
func (l *Loader) Fit(kind string, obj any) (removed, lost []string) {
	s := l.Current()
	if !s.Knows(kind) {
		return nil, nil
	}
	content, err := toContent(obj)
	if err != nil {
		return nil, nil
	}
	removed = s.Prune(kind, content)
	if len(removed) == 0 {
		return nil, nil
	}
	// obj is still as it was: what it asked for, for Unavailable (only when something goes).
	before, err := toContent(obj)
	if err != nil {
		return nil, nil
	}
	if l.LeftOut != nil {
		l.LeftOut(kind, removed)
	}
	b, err := json.Marshal(content)
	if err != nil {
		return nil, nil
	}
	// Fields are only ever removed: decoding into the zeroed object gives it exactly content.
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil, nil
	}
	v.Elem().SetZero()
	if err := json.Unmarshal(b, obj); err != nil {
		return nil, nil
	}
	return removed, Unavailable(kind, before, removed)
}

// Note returns the sentence to say about the object key (Describe) when the hub's schema
// makes a feature it asks for unavailable (lost) and that was not said already; a key that
// loses nothing is forgotten, so that a later loss is said again.
func (r *Reported) Note(key, kind string, removed, lost []string) (string, bool) {
	if len(lost) == 0 {
		r.Forget(key)
		return "", false
	}
	note := Describe(kind, removed, lost)
	return note, r.Changed(key, note)
}

// Prune removes from obj (unstructured content of kind) what the hub's current schema does
// not declare (Schema.Prune), telling LeftOut.
func (l *Loader) Prune(kind string, obj map[string]any) []string {
	removed := l.Current().Prune(kind, obj)
	if len(removed) > 0 && l.LeftOut != nil {
		l.LeftOut(kind, removed)
	}
	return removed
}
