package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// CloudEvents type names. Recall owns the reverse-DNS prefix "dev.recall.".
const (
	// TypeMessage is one transcript record: a user or assistant message in
	// Anthropic Messages shape (data: Message).
	TypeMessage = "dev.recall.transcript.message"
	// TypeSessionCompacting says the platform started compacting the
	// session's context (data: SessionCompacting).
	TypeSessionCompacting = "dev.recall.session.compacting"
	// TypeSessionCompacted says the platform replaced its context by a
	// compacted one (data: SessionCompacted).
	TypeSessionCompacted = "dev.recall.session.compacted"
	// TypeSessionEnded says the session is over (data: SessionEnded).
	TypeSessionEnded = "dev.recall.session.ended"
	// TypeSessionStarted describes a new session: who runs it, where, what
	// it continues and what may be remembered of it (data: SessionStarted).
	// Optional; a session without one has no parent, no user and the
	// tenant's default memory policy.
	TypeSessionStarted = "dev.recall.session.started"

	TypeExtractionRequested = "dev.recall.extraction.requested"
	TypeExtractionCompleted = "dev.recall.extraction.completed"
	TypeExtractionFailed    = "dev.recall.extraction.failed"
	TypeCompactionServed    = "dev.recall.compaction.served"
)

// IngestTypes are the event types platforms may publish. Everything else is
// produced by Recall itself and rejected at ingest.
var IngestTypes = map[string]bool{
	TypeMessage:           true,
	TypeSessionCompacting: true,
	TypeSessionCompacted:  true,
	TypeSessionEnded:      true,
	TypeSessionStarted:    true,
}

// Extension attribute names.
const (
	// ExtTenant carries the tenant on events Recall stores and publishes. It
	// is set from authentication; an incoming event whose tenant differs from
	// the authenticated one is rejected.
	ExtTenant = "recalltenant"
	// ExtSeq carries the transcript stream sequence an event was stored at,
	// on events Recall hands back (compaction replies).
	ExtSeq = "recallseq"
	// ExtSynthetic marks a record Recall added to a compaction's kept
	// records to make the context valid for the model (it was never stored
	// and has no ExtSeq); its value says why (SyntheticInterrupted).
	ExtSynthetic = "recallsynthetic"
	// SyntheticInterrupted: a tool_result answering a call the agent never
	// got a result for (it stopped mid-call).
	SyntheticInterrupted = "interrupted_tool_call"
	// ExtTraceParent and ExtTraceState are the CloudEvents distributed tracing
	// extension.
	ExtTraceParent = "traceparent"
	ExtTraceState  = "tracestate"
)

// Roles of a transcript message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Query sources: only the main thread drives extraction.
const (
	QueryMain     = "main"
	QuerySubagent = "subagent"
)

// Content block types (Anthropic Messages).
const (
	BlockText             = "text"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
	BlockToolUse          = "tool_use"
	BlockToolResult       = "tool_result"
	BlockImage            = "image"
	BlockDocument         = "document"
)

// Message is the data of a TypeMessage event.
type Message struct {
	// UUID identifies this record in the transcript (required).
	UUID string `json:"uuid"`
	// ParentUUID is the record this one follows, if the platform tracks it.
	ParentUUID string `json:"parent_uuid,omitempty"`
	// Role is "user" or "assistant".
	Role string `json:"role"`
	// Content is the list of content blocks. A JSON string is accepted and
	// becomes one text block.
	Content Content `json:"content"`
	// MessageID is the API response id. A streamed response arrives as several
	// records sharing one MessageID; they are one response.
	MessageID string `json:"message_id,omitempty"`
	// StopReason, when set, says the response is complete.
	StopReason string `json:"stop_reason,omitempty"`
	// Model that produced an assistant message.
	Model string `json:"model,omitempty"`
	// Usage is the real API usage of an assistant response, when known.
	Usage *Usage `json:"usage,omitempty"`
	// QuerySource is "main" (default when empty) or "subagent".
	QuerySource string `json:"query_source,omitempty"`
	// AgentID and PeerID identify the agent and the peer in multi-agent
	// platforms; informational.
	AgentID string `json:"agent_id,omitempty"`
	PeerID  string `json:"peer_id,omitempty"`
}

