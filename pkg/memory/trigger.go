package memory

import (
	"time"
	"unsafe"

	"github.com/recallhq/recall/pkg/events"
)

// Reference defaults of the extraction trigger.
const (
	DefaultMinimumMessageTokensToInit = 10000
	DefaultMinimumTokensBetweenUpdate = 5000
	DefaultToolCallsBetweenUpdates    = 3
	// DefaultQuietPeriod is how long a response may stay silent before it is
	// considered complete when no record said so.
	DefaultQuietPeriod = 5 * time.Second
)

// Thresholds configure the trigger's decision. The zero value of a number
// is not "use the default": callers resolve defaults first (see
// DefaultThresholds and Thresholds.Override).
type Thresholds struct {
	// MinimumMessageTokensToInit is the context size at which the session's
	// memory is first extracted (sticky once reached).
	MinimumMessageTokensToInit int64
	// MinimumTokensBetweenUpdate is the context growth required since the
	// last extraction; it is always required.
	MinimumTokensBetweenUpdate int64
	// ToolCallsBetweenUpdates is the number of tool_use blocks since the last
	// extraction point that allows an extraction inside a tool loop.
	ToolCallsBetweenUpdates int
	// QuietPeriod completes a response that no record said was complete:
	// in a session that has never sent a stop_reason, a response without
	// tool_use is complete once QuietPeriod passes after its last record
	// with no record following. A record of the same response arriving later
	// is counted but does not make a second evaluation. Sessions that send
	// stop_reason, and responses with tool_use (a tool_result always follows),
	// never complete by time. Zero disables the rule.
	QuietPeriod time.Duration
	// ReferenceCompat reproduces the reference's behaviour where Recall
	// deliberately differs: a compaction does not reset the growth baseline
	// (so updates stall after it), and only the response's last record is
	// looked at for tool calls (natural break). For tests and comparisons.
	ReferenceCompat bool
}

// DefaultThresholds returns the reference's numbers.
func DefaultThresholds() Thresholds {
	return Thresholds{
		MinimumMessageTokensToInit: DefaultMinimumMessageTokensToInit,
		MinimumTokensBetweenUpdate: DefaultMinimumTokensBetweenUpdate,
		ToolCallsBetweenUpdates:    DefaultToolCallsBetweenUpdates,
		QuietPeriod:                DefaultQuietPeriod,
	}
}

// Override returns t with the non-zero thresholds of a tenant configuration
// applied.
func (t Thresholds) Override(c events.TenantConfig) Thresholds {
	if c.MinimumMessageTokensToInit > 0 {
		t.MinimumMessageTokensToInit = c.MinimumMessageTokensToInit
	}
	if c.MinimumTokensBetweenUpdate > 0 {
		t.MinimumTokensBetweenUpdate = c.MinimumTokensBetweenUpdate
	}
	if c.ToolCallsBetweenUpdates > 0 {
		t.ToolCallsBetweenUpdates = c.ToolCallsBetweenUpdates
	}
	return t
}

// RecordKind says what a TriggerRecord is.
type RecordKind uint8

// Kinds of transcript records the trigger distinguishes.
const (
	RecOther      RecordKind = iota // unknown type: only its sequence counts
	RecMessage                      // a transcript message
	RecCompacting                   // the platform started compacting
	RecCompacted                    // the platform's context was replaced
	RecEnded                        // the session ended
)

// TriggerRecord is a transcript record reduced to what the trigger reads.
// Build it with MessageRecord (or by an equivalent decoder that yields the
// same values).
type TriggerRecord struct {
	// Seq is the record's transcript stream sequence (> 0).
	Seq uint64
	// Time is when the stream stored the record (Unix nanoseconds; 0 when
	// unknown, which disables the quiet-period rule for the record).
	Time int64
	Kind RecordKind

	// Message fields (RecMessage).
	Main       bool   // query_source main (or empty)
	Assistant  bool   // role assistant
	UUID       string // record uuid
	MessageID  string // API response id; records sharing it are one response
	StopReason bool   // the record says the response is complete
	HasUsage   bool
	UsageTotal int64 // input + cache creation + cache read + output
	ToolUses   int   // tool_use blocks
	Estimate   int64 // EstimateMessage

	// PostTokens is the context size after a compaction (RecCompacted).
	PostTokens int64
}

// MessageRecord reduces a message stored at seq (stream time t, Unix
// nanoseconds) to a TriggerRecord.
func MessageRecord(seq uint64, t int64, m *events.Message) TriggerRecord {
	r := TriggerRecord{
		Seq:        seq,
		Time:       t,
		Kind:       RecMessage,
		Main:       m.IsMain(),
		Assistant:  m.Role == events.RoleAssistant,
		UUID:       m.UUID,
		MessageID:  m.MessageID,
		StopReason: m.StopReason != "",
		ToolUses:   m.Content.ToolUses(),
		Estimate:   EstimateMessage(m),
	}
	if RealUsage(m) {
		r.HasUsage, r.UsageTotal = true, m.Usage.Total()
	}
	return r
}

