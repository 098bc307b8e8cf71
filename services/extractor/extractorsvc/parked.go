package extractorsvc

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

// ReasonReplay is the Reason of a request re-published by ReplayParked.
const ReasonReplay = "replay"

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

// ParkedKey is the RECALL_PARKED key of a request.
func ParkedKey(tenant, session string, upToSeq uint64) string {
	return tenant + "." + session + "." + strconv.FormatUint(upToSeq, 10)
}

func park(ctx context.Context, kv jetstream.KeyValue, p *Parked) error {
	if p.Request.Tenant != "" && p.Request.Session != "" && events.ValidateID(p.Request.Tenant) == nil && events.ValidateID(p.Request.Session) == nil {
		p.Key = ParkedKey(p.Request.Tenant, p.Request.Session, p.Request.UpToSeq)
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

// ListParked returns every parked request, oldest first.
func ListParked(ctx context.Context, js jetstream.JetStream) ([]Parked, error) {
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

// ParkedFilter selects parked requests; empty fields match everything.
type ParkedFilter struct {
	Tenant  string
	Session string
	// Progress, when set, is called with how many of the matching requests
	// were replayed so far, and how many match.
	Progress func(done, total int)
}

func (f ParkedFilter) match(p Parked) bool {
	return (f.Tenant == "" || f.Tenant == p.Request.Tenant) && (f.Session == "" || f.Session == p.Request.Session)
}

// ReplayParked re-publishes the parked requests that match filter to the
// work queue, with Reason ReasonReplay and a new dedup id (so the stream
// does not drop them as duplicates of the originals), and deletes each from
// RECALL_PARKED once the stream stored it. Invalid requests (no tenant or
// session) cannot be replayed and stay parked. It returns how many were
// replayed.
func ReplayParked(ctx context.Context, js jetstream.JetStream, filter ParkedFilter) (int, error) {
	parked, err := ListParked(ctx, js)
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
		r.Reason = ReasonReplay
		e, err := eventpub.Build(Component, eventpub.Event{Type: events.TypeExtractionRequested, Tenant: r.Tenant,
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
