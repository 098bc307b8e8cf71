package tenantcfg

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// Page selects a page of a tenant's history: the newest Limit revisions
// older than Before (0: from the newest), whose answer takes at most
// MaxBytes of JSON. A zero Limit or MaxBytes takes its default; larger
// ones are capped (MaxHistoryLimit, MaxHistoryBytes).
type Page struct {
	Before   uint64
	Limit    int
	MaxBytes int
}

// Bounds of a history page.
const (
	DefaultHistoryLimit = 16
	MaxHistoryLimit     = 64
	MaxHistoryBytes     = 1 << 20
)

func (p Page) resolved() Page {
	if p.Limit <= 0 {
		p.Limit = DefaultHistoryLimit
	}
	if p.MaxBytes <= 0 {
		p.MaxBytes = MaxHistoryBytes
	}
	p.Limit, p.MaxBytes = min(p.Limit, MaxHistoryLimit), min(p.MaxBytes, MaxHistoryBytes)
	return p
}

// History returns a page of tenant's revisions kept in kv (RECALL_CONFIG
// keeps the last 64), oldest first: when each was written, by whom (for
// revisions written through Write), and the fields it changed from the
// revision before it — all of its fields for the oldest kept. next, when
// not 0, is the Before of the page of older revisions. A tenant without
// any revision gets none and no error. Revisions that are not valid
// configurations (written around the API) are diffed as the JSON they
// hold.
//
// The read is bounded: the revisions are listed without their values,
// then the page's values are read one at a time, newest first, until the
// page holds Limit revisions or its answer would pass MaxBytes (the
// newest is always answered) — so a read holds at most about MaxBytes
// and two values, whatever the tenant stored.
func History(ctx context.Context, kv jetstream.KeyValue, tenant string, p Page) (revs []events.ConfigRevision, next uint64, err error) {
	p = p.resolved()
	key := events.ConfigKey(tenant)
	metas, err := kv.History(ctx, key, jetstream.MetaOnly())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return []events.ConfigRevision{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading the history of %s in %s: %w", tenant, events.BucketConfig, err)
	}
	if p.Before > 0 {
		i, _ := slices.BinarySearchFunc(metas, p.Before, func(e jetstream.KeyValueEntry, rev uint64) int { return cmp.Compare(e.Revision(), rev) })
		metas = metas[:i]
	}
	val := func(i int) (map[string]json.RawMessage, *events.ConfigMeta, error) {
		if i < 0 || metas[i].Operation() != jetstream.KeyValuePut {
			return nil, nil, nil
		}
		e, err := kv.GetRevision(ctx, key, metas[i].Revision())
		if err != nil {
			return nil, nil, fmt.Errorf("reading revision %d of %s: %w", metas[i].Revision(), tenant, err)
		}
		cur, meta := leaves(e.Value())
		return cur, meta, nil
	}
	out := []events.ConfigRevision{}
	size := 0
	i := len(metas) - 1
	cur, meta, err := val(i)
	for ; i >= 0 && len(out) < p.Limit; i-- {
		if err != nil {
			return nil, 0, err
		}
		prev, prevMeta, perr := val(i - 1)
		r := revision(metas[i], meta, prev, cur)
		b, _ := json.Marshal(r)
		if len(out) > 0 && size+len(b) > p.MaxBytes {
			break
		}
		size += len(b)
		out = append(out, r)
		cur, meta, err = prev, prevMeta, perr
	}
	slices.Reverse(out)
	if i >= 0 {
		next = out[0].Revision
	}
	return out, next, nil
}

// revision describes entry e holding cur (written by meta), whose
// predecessor held prev.
func revision(e jetstream.KeyValueEntry, meta *events.ConfigMeta, prev, cur map[string]json.RawMessage) events.ConfigRevision {
	r := events.ConfigRevision{Revision: e.Revision(), At: e.Created().UTC(), Op: "put"}
	if e.Operation() != jetstream.KeyValuePut {
		r.Op = "delete"
	}
	if meta != nil {
		r.Actor, r.Via = meta.Actor, meta.Via
	}
	r.Changes = Diff(prev, cur)
	return r
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