// TriggerDecision is an extraction the trigger asks for: cover the
// transcript up to and including UpToSeq (the uuid of that record is UpToID).
type TriggerDecision struct {
	UpToSeq  uint64
	UpToID   string
	Counters events.ExtractionCounters
}

// TriggerState is one session's trigger state. Feed it the session's
// records in stream order with Observe; it decides once per complete
// assistant response of the main thread, exactly as the reference's
// post-sampling hook would with the messages up to and including that
// response. Its decisions are a pure function of the records and the
// thresholds, so the state can be rebuilt from the transcript at any time.
//
// The zero value is a session with no records. A TriggerState is not safe
// for concurrent use.
type TriggerState struct {
	lastSeq uint64

	// Token count (tokenCountWithEstimation), maintained incrementally:
	// count = anchorTokens + (est - anchorEst) when hasAnchor, else est.
	est          int64  // estimates of every main message so far
	anchorTokens int64  // latest real usage (or post-compaction size)
	anchorEst    int64  // est through the first record of the anchor's response
	runStartEst  int64  // est through the first record of the current run
	runID        uint64 // hash of the message_id of the current assistant run

	baseline  int64 // tokensAtLastExtraction
	toolCalls int32 // tool_use blocks since the last extraction point

	// The pending (not yet complete) response.
	respID   uint64
	respSeq  uint64
	respTime int64
	respUUID string

	extractions    int32
	lastExtractSeq uint64

	hasAnchor   bool
	initialized bool
	compacting  bool
	ended       bool
	pending     bool
	respTools   bool // some record of the pending response has tool_use
	respLastTU  bool // its last record has tool_use (ReferenceCompat)
	speaksStop  bool // a main assistant record carried stop_reason (sticky)
}

// Observe applies rec and appends the decisions it causes to out: at most
// two (the previous response completed by rec's arrival, and rec itself when
// it is a complete response). Records with a sequence at or below the last
// one applied are ignored, so redeliveries never count twice.
func (s *TriggerState) Observe(rec TriggerRecord, th *Thresholds, out []TriggerDecision) []TriggerDecision {
	if rec.Seq != 0 && rec.Seq <= s.lastSeq {
		return out
	}
	if rec.Seq != 0 {
		s.lastSeq = rec.Seq
	}
	switch rec.Kind {
	case RecMessage:
		if !rec.Main {
			return out // subagent messages are stored, not counted
		}
		var id uint64
		if rec.Assistant && rec.MessageID != "" {
			id = hashID(rec.MessageID)
		}
		absorb := false
		if s.pending && !s.continues(&rec, id, th) {
			absorb = id != 0 && id == s.respID // completed by its quiet period
			out = s.decide(th, out)
		} else if !s.pending && id != 0 && id == s.respID {
			absorb = true // a late record of a response already evaluated
		}
		s.count(&rec, id)
		if !rec.Assistant {
			return out
		}
		s.speaksStop = s.speaksStop || rec.StopReason
		if absorb {
			return out // one response, one evaluation
		}
		if !s.pending {
			s.pending, s.respID, s.respTools = true, id, false
		}
		s.respTools = s.respTools || rec.ToolUses > 0
		s.respLastTU = rec.ToolUses > 0
		s.respSeq, s.respTime, s.respUUID = rec.Seq, rec.Time, rec.UUID
		if rec.StopReason || id == 0 {
			out = s.decide(th, out)
		}
	case RecCompacting:
		if s.pending {
			out = s.decide(th, out)
		}
		s.compacting = true
	case RecCompacted:
		if s.pending {
			out = s.decide(th, out)
		}
		s.compacting = false
		// The platform's context is now PostTokens plus what follows.
		s.hasAnchor, s.anchorTokens, s.anchorEst, s.runID = true, rec.PostTokens, s.est, 0
		if !th.ReferenceCompat {
			s.baseline = rec.PostTokens
		}
	case RecEnded:
		if s.pending {
			out = s.decide(th, out)
		}
		s.ended = true
	}
	return out
}

// count adds a main-thread record to the token count and the tool calls.
func (s *TriggerState) count(rec *TriggerRecord, id uint64) {
	s.est += rec.Estimate
	if id != 0 && id != s.runID {
		s.runID, s.runStartEst = id, s.est
	}
	if rec.Assistant && rec.HasUsage {
		s.hasAnchor, s.anchorTokens = true, rec.UsageTotal
		if id != 0 {
			s.anchorEst = s.runStartEst
		} else {
			s.anchorEst = s.est
		}
	}
	if rec.Assistant {
		s.toolCalls += int32(rec.ToolUses)
	}
}

