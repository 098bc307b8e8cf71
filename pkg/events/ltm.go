package events

import "time"

// Long-term memory (services/longterm): memory documents per user (self)
// and per peer, written by commits of session batches under a memory
// policy. See docs/long-term-memory.md.

// BucketLTM holds long-term memory documents under LTMKey (history kept).
const BucketLTM = "RECALL_LTM"

// BucketLTMState holds each session's commit record under CommitKey and
// the per-user commit leases (per-key TTL).
const BucketLTMState = "RECALL_LTM_STATE"

// DurableLongTerm is the long-term memory service's consumer on every
// transcript shard (commit points: session ends, compactions).
const DurableLongTerm = "recall-longterm"

// BucketLTMFollowers holds the membership heartbeats (per-key TTL) of the
// long-term memory replicas that share the transcript's shards.
const BucketLTMFollowers = "RECALL_LTM_FOLLOWERS"

// Commit requests: the work queue that spreads commits over the long-term
// memory replicas by user, the way RECALL_EXTRACT spreads extractions by
// session. A request is published on CommitSubject(tenant, user); the
// stream stores it on
// recall.commitp.<partition(tenant, user)>.<tenant>.<user>, and a
// partitioned consumer group (membership in BucketLTMMembers) runs each
// user's commits one at a time, in order.
const (
	StreamCommits            = "RECALL_COMMITS"
	SubjectCommitRoot        = "recall.commit"
	SubjectCommitPartitioned = "recall.commitp"
	// DurableCommitPrefix + partition number names the consumer of one
	// commit partition, e.g. "recall-commit-7".
	DurableCommitPrefix = "recall-commit-"
	// BucketLTMMembers holds the long-term memory replicas' membership
	// heartbeats (per-key TTL).
	BucketLTMMembers = "RECALL_LTM_MEMBERS"
)

// CommitSubject is where a user's commit requests are published.
func CommitSubject(tenant, user string) string { return SubjectCommitRoot + "." + tenant + "." + user }

// CommitPartitionFilter is the filter subject of commit partition p.
func CommitPartitionFilter(p int) string { return SubjectCommitPartitioned + "." + itoa(p) + ".>" }

// CommitDurable names the durable consumer of commit partition p.
func CommitDurable(p int) string { return DurableCommitPrefix + itoa(p) }

// CommitQueued is a queued commit request (the body on CommitSubject): the
// session's records up to UpTo, for the reason given.
type CommitQueued struct {
	Session string `json:"session"`
	Reason  string `json:"reason"`
	UpTo    uint64 `json:"up_to"`
}

// Long-term memory API verbs. VerbLTM addresses a user: its session token
// is the user id (recall.api.ltm.<tenant>.<user>).
const (
	// VerbCommit commits a session's batch since the last commit now
	// (CommitRequest → MemoryCommitted).
	VerbCommit = "commit"
	// VerbLTM reads a user's long-term memory (LTMRequest → LTMReply).
	VerbLTM = "ltm"
)

// Kind and type of a commit's notification on StreamEvents.
const (
	KindMemoryCommitted = "memory_committed"
	TypeMemoryCommitted = "dev.recall.memory.committed"
)

// Commit reasons.
const (
	CommitReasonSessionEnded = "session_ended"
	CommitReasonCompaction   = "compaction"
	CommitReasonExplicit     = "explicit"
)

// LTMKey is the key of a memory document: <tenant>.<user>.self.<type> or
// <tenant>.<user>.peer.<peer>.<type>.
func LTMKey(tenant, user, peer, typ string) string {
	if peer == "" {
		return tenant + "." + user + ".self." + typ
	}
	return tenant + "." + user + ".peer." + peer + "." + typ
}

// CommitKey is the key of a session's commit record.
func CommitKey(tenant, session string) string { return "commits." + tenant + "." + session }

// CustomMemoryType is a tenant's own memory type (TenantConfig).
type CustomMemoryType struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Prompt tells the model what to extract; Schema describes the
	// document's shape.
	Prompt string `json:"prompt"`
	Schema string `json:"schema,omitempty"`
	// AgentOnly types are written to self memory only.
	AgentOnly bool `json:"agent_only,omitempty"`
}

// StoredMemoryDocument is a memory document's value in BucketLTM.
type StoredMemoryDocument struct {
	Content   string    `json:"content"`
	UpdatedAt time.Time `json:"updated_at"`
	// Session is the session whose commit wrote this revision.
	Session string `json:"session,omitempty"`
}

// CommitRecord is a session's commit progress: the transcript is the
// archive, and each commit covers the records after the previous one.
type CommitRecord struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	User    string `json:"user"`
	// LastSeq is the newest transcript record committed.
	LastSeq uint64    `json:"last_seq"`
	Commits int       `json:"commits"`
	At      time.Time `json:"at"`
}

// CommitRequest asks for a commit now.
type CommitRequest struct{}

// MemoryCommitted is the data of TypeMemoryCommitted and the reply of
// VerbCommit: what one commit wrote and skipped.
type MemoryCommitted struct {
	Session string `json:"session"`
	User    string `json:"user"`
	Reason  string `json:"reason"`
	// FromSeq and ToSeq bound the committed batch (the archive: those
	// transcript records); Messages counts its messages.
	FromSeq  uint64 `json:"from_seq"`
	ToSeq    uint64 `json:"to_seq"`
	Messages int    `json:"messages"`
	// AllowedPeers are the safe peer ids of the batch peer memory allowed.
	AllowedPeers []string      `json:"allowed_peers"`
	Policy       MemoryPolicy  `json:"policy"`
	Phases       []string      `json:"phases"`
	Written      []MemoryWrite `json:"written"`
	Skipped      []MemorySkip  `json:"skipped"`
	// Denied are the writes the guard refused (the model tried to write
	// outside the permitted space), with the refusal.
	Denied     []string   `json:"denied,omitempty"`
	Model      string     `json:"model,omitempty"`
	Usage      TokenUsage `json:"usage"`
	Success    bool       `json:"success"`
	Error      string     `json:"error,omitempty"`
	DurationMS int64      `json:"duration_ms"`
	// Worker is the replica that ran the commit.
	Worker string `json:"worker,omitempty"`
}

// MemoryWrite is one document a commit changed.
type MemoryWrite struct {
	Target   string `json:"target"` // "self" or "peer/<peer>"
	Type     string `json:"type"`
	Lines    int    `json:"lines"`
	Revision uint64 `json:"revision"`
}

// MemorySkip counts operations a commit did not write, by reason.
type MemorySkip struct {
	Reason string `json:"reason"`
	Type   string `json:"type,omitempty"`
	Count  int    `json:"count"`
}

// LTMRequest reads a user's memory; Types filters by type (nil: all).
type LTMRequest struct {
	Types []string `json:"types,omitempty"`
}

// LTMReply is a user's long-term memory.
type LTMReply struct {
	User      string        `json:"user"`
	Documents []LTMDocument `json:"documents"`
	// Context is a block ready to put at the start of a new session's
	// context (self documents, then each peer's).
	Context string `json:"context"`
}

// LTMDocument is one memory document.
type LTMDocument struct {
	Target    string    `json:"target"`
	Type      string    `json:"type"`
	Content   string    `json:"content"`
	Revision  uint64    `json:"revision"`
	UpdatedAt time.Time `json:"updated_at"`
}
