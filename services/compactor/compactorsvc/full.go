package compactorsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// fullCompactSystem instructs the model for a full compaction.
const fullCompactSystem = `You write the summary that replaces the earlier part of a conversation between a user and an AI coding agent, so the agent can continue the work with a fresh context.

Write a dense, factual summary in markdown with these parts: the user's requests and intent (quote corrections and explicit instructions exactly); the current state of the work and the immediate next step; files and functions touched and why; commands run and what their output meant; errors met and how they were fixed; decisions made and approaches that failed. Keep exact names, paths, numbers and error messages. Do not invent anything that is not in the transcript. Reply with the summary only.`

// fallback tries a full compaction with the LLM when the session-memory
// path could not serve, full compaction is enabled and the session's
// breaker is closed. It returns the reply to send: full_compact on success,
// otherwise the original reply with the reason extended.
func (c *Compactor) fallback(ctx context.Context, tenant, session string, s settings, reply *events.CompactReply) *events.CompactReply {
	if c.provider == nil {
		return reply
	}
	key := events.MemoryKey(tenant, session)
	if c.breaker.open(key) {
		reply.Reason += fmt.Sprintf("; full compaction is not tried: it failed %d times in a row for this session", c.cfg.BreakerFailures)
		return reply
	}
	ctx, span := tracer.Start(ctx, "full_compact")
	defer span.End()
	full, err := c.fullCompact(ctx, tenant, session, s, reply)
	if err != nil {
		c.breaker.fail(key)
		c.log.WarnContext(ctx, "full compaction failed", "tenant", tenant, "session", session, "err", err)
		reply.Reason += "; full compaction failed: " + err.Error()
		return reply
	}
	c.breaker.succeed(key)
	return full
}

// fullCompact summarizes the conversation after the last compaction
// boundary, up to the latest user request, with the LLM; the latest request
// and what follows it are kept verbatim (quoted in the summary instead when
// they exceed the keep window's maximum).
func (c *Compactor) fullCompact(ctx context.Context, tenant, session string, s settings, prev *events.CompactReply) (*events.CompactReply, error) {
	h, err := c.readEnd(ctx, tenant, session)
	if err != nil {
		return nil, err
	}
	// Read back to the last boundary, or as far as allowed.
	for !h.complete && !hasBoundary(h.recs) {
		if err := h.earlierRecords(ctx); err != nil {
			return nil, err
		}
	}
	es := h.entries()
	w := memory.SelectWindow(memory.WindowInput{Entries: es, Start: len(es), Complete: true}, memory.WindowConfig{MinTokens: 1, MinTextMessages: 1, MaxTokens: 1})
	// The window above keeps the latest request and what follows it (plus
	// any tool_use or sibling they need).
	var quoted *events.Message
	if w.LatestRequest >= 0 && w.Tokens > s.window.MaxTokens {
		quoted = es[w.LatestRequest].Message
		w.Kept, w.Start, w.Tokens = nil, len(es), 0
	}
	var b strings.Builder
	for i := w.Floor + 1; i < w.Start; i++ {
		if m := es[i].Message; m != nil && m.IsMain() {
			renderMessage(&b, m)
		}
	}
	conv := b.String()
	if conv == "" {
		return nil, fmt.Errorf("nothing to summarize before the latest request")
	}
	if cut := len(conv) - c.cfg.FullCompactMaxChars; cut > 0 {
		for cut < len(conv) && !utf8.RuneStart(conv[cut]) {
			cut++
		}
		conv = "[… earlier part omitted …]\n" + conv[cut:]
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.FullCompactTimeout)
	defer cancel()
	resp, err := c.provider.Complete(cctx, llm.Request{
		System:     fullCompactSystem,
		Messages:   []events.Message{{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "Summarize this conversation transcript:\n\n<transcript>\n" + conv + "</transcript>"}}}},
		MaxTokens:  8192,
		CacheAfter: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", c.provider.Name(), err)
	}
	if strings.TrimSpace(resp.Text) == "" {
		return nil, fmt.Errorf("%s returned no summary text", c.provider.Name())
	}
	summary := memory.FullCompactText(resp.Text, "transcript "+events.TranscriptSubject(tenant, session), quoted)
	reply := &events.CompactReply{
		Outcome:           memory.OutcomeFullCompact,
		Served:            true,
		FallbackFrom:      prev.Outcome,
		Reason:            prev.Reason,
		LastSummarizedID:  prev.LastSummarizedID,
		LastSummarizedSeq: prev.LastSummarizedSeq,
		MemoryRevision:    prev.MemoryRevision,
		Threshold:         s.threshold,
		WaitedMS:          prev.WaitedMS,
		TokensBefore:      s.context,
	}
	if reply.TokensBefore <= 0 {
		reply.TokensBefore = memory.ContextEstimate(es, w.Floor)
	}
	reply.TokensAfter = memory.EstimateText(summary) + w.Tokens
	if len(h.recs) > 0 {
		reply.LastSeq = h.recs[len(h.recs)-1].Seq
		if w.Floor >= 0 {
			reply.FloorSeq = h.recs[w.Floor].Seq
		}
	}
	kept := make([]transcript.Record, 0, len(w.Kept))
	for _, i := range w.Kept {
		kept = append(kept, h.recs[i])
	}
	fillServed(reply, s.trigger, uuid.NewString(), summary, kept)
	return reply, nil
}

func hasBoundary(recs []transcript.Record) bool {
	for i := range recs {
		if recs[i].Compacted != nil {
			return true
		}
	}
	return false
}

// renderMessage writes m as plain transcript text for the summarizer; tool
// results are cut to 2,000 characters.
func renderMessage(b *strings.Builder, m *events.Message) {
	for _, bl := range m.Content {
		switch bl.Type {
		case events.BlockText:
			fmt.Fprintf(b, "[%s] %s\n", m.Role, bl.Text)
		case events.BlockToolUse:
			in, _ := json.Marshal(bl.Input)
			fmt.Fprintf(b, "[%s called %s] %s\n", m.Role, bl.Name, in)
		case events.BlockToolResult:
			var t strings.Builder
			for _, c := range bl.Content {
				if c.Type == events.BlockText {
					t.WriteString(c.Text)
				}
			}
			out := t.String()
			if len(out) > 2000 {
				out = out[:2000] + " [… cut …]"
			}
			label := "tool result"
			if bl.IsError {
				label = "tool error"
			}
			fmt.Fprintf(b, "[%s] %s\n", label, out)
		}
	}
}

// breaker counts consecutive full-compaction failures per session.
type breaker struct {
	mu    sync.Mutex
	limit int
	fails map[string]int
}

func newBreaker(limit int) *breaker { return &breaker{limit: limit, fails: map[string]int{}} }

func (b *breaker) open(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fails[key] >= b.limit
}

func (b *breaker) fail(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.fails) >= 100000 {
		clear(b.fails) // bound memory; forgetting only re-allows attempts
	}
	b.fails[key]++
}

func (b *breaker) succeed(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.fails, key)
}