// continues reports whether rec (main thread) extends the pending response:
// it is a record of the same response, and the response was not completed
// by its quiet period before rec arrived (QuietPeriod).
func (s *TriggerState) continues(rec *TriggerRecord, id uint64, th *Thresholds) bool {
	if id == 0 || id != s.respID {
		return false
	}
	gap := rec.Time != 0 && s.respTime != 0 && rec.Time-s.respTime > int64(th.QuietPeriod)
	return !(th.QuietPeriod > 0 && s.quietApplies() && gap)
}

// quietApplies reports whether the pending response may be completed by its
// quiet period: the session never sent a stop_reason and the response has
// no tool_use (see Thresholds.QuietPeriod).
func (s *TriggerState) quietApplies() bool { return s.pending && !s.speaksStop && !s.respTools }

// Pending reports a pending response that its quiet period may complete:
// the sequence and stream time of its last record. The service completes it
// with CompleteQuiet once no record of the session can follow within the
// quiet period. A pending response that only a record can complete (the
// session sends stop_reason, or the response has tool_use) is not reported.
func (s *TriggerState) Pending() (seq uint64, t int64, ok bool) {
	return s.respSeq, s.respTime, s.quietApplies()
}

// CompleteQuiet completes the pending response (if any) because its quiet
// period passed without a further record, and appends the decision, if any.
// Call it only when every record of the session stored within the quiet
// period after the pending record has been observed; then the outcome is the
// one Observe would reach when the next record arrives.
func (s *TriggerState) CompleteQuiet(th *Thresholds, out []TriggerDecision) []TriggerDecision {
	if !s.quietApplies() {
		return out
	}
	return s.decide(th, out)
}

// decide evaluates the reference's shouldExtractMemory for the pending
// response, which is now complete.
func (s *TriggerState) decide(th *Thresholds, out []TriggerDecision) []TriggerDecision {
	s.pending = false
	upTo, uuid := s.respSeq, s.respUUID
	s.respUUID = ""
	if s.compacting {
		return out // the platform's context is being replaced
	}
	tokens := s.Tokens()
	if !s.initialized {
		if tokens < th.MinimumMessageTokensToInit {
			return out
		}
		s.initialized = true
	}
	natural := !s.respTools
	if th.ReferenceCompat {
		natural = !s.respLastTU
	}
	hasTokens := tokens-s.baseline >= th.MinimumTokensBetweenUpdate
	hasTools := int(s.toolCalls) >= th.ToolCallsBetweenUpdates
	if !hasTokens || !(hasTools || natural) {
		return out
	}
	out = append(out, TriggerDecision{
		UpToSeq: upTo,
		UpToID:  uuid,
		Counters: events.ExtractionCounters{
			Tokens:              tokens,
			TokensAtLastExtract: s.baseline,
			ToolCallsSince:      int(s.toolCalls),
			NaturalBreak:        natural,
		},
	})
	s.baseline, s.toolCalls = tokens, 0
	s.extractions++
	s.lastExtractSeq = upTo
	return out
}

// Tokens is the session's current context size as the reference's
// tokenCountWithEstimation computes it over the main-thread messages seen so
// far (after a compaction: its post_tokens plus estimates of what followed).
func (s *TriggerState) Tokens() int64 {
	if s.hasAnchor {
		return s.anchorTokens + s.est - s.anchorEst
	}
	return s.est
}

// LastSeq is the sequence of the last record applied.
func (s *TriggerState) LastSeq() uint64 { return s.lastSeq }

// Initialized reports whether the init threshold was reached (sticky).
func (s *TriggerState) Initialized() bool { return s.initialized }

// Compacting reports whether a compaction is in progress.
func (s *TriggerState) Compacting() bool { return s.compacting }

// Ended reports whether the session ended.
func (s *TriggerState) Ended() bool { return s.ended }

// Baseline is the token count at the last extraction (or compaction).
func (s *TriggerState) Baseline() int64 { return s.baseline }

// ToolCallsSince is the number of tool_use blocks since the last
// extraction point.
func (s *TriggerState) ToolCallsSince() int { return int(s.toolCalls) }

// Extractions is the number of decisions made so far; LastExtractSeq the
// up_to_seq of the last one.
func (s *TriggerState) Extractions() int       { return int(s.extractions) }
func (s *TriggerState) LastExtractSeq() uint64 { return s.lastExtractSeq }

// Size is the memory the state holds, in bytes.
func (s *TriggerState) Size() int { return int(unsafe.Sizeof(*s)) + len(s.respUUID) }

// hashID is FNV-1a 64 of a message id; 0 is reserved for "none".
func hashID(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	if h == 0 {
		h = 1
	}
	return h
}
