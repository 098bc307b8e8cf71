package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"
)

// Compaction triggers.
const (
	TriggerAuto   = "auto"
	TriggerManual = "manual"
)

// CompactRequest asks for a compaction of one session (VerbCompact). Every
// field is optional; zero values take the compactor's defaults, which are the
// reference's: threshold from a 200K window (167,000 tokens), wait 15 s,
// stale 60 s, keep window 10,000 tokens and 5 text messages, at most 40,000.
type CompactRequest struct {
	// AutoCompactThreshold is the platform's auto-compact threshold in
	// tokens. When zero it is derived from ContextWindow and
	// MaxOutputTokens: window − min(max output, 20,000) − 13,000.
	AutoCompactThreshold int64 `json:"auto_compact_threshold,omitempty"`
	ContextWindow        int64 `json:"context_window,omitempty"`
	MaxOutputTokens      int64 `json:"max_output_tokens,omitempty"`
	// ContextTokens is the platform's own count of its current context;
	// when zero the compactor estimates it from the transcript.
	ContextTokens int64 `json:"context_tokens,omitempty"`
	// Trigger is "auto" (default) or "manual".
	Trigger string `json:"trigger,omitempty"`
	// WaitTimeoutMS bounds the wait for a running extraction of the
	// session; nil uses the default, 0 does not wait.
	WaitTimeoutMS *int64 `json:"wait_timeout_ms,omitempty"`
	// StaleMS: a running extraction that started longer ago than this is
	// ignored (0 = default).
	StaleMS int64 `json:"stale_ms,omitempty"`
	// Keep-window bounds (0 = default).
	MinTokens       int64 `json:"min_tokens,omitempty"`
	MinTextMessages int   `json:"min_text_messages,omitempty"`
	MaxTokens       int64 `json:"max_tokens,omitempty"`
	// ContextManagement clears old tool results and thinking from the kept
	// messages (see ContextEdit); nil uses the tenant's default (off unless
	// configured).
	ContextManagement *ContextManagement `json:"context_management,omitempty"`
	// Preview answers what a compaction would serve now without being one:
	// no wait for a running extraction, no LLM fallback, no
	// compaction.served notification (the operator console uses it).
	Preview bool `json:"preview,omitempty"`
}

// ErrInvalidCompactRequest is wrapped by DecodeCompactRequest errors.
var ErrInvalidCompactRequest = errors.New("invalid compact request")

// DecodeCompactRequest parses a request body strictly: unknown fields,
// negative numbers and unknown triggers are errors. An empty body is the
// zero request.
func DecodeCompactRequest(b []byte) (CompactRequest, error) {
	var r CompactRequest
	if len(bytes.TrimSpace(b)) == 0 {
		return r, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return CompactRequest{}, fmt.Errorf("%w: %v", ErrInvalidCompactRequest, err)
	}
	if dec.More() {
		return CompactRequest{}, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidCompactRequest)
	}
	switch {
	case r.AutoCompactThreshold < 0, r.ContextWindow < 0, r.MaxOutputTokens < 0, r.ContextTokens < 0,
		r.StaleMS < 0, r.MinTokens < 0, r.MinTextMessages < 0, r.MaxTokens < 0:
		return CompactRequest{}, fmt.Errorf("%w: numbers must not be negative", ErrInvalidCompactRequest)
	case r.WaitTimeoutMS != nil && *r.WaitTimeoutMS < 0:
		return CompactRequest{}, fmt.Errorf("%w: wait_timeout_ms must not be negative", ErrInvalidCompactRequest)
	case r.Trigger != "" && r.Trigger != TriggerAuto && r.Trigger != TriggerManual:
		return CompactRequest{}, fmt.Errorf("%w: trigger must be %q or %q, not %q", ErrInvalidCompactRequest, TriggerAuto, TriggerManual, r.Trigger)
	case r.ContextWindow > 0 && r.AutoCompactThreshold == 0 && r.ContextWindow <= min(r.MaxOutputTokens, 20000)+13000:
		return CompactRequest{}, fmt.Errorf("%w: context_window %d leaves no room below the auto-compact buffer", ErrInvalidCompactRequest, r.ContextWindow)
	}
	if r.ContextManagement != nil {
		if err := r.ContextManagement.Validate(); err != nil {
			return CompactRequest{}, fmt.Errorf("%w: %v", ErrInvalidCompactRequest, err)
		}
	}
	return r, nil
}