// IsMain reports whether the message belongs to the main thread.
func (m *Message) IsMain() bool { return m.QuerySource == "" || m.QuerySource == QueryMain }

// Usage is API token usage in Anthropic's shape.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens,omitempty"`
}

// Total is input + cache creation + cache read + output, the context size the
// response implies.
func (u Usage) Total() int64 {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens + u.OutputTokens
}

// Block is one content block. Only the fields of its Type are set.
type Block struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// thinking
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	// redacted_thinking
	Data string `json:"data,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string  `json:"tool_use_id,omitempty"`
	Content   Content `json:"content,omitempty"`
	IsError   bool    `json:"is_error,omitempty"`
	// image, document
	Source json.RawMessage `json:"source,omitempty"`
}

// stdUnmarshal is encoding/json's Unmarshal: the judge, and the wording of
// errors, when the fast decoder fails.
var stdUnmarshal = json.Unmarshal

// Content is a list of blocks; it unmarshals from a JSON string too (one text
// block), as the Messages API allows.
type Content []Block

// UnmarshalJSON accepts a string or an array of blocks.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		s, ok := plainString(b)
		if !ok {
			if err := json.Unmarshal(b, &s); err != nil {
				return err
			}
		}
		*c = Content{{Type: BlockText, Text: s}}
		return nil
	}
	if bytes.Equal(b, []byte("null")) {
		*c = nil
		return nil
	}
	var blocks []Block
	if err := fastJSON.Unmarshal(b, &blocks); err != nil {
		blocks = nil
		if err := stdUnmarshal(b, &blocks); err != nil {
			return fmt.Errorf("content must be a string or an array of blocks: %w", err)
		}
	}
	*c = blocks
	return nil
}

// plainString decodes a JSON string without escapes, control bytes or
// invalid UTF-8 — a tool result's text, mostly — by slicing it: what
// encoding/json would return, without its two scans. ok is false for any
// other string (encoding/json decodes it).
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// ToolUses counts the tool_use blocks of the content.
func (c Content) ToolUses() int {
	n := 0
	for i := range c {
		if c[i].Type == BlockToolUse {
			n++
		}
	}
	return n
}

// SessionCompacting is the data of TypeSessionCompacting.
type SessionCompacting struct {
	// Trigger is "auto" or "manual".
	Trigger string `json:"trigger,omitempty"`
}

// SessionCompacted is the data of TypeSessionCompacted: the platform's
// context was replaced; PostTokens is its new size.
type SessionCompacted struct {
	Trigger    string `json:"trigger,omitempty"`
	PreTokens  int64  `json:"pre_tokens"`
	PostTokens int64  `json:"post_tokens"`
	// FirstKeptUUID and LastKeptUUID are the oldest and newest transcript
	// records the compacted context still holds verbatim (the preserved
	// segment), when known. After a Recall compaction they are the reply's
	// boundary.preserved_segment head_uuid and tail_uuid.
	FirstKeptUUID string `json:"first_kept_uuid,omitempty"`
	LastKeptUUID  string `json:"last_kept_uuid,omitempty"`
}

// SessionStarted is the data of TypeSessionStarted. Every field is
// optional.
type SessionStarted struct {
	// ParentSession is the session this one continues or was forked from
	// (a session id of the same tenant).
	ParentSession string `json:"parent_session,omitempty"`
	// CWD is the working directory of a coding agent.
	CWD string `json:"cwd,omitempty"`
	// Ephemeral sessions are never indexed nor committed to long-term
	// memory.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// UserID is the user the session belongs to (an id like a session id);
	// long-term memory is kept per user.
	UserID string `json:"user_id,omitempty"`
	// AgentID is the agent running the session.
	AgentID string `json:"agent_id,omitempty"`
	// Model is the session's main model, when known at start.
	Model string `json:"model,omitempty"`
	// MemoryPolicy says what long-term memory may be written from this
	// session; nil means the tenant's default.
	MemoryPolicy *MemoryPolicy `json:"memory_policy,omitempty"`
}

// MemoryPolicy governs long-term memory writes from a session.
type MemoryPolicy struct {
	Self PolicyTarget `json:"self"`
	Peer PolicyTarget `json:"peer"`
	// MemoryTypes limits both self and peer writes to these types; nil
	// allows every enabled type.
	MemoryTypes []string `json:"memory_types"`
}

// PolicyTarget enables or disables one memory target.
type PolicyTarget struct {
	Enabled bool `json:"enabled"`
}

// Validate checks the ids a SessionStarted carries. Memory types are checked
// against the registry by the long-term memory service, which knows the
// tenant's custom types.
func (s *SessionStarted) Validate() error {
	for _, f := range []struct{ name, v string }{
		{"data.parent_session", s.ParentSession},
		{"data.user_id", s.UserID},
		{"data.agent_id", s.AgentID},
	} {
		if f.v == "" {
			continue
		}
		if err := ValidateID(f.v); err != nil {
			return &FieldError{Field: f.name, Reason: err.Error()}
		}
	}
	if len(s.CWD) > 4096 {
		return &FieldError{Field: "data.cwd", Reason: "longer than 4096 bytes"}
	}
	if len(s.Model) > 256 {
		return &FieldError{Field: "data.model", Reason: "longer than 256 bytes"}
	}
	if p := s.MemoryPolicy; p != nil {
		if len(p.MemoryTypes) > 64 {
			return &FieldError{Field: "data.memory_policy.memory_types", Reason: "more than 64 types"}
		}
		for i, t := range p.MemoryTypes {
			if err := ValidateID(t); err != nil {
				return &FieldError{Field: fmt.Sprintf("data.memory_policy.memory_types[%d]", i), Reason: err.Error()}
			}
		}
	}
	return nil
}

// SessionEnded is the data of TypeSessionEnded.
type SessionEnded struct {
	Reason string `json:"reason,omitempty"`
}

// Reasons for an extraction request.
const (
	ReasonThreshold = "threshold"
	ReasonManual    = "manual"
	ReasonReplay    = "replay"
)

// ExtractionCounters are the numbers behind a trigger decision.
type ExtractionCounters struct {
	Tokens              int64 `json:"tokens"`
	TokensAtLastExtract int64 `json:"tokens_at_last_extraction"`
	ToolCallsSince      int   `json:"tool_calls_since"`
	NaturalBreak        bool  `json:"natural_break"`
}

// ExtractionRequested is the data of TypeExtractionRequested, stored on
// StreamExtract (and announced on StreamEvents).
type ExtractionRequested struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	// UpToSeq is the transcript stream sequence of the last record to cover.
	UpToSeq uint64 `json:"up_to_seq"`
	// UpToID is that record's uuid.
	UpToID   string             `json:"up_to_id"`
	Reason   string             `json:"reason"`
	Counters ExtractionCounters `json:"counters"`
}

// RequestDedupID is the Nats-Msg-Id of an extraction request, so a decision
// re-emitted after a restart is stored once.
func (r ExtractionRequested) RequestDedupID() string {
	return fmt.Sprintf("%s:%s:%d", r.Tenant, r.Session, r.UpToSeq)
}

// TokenUsage accounts an LLM call.
type TokenUsage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64 `json:"cache_creation_tokens,omitempty"`
}

// Add returns u + o.
func (u TokenUsage) Add(o TokenUsage) TokenUsage {
	return TokenUsage{
		InputTokens:         u.InputTokens + o.InputTokens,
		OutputTokens:        u.OutputTokens + o.OutputTokens,
		CacheReadTokens:     u.CacheReadTokens + o.CacheReadTokens,
		CacheCreationTokens: u.CacheCreationTokens + o.CacheCreationTokens,
	}
}

// ExtractionCompleted is the data of TypeExtractionCompleted.
type ExtractionCompleted struct {
	Tenant            string `json:"tenant"`
	Session           string `json:"session"`
	UpToSeq           uint64 `json:"up_to_seq"`
	CoveredSeq        uint64 `json:"covered_seq"`
	LastSummarizedID  string `json:"last_summarized_id,omitempty"`
	LastSummarizedSeq uint64 `json:"last_summarized_seq,omitempty"`
	Revision          uint64 `json:"revision"`
	Skipped           bool   `json:"skipped,omitempty"` // already covered, no LLM call
	// Edits is the number of edits applied; UpToDate reports that the model
	// made none because the notes already said everything (coverage still
	// advances).
	Edits      int        `json:"edits"`
	UpToDate   bool       `json:"up_to_date,omitempty"`
	Usage      TokenUsage `json:"usage"`
	DurationMS int64      `json:"duration_ms"`
	Worker     string     `json:"worker,omitempty"`
	Provider   string     `json:"provider,omitempty"`
	Model      string     `json:"model,omitempty"`
}

// ExtractionFailed is the data of TypeExtractionFailed.
type ExtractionFailed struct {
	Tenant   string `json:"tenant"`
	Session  string `json:"session"`
	UpToSeq  uint64 `json:"up_to_seq"`
	Reason   string `json:"reason"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
	Parked   bool   `json:"parked"`
	Worker   string `json:"worker,omitempty"`
}

