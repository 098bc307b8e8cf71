package eval

import (
	"context"
	"fmt"
	"strings"

	"github.com/recallhq/recall/internal/extraction"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// Truncate is the plain-truncation baseline: the most recent messages of
// the platform's current context (after its last compaction) that fit in
// budget tokens, with no summary. Leading tool results whose call was cut
// are dropped too, so the context stays valid for the API.
func Truncate(p *Prepared, budget int64) *Context {
	msgs := p.current()
	start, tokens := len(msgs), int64(0)
	for start > 0 {
		t := memory.EstimateMessage(&msgs[start-1])
		if tokens+t > budget {
			break
		}
		tokens += t
		start--
	}
	for start < len(msgs) && orphanResults(msgs[start:]) {
		tokens -= memory.EstimateMessage(&msgs[start])
		start++
	}
	return &Context{Outcome: "truncated", Served: true, Kept: msgs[start:], Tokens: tokens}
}

// orphanResults reports whether msgs[0] holds a tool_result whose tool_use
// is not in msgs.
func orphanResults(msgs []events.Message) bool {
	calls := map[string]bool{}
	for i := range msgs {
		for _, b := range msgs[i].Content {
			if b.Type == events.BlockToolUse {
				calls[b.ID] = true
			}
		}
	}
	for _, b := range msgs[0].Content {
		if b.Type == events.BlockToolResult && !calls[b.ToolUseID] {
			return true
		}
	}
	return false
}

// Reference-algorithm settings (the reference's numbers).
const (
	refMinTokens       = 10000
	refMinTextMessages = 5
	refMaxTokens       = 40000
	refSectionChars    = 8000
)

// referencePreface stands for the reference's summary preface.
const referencePreface = "This session is being continued from a previous conversation that ran out of context. The session notes below summarize the earlier part of the conversation.\n\n"

// Reference is the reference algorithm without Recall's fixes, as a pure
// function of the transcript: its trigger (ReferenceCompat: the growth
// baseline is not reset by a compaction, so updates stall after one; the
// natural break is read from the response's last record), extractions with
// provider over the platform's current context (messages after the last
// compaction) each time the trigger fires, lastSummarizedMessageId moved
// only at a natural break, and at the end the reference's session-memory
// compaction: kept messages start after lastSummarizedMessageId and grow
// backwards until 40,000 tokens or 10,000 tokens with 5 text messages (never
// below the last compaction, never splitting a tool call from its result),
// with no guarantee that the latest request is kept and no quoting of it.
// When the reference gives up (no notes, the summarized id is not in the
// current context, or the result is over the threshold) the context is
// empty and not served: the reference would then run a full LLM compaction,
// which is not modelled here.
func Reference(ctx context.Context, p *Prepared, provider llm.Provider, threshold int64) (*Context, error) {
	th := memory.DefaultThresholds()
	th.ReferenceCompat = true
	var st memory.TriggerState
	var decisions []memory.TriggerDecision
	index := map[uint64]int{} // seq → record index
	for i, r := range p.Transcript {
		seq := uint64(i + 1)
		index[seq] = i
		rec := memory.TriggerRecord{Seq: seq, Kind: memory.RecCompacted}
		if r.Message != nil {
			rec = memory.MessageRecord(seq, 0, r.Message)
		} else {
			rec.PostTokens = r.Compacted.PostTokens
		}
		decisions = st.Observe(rec, &th, decisions)
	}
	decisions = st.CompleteQuiet(&th, decisions)

	notes, lastSummarized := "", ""
	for _, d := range decisions {
		upTo := index[d.UpToSeq]
		msgs, _ := currentAt(p.Transcript, upTo)
		if len(msgs) == 0 {
			continue
		}
		in := extraction.Input{Tenant: "eval", Session: p.ID, Notes: notes, Template: memory.DefaultTemplate,
			Conversation: extraction.BuildConversation(msgs, -1, extraction.DefaultMaxConversationTokens)}
		if in.Notes == "" {
			in.Notes = memory.DefaultTemplate
		}
		out, err := extraction.Run(ctx, provider, in)
		if err != nil {
			return nil, fmt.Errorf("reference extraction of %s up to record %d: %w", p.ID, upTo, err)
		}
		notes = out.Notes
		if d.Counters.NaturalBreak {
			lastSummarized = d.UpToID
		}
	}
	return referenceCompact(p, notes, lastSummarized, threshold), nil
}

// currentAt returns the messages of the platform's context after the last
// compaction at or before record upTo, and the index of the first one.
func currentAt(recs []Record, upTo int) ([]events.Message, int) {
	floor := 0
	for i := 0; i <= upTo && i < len(recs); i++ {
		if recs[i].Compacted != nil {
			floor = i + 1
		}
	}
	var msgs []events.Message
	for i := floor; i <= upTo && i < len(recs); i++ {
		msgs = append(msgs, *recs[i].Message)
	}
	return msgs, floor
}

func referenceCompact(p *Prepared, notes, lastSummarized string, threshold int64) *Context {
	msgs := p.current()
	if strings.TrimSpace(notes) == "" {
		return &Context{Outcome: memory.OutcomeNoSessionMemory, Reason: "no extraction ran"}
	}
	if memory.IsEmptyTemplate(notes, memory.DefaultTemplate) {
		return &Context{Outcome: memory.OutcomeEmptyTemplate, Reason: "the notes are the empty template"}
	}
	start := len(msgs)
	if lastSummarized != "" {
		found := -1
		for i := range msgs {
			if msgs[i].UUID == lastSummarized {
				found = i
			}
		}
		if found < 0 {
			return &Context{Outcome: memory.OutcomeSummarizedIDNotFound, Reason: "lastSummarizedMessageId is not in the current context (it predates the last compaction)"}
		}
		start = found + 1
	}
	tokens, texts := int64(0), 0
	for i := start; i < len(msgs); i++ {
		tokens += memory.EstimateMessage(&msgs[i])
		if hasText(&msgs[i]) {
			texts++
		}
	}
	for start > 0 && tokens < refMaxTokens && !(tokens >= refMinTokens && texts >= refMinTextMessages) {
		start--
		tokens += memory.EstimateMessage(&msgs[start])
		if hasText(&msgs[start]) {
			texts++
		}
	}
	start = keepPairs(msgs, start)
	kept := msgs[start:]
	keptTokens := messagesTokens(kept)
	if keptTokens >= threshold {
		return &Context{Outcome: memory.OutcomeThresholdExceeded, Reason: fmt.Sprintf("kept messages hold %d tokens, over the threshold %d", keptTokens, threshold)}
	}
	trunc, _ := memory.TruncateForCompact(notes, refSectionChars)
	summary := referencePreface + trunc
	return &Context{Outcome: memory.OutcomeSessionMemory, Served: true, Summary: summary, Kept: kept,
		Tokens: memory.EstimateText(summary) + keptTokens}
}

func hasText(m *events.Message) bool {
	for _, b := range m.Content {
		if b.Type == events.BlockText && strings.TrimSpace(b.Text) != "" {
			return true
		}
	}
	return false
}

// keepPairs moves start back until no kept tool_result lacks its tool_use
// and no kept streamed record lacks its earlier siblings (same message id).
func keepPairs(msgs []events.Message, start int) int {
	for changed := true; changed && start > 0; {
		changed = false
		calls := map[string]bool{}
		ids := map[string]bool{}
		for i := start; i < len(msgs); i++ {
			for _, b := range msgs[i].Content {
				if b.Type == events.BlockToolUse {
					calls[b.ID] = true
				}
			}
		}
		for i := start; i < len(msgs); i++ {
			if msgs[i].MessageID != "" {
				ids[msgs[i].MessageID] = true
			}
			for _, b := range msgs[i].Content {
				if b.Type == events.BlockToolResult && !calls[b.ToolUseID] {
					changed = true
				}
			}
		}
		if start > 0 && msgs[start-1].MessageID != "" && ids[msgs[start-1].MessageID] {
			changed = true
		}
		if changed {
			start--
		}
	}
	return start
}
