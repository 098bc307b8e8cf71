package events

import "time"

// The session index (services/indexer): a name, description, summary and
// tags for every session, references to past sessions by id or name, and
// questions to a past session. See docs/sessions.md.

// BucketIndex holds one SessionIndex per session under MemoryKey(tenant,
// session), with history.
const BucketIndex = "RECALL_INDEX"

// DurableIndexer is the indexer's consumer on every transcript shard.
const DurableIndexer = "recall-indexer"

// BucketIndexMembers holds the indexer replicas' membership heartbeats
// (per-key TTL): the replicas share the transcript's shards.
const BucketIndexMembers = "RECALL_INDEX_MEMBERS"

// Index API verbs, served by the indexer. VerbSessions and VerbResolve
// address a tenant, not a session: their session token is TenantScope.
const (
	// VerbIndex reads a session's index entry (empty request → IndexReply).
	VerbIndex = "index"
	// VerbReindex indexes a session now, waiting for a running indexing of
	// it first (empty request → IndexReply).
	VerbReindex = "reindex"
	// VerbSessions lists a tenant's sessions (SessionsRequest →
	// SessionsReply).
	VerbSessions = "sessions"
	// VerbResolve resolves a reference, or every @@reference of a text
	// (ResolveRequest → ResolveReply).
	VerbResolve = "resolve"
	// VerbQuery asks a past session a question (QueryRequest → QueryReply).
	VerbQuery = "query"
)

// TenantScope is the session token of tenant-wide verbs:
// APISubject(VerbSessions, tenant, TenantScope).
const TenantScope = "_"

// Kinds and types of the indexer's notifications on StreamEvents.
const (
	KindSessionIndexed     = "session_indexed"
	KindSessionIndexFailed = "session_index_failed"
	TypeSessionIndexed     = "dev.recall.session.indexed"
	TypeSessionIndexFailed = "dev.recall.session.index_failed"
)

// Index reasons: why an indexing ran.
const (
	IndexReasonTurnEnd      = "turn_end"
	IndexReasonSessionEnded = "session_ended"
	IndexReasonForced       = "forced"
)