// CompactionServed is the data of TypeCompactionServed.
type CompactionServed struct {
	Tenant       string `json:"tenant"`
	Session      string `json:"session"`
	Outcome      string `json:"outcome"`
	KeptMessages int    `json:"kept_messages"`
	TokensBefore int64  `json:"tokens_before"`
	TokensAfter  int64  `json:"tokens_after"`
	WaitedMS     int64  `json:"waited_ms"`
	DurationUS   int64  `json:"duration_us"`
}

// MemoryRecord is the value stored in BucketMemory under MemoryKey: the
// session's notes and how far they reach. Every write is a compare-and-set on
// the revision the writer read.
type MemoryRecord struct {
	// Notes is the markdown memory document.
	Notes string `json:"notes"`
	// LastSummarizedID and LastSummarizedSeq name the newest transcript
	// record the notes cover at a safe point (never inside a tool_use whose
	// results are missing). Compaction keeps what follows it.
	LastSummarizedID  string `json:"last_summarized_id,omitempty"`
	LastSummarizedSeq uint64 `json:"last_summarized_seq,omitempty"`
	// CoveredSeq is the highest transcript sequence the extraction saw; it
	// never moves backwards. Requests with up_to_seq <= CoveredSeq are done.
	CoveredSeq uint64 `json:"covered_seq"`
	// ContextSeq is where the next extraction starts reading the session
	// (0: its first record): a turn boundary before the messages the last
	// extraction's conversation kept under its token cap. Older records
	// would only be dropped again, so a long session is not read whole on
	// every extraction.
	ContextSeq uint64 `json:"context_seq,omitempty"`
	// ContextTokens is the conversation cap ContextSeq was chosen under.
	// An extractor with a larger cap reads the session from its first
	// record again, so raising the cap widens the window (0: unknown, the
	// window is kept).
	ContextTokens int64 `json:"context_tokens,omitempty"`
	// Usage accumulates the LLM tokens spent on this session's memory.
	Usage       TokenUsage `json:"usage"`
	Extractions int        `json:"extractions"`
	UpdatedAt   time.Time  `json:"updated_at"`
	Provider    string     `json:"provider,omitempty"`
	Model       string     `json:"model,omitempty"`
	// Trail is the exact record of the files, commands and errors of the
	// covered part of the session, from its tool calls (nil before the
	// first extraction that folded one).
	Trail *Trail `json:"trail,omitempty"`
}

