package parked

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// Long-term memory commits park beside extractions: a queued commit that
// kept failing is kept in RECALL_LTM_STATE (the long-term memory service's
// own bucket) under events.ParkedCommitKey until it is replayed onto
// RECALL_COMMITS. The session's batch stays in the transcript and its
// commit record is not advanced, so a replay commits exactly what the
// failed attempts did not.

// Commit is a long-term memory commit that kept failing.
type Commit struct {
	// Key is the RECALL_LTM_STATE key: parked.<tenant>.<session>.<up_to>.
	Key     string `json:"key"`
	Tenant  string `json:"tenant"`
	User    string `json:"user"`
	Session string `json:"session"`
	// Reason is the commit's reason (session_ended, compaction, replay).
	Reason string `json:"reason"`
	// UpTo is the newest transcript record the commit was to cover.
	UpTo     uint64    `json:"up_to"`
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	ParkedAt time.Time `json:"parked_at"`
	Worker   string    `json:"worker,omitempty"`
}

// PutCommit parks c in kv (RECALL_LTM_STATE) under its key. Tenant, user
// and session must be valid ids.
func PutCommit(ctx context.Context, kv jetstream.KeyValue, c *Commit) error {
	for name, v := range map[string]string{"tenant": c.Tenant, "user": c.User, "session": c.Session} {
		if err := events.ValidateID(v); err != nil {
			return fmt.Errorf("parking a commit: %s: %w", name, err)
		}
	}
	c.Key = events.ParkedCommitKey(c.Tenant, c.Session, c.UpTo)
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encoding parked commit: %w", err)
	}
	if _, err := kv.Put(ctx, c.Key, b); err != nil {
		return fmt.Errorf("parking commit %s: %w", c.Key, err)
	}
	return nil
}

// ListCommits returns every parked long-term memory commit, oldest first.
func ListCommits(ctx context.Context, js jetstream.JetStream) ([]Commit, error) {
	kv, err := js.KeyValue(ctx, events.BucketLTMState)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", events.BucketLTMState, err)
	}
	return listCommits(ctx, kv)
}

func listCommits(ctx context.Context, kv jetstream.KeyValue) ([]Commit, error) {
	lister, err := kv.ListKeysFiltered(ctx, events.ParkedCommitPrefix+".>")
	if err != nil {
		return nil, fmt.Errorf("listing parked commits: %w", err)
	}
	var keys []string
	for key := range lister.Keys() {
		keys = append(keys, key)
	}
	var out []Commit
	for _, key := range keys {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // replayed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("reading parked commit %s: %w", key, err)
		}
		var c Commit
		if err := json.Unmarshal(e.Value(), &c); err != nil {
			return nil, fmt.Errorf("decoding parked commit %s: %w", key, err)
		}
		c.Key = key
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ParkedAt.Before(out[j].ParkedAt) })
	return out, nil
}

// ReplayCommits re-queues the parked commits that match filter on
// RECALL_COMMITS (reason events.CommitReasonReplay, a new message id so the
// stream does not drop them as duplicates of the originals) and deletes
// each from RECALL_LTM_STATE once the stream stored it. It returns how many
// were replayed; on an error, those before it stay replayed.
func ReplayCommits(ctx context.Context, js jetstream.JetStream, filter Filter) (int, error) {
	kv, err := js.KeyValue(ctx, events.BucketLTMState)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", events.BucketLTMState, err)
	}
	list, err := listCommits(ctx, kv)
	if err != nil {
		return 0, err
	}
	var todo []Commit
	for _, c := range list {
		if (filter.Tenant == "" || filter.Tenant == c.Tenant) && (filter.Session == "" || filter.Session == c.Session) {
			todo = append(todo, c)
		}
	}
	n := 0
	for _, c := range todo {
		if filter.Progress != nil {
			filter.Progress(n, len(todo))
		}
		if err := requeue(ctx, js, c); err != nil {
			return n, err
		}
		if err := kv.Delete(ctx, c.Key); err != nil {
			return n, fmt.Errorf("unparking %s (it was replayed; delete it by hand): %w", c.Key, err)
		}
		n++
	}
	if filter.Progress != nil {
		filter.Progress(n, len(todo))
	}
	return n, nil
}

// requeue publishes c's commit request again.
func requeue(ctx context.Context, js jetstream.JetStream, c Commit) error {
	body, err := json.Marshal(events.CommitQueued{Session: c.Session, Reason: events.CommitReasonReplay, UpTo: c.UpTo})
	if err != nil {
		return fmt.Errorf("encoding replay of %s: %w", c.Key, err)
	}
	m := nats.NewMsg(events.CommitSubject(c.Tenant, c.User))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s:%s:%d:replay:%s", c.Tenant, c.Session, c.UpTo, uuid.NewString()))
	natsce.Inject(ctx, m.Header)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("replaying %s: %w", c.Key, err)
	}
	return nil
}