// SessionIndex is a session's entry in BucketIndex.
type SessionIndex struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	// Name is short and readable, unique within the tenant when it was
	// given (a numeric suffix is added on collision).
	Name        string   `json:"name,omitempty"`
	Description string   `json:"description,omitempty"`
	Summary     string   `json:"summary,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	// The session's facts, from dev.recall.session.started and its records.
	ParentSession string    `json:"parent_session,omitempty"`
	CWD           string    `json:"cwd,omitempty"`
	Ephemeral     bool      `json:"ephemeral,omitempty"`
	UserID        string    `json:"user_id,omitempty"`
	AgentID       string    `json:"agent_id,omitempty"`
	Model         string    `json:"model,omitempty"`
	CreatedAt     time.Time `json:"created_at,omitzero"`
	UpdatedAt     time.Time `json:"updated_at,omitzero"`
	Ended         bool      `json:"ended,omitempty"`
	// LastIndexedID and LastIndexedSeq are the newest record the metadata
	// covers (zero: never indexed).
	LastIndexedID  string    `json:"last_indexed_id,omitempty"`
	LastIndexedSeq uint64    `json:"last_indexed_seq,omitempty"`
	IndexedAt      time.Time `json:"indexed_at,omitzero"`
	// ReadFromSeq is where the next indexing starts reading the transcript
	// (0: its first record): the oldest message of the text the last
	// indexing kept from the end of the session.
	ReadFromSeq uint64 `json:"read_from_seq,omitempty"`
	// ReadFromBytes is the input limit ReadFromSeq was chosen under; an
	// indexer with a larger limit reads from the first record again (0:
	// unknown, the tail is kept).
	ReadFromBytes int    `json:"read_from_bytes,omitempty"`
	IndexModel    string `json:"index_model,omitempty"`
}

// Indexed reports whether the entry has metadata from an indexing.
func (s *SessionIndex) Indexed() bool { return s.LastIndexedSeq > 0 }

// IndexReply answers VerbIndex and VerbReindex.
type IndexReply struct {
	Index    SessionIndex `json:"index"`
	Revision uint64       `json:"revision"`
	// Outcome is the indexing VerbReindex ran (nil for VerbIndex).
	Outcome *SessionIndexed `json:"outcome,omitempty"`
}

// SessionIndexed is the data of TypeSessionIndexed and
// TypeSessionIndexFailed: one indexing, successful or not.
type SessionIndexed struct {
	Session string `json:"session"`
	Success bool   `json:"success"`
	Reason  string `json:"reason"`
	Model   string `json:"model,omitempty"`
	// Attempts counts model calls; malformed output is retried (3 at
	// most), transport and provider errors are not.
	Attempts int        `json:"attempts"`
	Usage    TokenUsage `json:"usage"`
	// CostUSD is the usage priced by the configured table (0 when the
	// model has no price).
	CostUSD        float64 `json:"cost_usd"`
	Error          string  `json:"error,omitempty"`
	Name           string  `json:"name,omitempty"`
	LastIndexedSeq uint64  `json:"last_indexed_seq,omitempty"`
	DurationMS     int64   `json:"duration_ms"`
}

// SessionsRequest lists a tenant's sessions, newest first.
type SessionsRequest struct {
	// Q keeps sessions whose name, description, summary, tags or id
	// contain every word of Q (case-insensitive).
	Q string `json:"q,omitempty"`
	// Tag keeps sessions with this tag.
	Tag string `json:"tag,omitempty"`
	// Limit is the page size (default 50, at most 500).
	Limit int `json:"limit,omitempty"`
	// Cursor is a previous reply's Next.
	Cursor string `json:"cursor,omitempty"`
}

// SessionsReply is one page of sessions.
type SessionsReply struct {
	Sessions []SessionIndex `json:"sessions"`
	// Next is the cursor of the next page; empty on the last.
	Next string `json:"next,omitempty"`
}

// ResolveRequest resolves Ref (a session id or name, with an optional ~N
// for N ancestors), or every @@reference in Text.
type ResolveRequest struct {
	Ref  string `json:"ref,omitempty"`
	Text string `json:"text,omitempty"`
	// Answer asks for the questions of Text's "@@ref: question" forms to
	// be answered (one query per question).
	Answer bool `json:"answer,omitempty"`
}

// ResolveReply answers a ResolveRequest.
type ResolveReply struct {
	// Resolved is Ref's resolution, or one per reference of Text in order
	// of appearance.
	Resolved []Resolution `json:"resolved"`
	// Context is the message carrying the referenced sessions' summaries
	// (and answers), to store in the transcript before the user message
	// that referenced them; nil when nothing resolved.
	Context *Message `json:"context,omitempty"`
}

// Resolution is one resolved reference.
type Resolution struct {
	// Ref is the reference as written, without "@@" ("name~2").
	Ref string `json:"ref"`
	// By says how it matched: "id", "name" or "fuzzy".
	By      string       `json:"by"`
	Session SessionIndex `json:"session"`
	// Ancestors are the parents asked for with ~N, nearest first.
	Ancestors []SessionIndex `json:"ancestors,omitempty"`
	Question  string         `json:"question,omitempty"`
	Answer    *QueryReply    `json:"answer,omitempty"`
}

// QueryRequest asks a past session a question.
type QueryRequest struct {
	Question string `json:"question"`
	// BudgetTokens caps the session text sent to the model (default from
	// the indexer's configuration).
	BudgetTokens int64 `json:"budget_tokens,omitempty"`
}

// QueryReply is a past session's answer.
type QueryReply struct {
	Session string `json:"session"`
	Answer  string `json:"answer"`
	// Sources are the records the answer drew on.
	Sources []QuerySource `json:"sources"`
	Model   string        `json:"model,omitempty"`
	Usage   TokenUsage    `json:"usage"`
	CostUSD float64       `json:"cost_usd"`
	// InputTokens estimates the session text sent; Records counts the
	// records it came from, of which Truncated were left out for the budget.
	InputTokens int64 `json:"input_tokens"`
	Records     int   `json:"records"`
	Truncated   int   `json:"truncated"`
	// OverheadMS is the time spent outside the model call.
	OverheadMS float64 `json:"overhead_ms"`
}

// QuerySource is one record an answer drew on.
type QuerySource struct {
	Seq     uint64 `json:"seq,omitempty"`
	ID      string `json:"id,omitempty"`
	Role    string `json:"role,omitempty"`
	Excerpt string `json:"excerpt"`
}

// SessionReferenceTag wraps the text of a context message carrying
// referenced sessions: a user message whose one text block starts with
// "<session-references>". The trigger, extractor and compactor count it like
// any message; the indexer does not count it as a user request.
const SessionReferenceTag = "session-references"
