// Package parked keeps work that failed permanently — the request, why it
// failed, how often it was tried — and replays it onto its work queue:
// extraction requests in RECALL_PARKED (the extractor parks), long-term
// memory commits in RECALL_LTM_STATE (Commit; the long-term memory service
// parks). The CLI and the operator console list and replay both.
package parked

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/pkg/events"
)

// Parked is an extraction request that failed permanently, kept in
// RECALL_PARKED until it is replayed. Nothing is lost: the request, why it
// failed and how often it was tried.
type Parked struct {
	// Key is the RECALL_PARKED key: <tenant>.<session>.<up_to_seq>, or
	// invalid.<stream seq> for a request that could not be decoded.
	Key      string                     `json:"key"`
	Request  events.ExtractionRequested `json:"request"`
	EventID  string                     `json:"event_id,omitempty"`
	Reason   string                     `json:"reason"`
	Error    string                     `json:"error"`
	Attempts int                        `json:"attempts"`
	ParkedAt time.Time                  `json:"parked_at"`
	Worker   string                     `json:"worker,omitempty"`
	// Subject and StreamSeq locate the original message in RECALL_EXTRACT.
	Subject   string `json:"subject,omitempty"`
	StreamSeq uint64 `json:"stream_seq,omitempty"`
	// Raw is the undecodable body of an invalid request.
	Raw []byte `json:"raw,omitempty"`
}

// Key is the RECALL_PARKED key of a request.
func Key(tenant, session string, upToSeq uint64) string {
	return tenant + "." + session + "." + strconv.FormatUint(upToSeq, 10)
}

// Put parks p under its key (Key, or invalid.<stream seq> for a request
// without a valid tenant and session).
func Put(ctx context.Context, kv jetstream.KeyValue, p *Parked) error {
	if p.Request.Tenant != "" && p.Request.Session != "" && events.ValidateID(p.Request.Tenant) == nil && events.ValidateID(p.Request.Session) == nil {
		p.Key = Key(p.Request.Tenant, p.Request.Session, p.Request.UpToSeq)
	} else {
		p.Key = "invalid." + strconv.FormatUint(p.StreamSeq, 10)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encoding parked request: %w", err)
	}
	if _, err := kv.Put(ctx, p.Key, b); err != nil {
		return fmt.Errorf("parking request %s: %w", p.Key, err)
	}
	return nil
}

// List returns every parked request, oldest first.
func List(ctx context.Context, js jetstream.JetStream) ([]Parked, error) {
	kv, err := js.KeyValue(ctx, events.BucketParked)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", events.BucketParked, err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing parked requests: %w", err)
	}
	var out []Parked
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // replayed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("reading parked request %s: %w", key, err)
		}
		var p Parked
		if err := json.Unmarshal(e.Value(), &p); err != nil {
			return nil, fmt.Errorf("decoding parked request %s: %w", key, err)
		}
		p.Key = key
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ParkedAt.Before(out[j].ParkedAt) })
	return out, nil
}

// Filter selects parked requests; empty fields match everything.
type Filter struct {
	Tenant  string
	Session string
	// Progress, when set, is called with how many of the matching requests
	// were replayed so far, and how many match.
	Progress func(done, total int)
}

func (f Filter) match(p Parked) bool {
	return (f.Tenant == "" || f.Tenant == p.Request.Tenant) && (f.Session == "" || f.Session == p.Request.Session)
}

// Replay re-publishes the parked requests that match filter to the
// work queue, with Reason events.ReasonReplay and a new dedup id (so the stream
// does not drop them as duplicates of the originals), and deletes each from
// RECALL_PARKED once the stream stored it. Invalid requests (no tenant or
// session) cannot be replayed and stay parked. source names the replaying
// component (the events' /recall/<source>). It returns how many were
// replayed.
func Replay(ctx context.Context, js jetstream.JetStream, source string, filter Filter) (int, error) {
	parked, err := List(ctx, js)
	if err != nil {
		return 0, err
	}
	kv, err := js.KeyValue(ctx, events.BucketParked)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", events.BucketParked, err)
	}
	var todo []Parked
	for _, p := range parked {
		if filter.match(p) && events.ValidateID(p.Request.Tenant) == nil && events.ValidateID(p.Request.Session) == nil {
			todo = append(todo, p)
		}
	}
	n := 0
	for _, p := range todo {
		r := p.Request
		if filter.Progress != nil {
			filter.Progress(n, len(todo))
		}
		r.Reason = events.ReasonReplay
		e, err := eventpub.Build(source, eventpub.Event{Type: events.TypeExtractionRequested, Tenant: r.Tenant,
			Session: r.Session, Key: r.RequestDedupID() + ":replay:" + uuid.NewString(), Data: r})
		if err != nil {
			return n, fmt.Errorf("encoding replay of %s: %w", p.Key, err)
		}
		if _, err := js.PublishMsg(ctx, eventpub.Msg(ctx, events.ExtractSubject(r.Tenant, r.Session), &e)); err != nil {
			return n, fmt.Errorf("replaying %s: %w", p.Key, err)
		}
		if err := kv.Delete(ctx, p.Key); err != nil {
			return n, fmt.Errorf("unparking %s (it was replayed; delete it by hand): %w", p.Key, err)
		}
		n++
	}
	if filter.Progress != nil {
		filter.Progress(n, len(todo))
	}
	return n, nil
}