// CompactBoundary marks where the platform's context was replaced, in the
// reference's shape.
type CompactBoundary struct {
	Type      string `json:"type"`    // "system"
	Subtype   string `json:"subtype"` // "compact_boundary"
	Trigger   string `json:"trigger"`
	PreTokens int64  `json:"pre_tokens"`
	// PreservedSegment names the kept messages: they follow the summary
	// message (the anchor) from head to tail. Nil when nothing is kept.
	PreservedSegment *PreservedSegment `json:"preserved_segment,omitempty"`
}

// PreservedSegment identifies the kept messages of a compaction.
type PreservedSegment struct {
	HeadUUID   string `json:"head_uuid"`
	AnchorUUID string `json:"anchor_uuid"`
	TailUUID   string `json:"tail_uuid"`
}

// Boundary type and subtype values.
const (
	BoundaryType    = "system"
	BoundarySubtype = "compact_boundary"
)

// SummaryMessage is the user message that replaces the compacted part of
// the conversation.
type SummaryMessage struct {
	Message
	IsCompactSummary bool `json:"is_compact_summary"`
}

// ContextRepair is one change Recall made to a served context.
type ContextRepair struct {
	Rule string `json:"rule"`
	UUID string `json:"uuid,omitempty"`
}

// CompactReply answers a CompactRequest. Served outcomes (session_memory,
// resumed_session, full_compact) carry Boundary, Summary and Kept: the
// platform's new context is the boundary, the summary message, then the kept
// messages in order. Other outcomes carry Reason, so the caller can compact
// by itself.
type CompactReply struct {
	Outcome string `json:"outcome"`
	Served  bool   `json:"served"`
	Reason  string `json:"reason,omitempty"`
	// FallbackFrom is the session-memory outcome a full_compact replaced.
	FallbackFrom string `json:"fallback_from,omitempty"`

	Boundary *CompactBoundary `json:"boundary,omitempty"`
	Summary  *SummaryMessage  `json:"summary,omitempty"`
	// Kept are the kept transcript records as stored (structured-mode
	// CloudEvents), each with its stream sequence in the ExtSeq extension.
	Kept []event.Event `json:"kept,omitempty"`
	// KeptCount is len(Kept), also set when Kept is omitted.
	KeptCount int `json:"kept_count"`

	LastSummarizedID  string `json:"last_summarized_id,omitempty"`
	LastSummarizedSeq uint64 `json:"last_summarized_seq,omitempty"`
	// FirstKeptSeq and LastSeq bound the kept records; FloorSeq is the last
	// compaction boundary of the transcript (0 = none).
	FirstKeptSeq   uint64 `json:"first_kept_seq,omitempty"`
	LastSeq        uint64 `json:"last_seq,omitempty"`
	FloorSeq       uint64 `json:"floor_seq,omitempty"`
	MemoryRevision uint64 `json:"memory_revision,omitempty"`

	TokensBefore int64 `json:"tokens_before"`
	TokensAfter  int64 `json:"tokens_after"`
	Threshold    int64 `json:"threshold"`
	// Truncated reports that note sections were cut for the summary.
	Truncated bool `json:"truncated"`
	// AppliedEdits, ClearedToolUses and ClearedTokens report the context
	// editing of the kept messages (ContextManagement); the kept records
	// then carry the placeholders.
	AppliedEdits    []AppliedEdit `json:"applied_edits,omitempty"`
	ClearedToolUses int           `json:"cleared_tool_uses,omitempty"`
	ClearedTokens   int64         `json:"cleared_tokens,omitempty"`
	// Repaired lists what Recall changed in the kept records so the context
	// passes the model APIs' structural rules (see docs/compaction.md):
	// by rule, the uuid of the record concerned. Empty when nothing was.
	Repaired []ContextRepair `json:"repaired,omitempty"`
	// WaitedMS is how long the compactor waited for a running extraction.
	WaitedMS int64 `json:"waited_ms"`
	// DurationUS is the compactor's time to answer, waiting included.
	DurationUS int64 `json:"duration_us"`
}
