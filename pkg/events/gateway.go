package events

import "strings"

// GatewayConfig is a tenant's configuration of the model gateway
// (services/gateway): when it compacts what it forwards, and how it
// recognizes a client's own summarization turn.
type GatewayConfig struct {
	// CompactAboveTokens turns on transparent compaction: a request whose
	// context holds more input tokens than this is forwarded as Recall's
	// summary plus the kept window (0 = off).
	CompactAboveTokens int64 `json:"compact_above_tokens,omitempty"`
	// ClientCompaction says how a client's own summarization turn is
	// recognized and answered from memory (nil: on, with the default rules).
	ClientCompaction *ClientCompaction `json:"client_compaction,omitempty"`
}

// ClientCompaction configures answering a client's own compaction (its
// summarization turn) from Recall's memory.
type ClientCompaction struct {
	// Enabled gates it (nil: on).
	Enabled *bool `json:"enabled,omitempty"`
	// Rules recognize a summarization turn, first match wins (nil or
	// empty: DefaultClientCompactionRules).
	Rules []ClientCompactionRule `json:"rules,omitempty"`
}

// Answer formats of a ClientCompactionRule.
const (
	// AnswerSummaryTags answers <summary>…</summary> (Claude Code parses it).
	AnswerSummaryTags = "summary_tags"
	// AnswerPlain answers the summary as plain text (Codex takes the
	// answer's text as its handoff summary).
	AnswerPlain = "plain"
)

// ClientCompactionRule recognizes one client's summarization turn: the
// text of the request's last user message contains every string of
// Contains (case-insensitive).
type ClientCompactionRule struct {
	// Name names the client (e.g. "claude-code"), for logs and metrics.
	Name string `json:"name"`
	// Contains are the phrases the summarization turn holds, all of them.
	Contains []string `json:"contains"`
	// Answer is the answer's format: AnswerSummaryTags or AnswerPlain
	// (default AnswerPlain).
	Answer string `json:"answer,omitempty"`
}

// DefaultClientCompactionRules recognize the summarization turns of Claude
// Code (2.1.x: "Your task is to create a detailed summary of the
// conversation so far", answered inside <summary> tags) and Codex (its
// compact prompt "You are performing a CONTEXT CHECKPOINT COMPACTION").
func DefaultClientCompactionRules() []ClientCompactionRule {
	return []ClientCompactionRule{
		{Name: "claude-code", Contains: []string{"create a detailed summary of the conversation", "<summary>"}, Answer: AnswerSummaryTags},
		{Name: "codex", Contains: []string{"CONTEXT CHECKPOINT COMPACTION"}, Answer: AnswerPlain},
	}
}

// EffectiveRules are the rules in force: c's, or the defaults; none when
// client compaction is turned off.
func (c *ClientCompaction) EffectiveRules() []ClientCompactionRule {
	if c != nil && c.Enabled != nil && !*c.Enabled {
		return nil
	}
	if c == nil || len(c.Rules) == 0 {
		return DefaultClientCompactionRules()
	}
	return c.Rules
}

// Match reports whether text holds every phrase of the rule
// (case-insensitive). A rule without phrases matches nothing.
func (r ClientCompactionRule) Match(text string) bool {
	if len(r.Contains) == 0 {
		return false
	}
	lower := strings.ToLower(text)
	for _, p := range r.Contains {
		if strings.TrimSpace(p) == "" || !strings.Contains(lower, strings.ToLower(p)) {
			return false
		}
	}
	return true
}
