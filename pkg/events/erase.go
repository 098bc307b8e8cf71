package events

import (
	"fmt"
	"time"
)

// Data lifecycle: erasing a session or a user everywhere, and exporting
// them. See docs/operations.md, "Data lifecycle".

// BucketTombstones holds a tombstone per erased session under
// TombstoneKey, with a per-key TTL: while it lives, ingest refuses the
// session's events (410 Gone) and the eraser's guard removes anything
// written for the session again.
const BucketTombstones = "RECALL_TOMBSTONES"

// VerbErase erases a session (empty request → EraseReceipt), served by
// ingest on APISubject(VerbErase, tenant, session).
const VerbErase = "erase"

// Kinds and types of the erase announcements on StreamEvents. A user
// erasure is announced on EventsSubject(KindUserErased, tenant, user).
const (
	KindSessionErased = "session_erased"
	KindUserErased    = "user_erased"
	TypeSessionErased = "dev.recall.session.erased"
	TypeUserErased    = "dev.recall.user.erased"
)

// TombstoneKey is the BucketTombstones key of an erased session.
func TombstoneKey(tenant, session string) string { return "session." + tenant + "." + session }

// Tombstone is the value of a TombstoneKey.
type Tombstone struct {
	Tenant   string    `json:"tenant"`
	Session  string    `json:"session"`
	ErasedAt time.Time `json:"erased_at"`
	// Until is when the tombstone expires and the session id may be used
	// again.
	Until time.Time `json:"until"`
}

// ErasedPart is what an erase removed from one stream or bucket: counts
// of messages (stream records, KV revisions with their history, objects),
// never content.
type ErasedPart struct {
	// Store is the stream, KV bucket or object store.
	Store string `json:"store"`
	// What names the part: "transcript", "memory", "name claim", ...
	What string `json:"what"`
	// Count is the number of messages removed (KV: revisions, history
	// included; object store: objects).
	Count uint64 `json:"count"`
}

// EraseReceipt answers an erase: where something was removed and how
// much. An erase of what is already gone answers a receipt with no parts
// and Total 0 (erasing is idempotent).
type EraseReceipt struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session,omitempty"`
	User    string `json:"user,omitempty"`
	// Parts lists every part where something was removed.
	Parts []ErasedPart `json:"parts"`
	// Total sums the parts' counts.
	Total uint64 `json:"total"`
	// Sessions are the receipts of the user's sessions erased with the
	// user (DELETE /v1/users/{user}?sessions=true).
	Sessions []EraseReceipt `json:"sessions,omitempty"`
	// TombstoneUntil is when the session's tombstone expires.
	TombstoneUntil time.Time `json:"tombstone_until,omitzero"`
	ErasedAt       time.Time `json:"erased_at"`
}

// Add records n messages removed from store (nothing when n is 0).
func (r *EraseReceipt) Add(store, what string, n uint64) {
	if n == 0 {
		return
	}
	for i := range r.Parts {
		if r.Parts[i].Store == store && r.Parts[i].What == what {
			r.Parts[i].Count += n
			r.Total += n
			return
		}
	}
	r.Parts = append(r.Parts, ErasedPart{Store: store, What: what, Count: n})
	r.Total += n
}

// Count returns the messages removed from store for what ("" : every part
// of store).
func (r *EraseReceipt) Count(store, what string) uint64 {
	var n uint64
	for _, p := range r.Parts {
		if p.Store == store && (what == "" || p.What == what) {
			n += p.Count
		}
	}
	return n
}

// Erased is the data of TypeSessionErased and TypeUserErased: the ids and
// the counts of an erase, never content.
type Erased struct {
	Session string       `json:"session,omitempty"`
	User    string       `json:"user,omitempty"`
	Parts   []ErasedPart `json:"parts"`
	Total   uint64       `json:"total"`
	// Sessions counts the sessions erased with a user.
	Sessions int `json:"sessions,omitempty"`
	// Operator is true when an operator, not the tenant, asked.
	Operator bool `json:"operator,omitempty"`
	// Reason is "retention" for an erase of the retention sweeper.
	Reason string `json:"reason,omitempty"`
}

// Retention is a tenant's data retention (TenantConfig.Retention): the
// most a session's transcript, memory and index entry, and notifications
// may age, as Go durations ("720h"); empty keeps the stream-wide limits
// (RECALL_TRANSCRIPT_MAX_AGE, RECALL_EVENTS_MAX_AGE), which cap every
// tenant. A session whose newest record is older than SessionMaxAge is
// erased whole by the retention sweeper.
type Retention struct {
	SessionMaxAge       string `json:"session_max_age,omitempty"`
	NotificationsMaxAge string `json:"notifications_max_age,omitempty"`
}

// Durations parses the retention's ages (0 for empty ones).
func (r *Retention) Durations() (session, notifications time.Duration, err error) {
	if r == nil {
		return 0, 0, nil
	}
	parse := func(name, s string) (time.Duration, error) {
		if s == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Minute {
			return 0, fmt.Errorf("retention %s %q: want a Go duration of at least 1m (e.g. \"720h\")", name, s)
		}
		return d, nil
	}
	if session, err = parse("session_max_age", r.SessionMaxAge); err != nil {
		return 0, 0, err
	}
	notifications, err = parse("notifications_max_age", r.NotificationsMaxAge)
	return session, notifications, err
}
