package tenantcfg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// History returns tenant's revisions kept in kv (RECALL_CONFIG keeps the
// last 64), oldest first: when each was written, by whom (for revisions
// written through Write), and the fields it changed from the revision
// before it — all of its fields for the oldest kept. A tenant without any
// revision gets none and no error. Revisions that are not valid
// configurations (written around the API) are diffed as the JSON they
// hold.
func History(ctx context.Context, kv jetstream.KeyValue, tenant string) ([]events.ConfigRevision, error) {
	es, err := kv.History(ctx, events.ConfigKey(tenant))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return []events.ConfigRevision{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the history of %s in %s: %w", tenant, events.BucketConfig, err)
	}
	out := make([]events.ConfigRevision, 0, len(es))
	var prev map[string]json.RawMessage
	for _, e := range es {
		r := events.ConfigRevision{Revision: e.Revision(), At: e.Created().UTC(), Op: "put"}
		var cur map[string]json.RawMessage
		if e.Operation() == jetstream.KeyValuePut {
			var meta *events.ConfigMeta
			cur, meta = leaves(e.Value())
			if meta != nil {
				r.Actor, r.Via = meta.Actor, meta.Via
			}
		} else {
			r.Op = "delete"
		}
		r.Changes = Diff(prev, cur)
		prev = cur
		out = append(out, r)
	}
	return out, nil
}

// leaves flattens a stored value into its leaf fields by JSON path, and
// returns its "_meta" apart.
func leaves(b []byte) (map[string]json.RawMessage, *events.ConfigMeta) {
	var v any
	if unmarshalNumbers(b, &v) != nil {
		return map[string]json.RawMessage{"": json.RawMessage(strconv.Quote(string(b)))}, nil
	}
	var meta *events.ConfigMeta
	if m, ok := v.(map[string]any); ok {
		if raw, ok := m[metaMember]; ok {
			mb, _ := json.Marshal(raw)
			if json.Unmarshal(mb, &meta) != nil {
				meta = nil
			}
			delete(m, metaMember)
		}
	}
	out := map[string]json.RawMessage{}
	flatten(v, "", out)
	return out, meta
}

// flatten records v's leaves (scalars, empty objects and arrays) under
// their paths: "a.b", "a[2].c".
func flatten(v any, path string, out map[string]json.RawMessage) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 && path != "" {
			out[path] = json.RawMessage("{}")
		}
		for k, e := range x {
			flatten(e, join(path, k), out)
		}
	case []any:
		if len(x) == 0 {
			out[path] = json.RawMessage("[]")
		}
		for i, e := range x {
			flatten(e, path+"["+strconv.Itoa(i)+"]", out)
		}
	default:
		b, _ := json.Marshal(x)
		out[path] = b
	}
}

// Diff lists the fields whose values differ between two flattened
// documents (nil: none stored), by path.
func Diff(old, cur map[string]json.RawMessage) []events.ConfigChange {
	paths := make([]string, 0, len(old)+len(cur))
	for p := range old {
		paths = append(paths, p)
	}
	for p := range cur {
		if _, ok := old[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	out := []events.ConfigChange{}
	for _, p := range paths {
		o, n := old[p], cur[p]
		if !bytes.Equal(o, n) {
			out = append(out, events.ConfigChange{Field: p, Old: o, New: n})
		}
	}
	return out
}