// DefaultStaleThreshold is the default age after which a running
// extraction counts as gone: the TTL of its StatusRecord (the extractor
// renews it while alive) and the age past which a compaction stops waiting
// for it. Both services read it from one setting, RECALL_STALE_THRESHOLD.
const DefaultStaleThreshold = 60 * time.Second

// StatusRecord is the value stored in BucketStatus while an extraction of the
// session runs. The key's TTL is the stale threshold; the extractor renews it
// while alive and deletes it on every exit path.
type StatusRecord struct {
	Running bool      `json:"running"`
	Since   time.Time `json:"since"`
	Worker  string    `json:"worker"`
	UpToSeq uint64    `json:"up_to_seq"`
}

// TenantConfig is a tenant's live configuration in BucketConfig. Zero values
// mean "use the service default"; pointers distinguish false from unset.
type TenantConfig struct {
	SessionMemory *bool `json:"session_memory,omitempty"` // gate: extraction on/off
	SMCompact     *bool `json:"sm_compact,omitempty"`     // gate: compaction from memory on/off

	MinimumMessageTokensToInit int64 `json:"minimum_message_tokens_to_init,omitempty"`
	MinimumTokensBetweenUpdate int64 `json:"minimum_tokens_between_update,omitempty"`
	ToolCallsBetweenUpdates    int   `json:"tool_calls_between_updates,omitempty"`

	// SessionIndex gates the session index (default on); MinNewUserMessages
	// is how many user requests after the last indexing make a turn end
	// index the session again (0: the default, 5).
	SessionIndex       *bool `json:"session_index,omitempty"`
	MinNewUserMessages int   `json:"min_new_user_messages,omitempty"`

	// QueryMaxBudgetTokens caps the session tokens one question or
	// resolve request of the tenant sends to the model (0: the indexer's
	// RECALL_QUERY_MAX_BUDGET_TOKENS, 50,000).
	QueryMaxBudgetTokens int64 `json:"query_max_budget_tokens,omitempty"`

	// MemoryPolicy is the default policy of sessions that carry none
	// (nil: self on, peer off, every type); CustomMemoryTypes add to the
	// long-term memory type registry.
	MemoryPolicy      *MemoryPolicy      `json:"memory_policy,omitempty"`
	CustomMemoryTypes []CustomMemoryType `json:"custom_memory_types,omitempty"`

	// Template and Prompt replace the default memory template and extraction
	// prompt ({{currentNotes}} and {{notesPath}} are substituted).
	Template string `json:"template,omitempty"`
	Prompt   string `json:"prompt,omitempty"`

	// ContextManagement is the tenant's default context editing, for
	// compactions that do not carry their own and for edit requests (nil:
	// compactions edit nothing; edit requests use clear_tool_uses with the
	// API's defaults).
	ContextManagement *ContextManagement `json:"context_management,omitempty"`

	// Retention bounds how long the tenant's sessions and notifications
	// are kept (nil: the stream-wide limits); see Retention.
	Retention *Retention `json:"retention,omitempty"`

	// Gateway configures the model gateway's compaction (nil: transparent
	// compaction off, client compaction on with the default rules).
	Gateway *GatewayConfig `json:"gateway,omitempty"`
}

// DecodeTenantConfig parses a RECALL_CONFIG value strictly.
func DecodeTenantConfig(b []byte) (TenantConfig, error) {
	var c TenantConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return TenantConfig{}, fmt.Errorf("decoding tenant config: %w", err)
	}
	if c.MinimumMessageTokensToInit < 0 || c.MinimumTokensBetweenUpdate < 0 || c.ToolCallsBetweenUpdates < 0 || c.MinNewUserMessages < 0 {
		return TenantConfig{}, errors.New("decoding tenant config: thresholds must not be negative")
	}
	if _, _, err := c.Retention.Durations(); err != nil {
		return TenantConfig{}, fmt.Errorf("decoding tenant config: %w", err)
	}
	if c.ContextManagement != nil {
		if err := c.ContextManagement.Validate(); err != nil {
			return TenantConfig{}, fmt.Errorf("decoding tenant config: %w", err)
		}
	}
	return c, nil
}
