package compactorsvc

import (
	"context"
	"encoding/json"
	"errors"
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

// fallback tries a full compaction when the session-memory path could not
// serve, full compaction is enabled and the session's breaker is closed. It
// returns the reply to send: full_compact when the compaction is below both
// the threshold and the current context, otherwise the original reply with
// the reason extended. A refusal (nothing faithful fits) does not count as
// a failure of the breaker.
func (c *Compactor) fallback(ctx context.Context, tenant, session string, s settings, reply *events.CompactReply, keptMsgs *[]*events.Message) *events.CompactReply {
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
	full, msgs, err := c.fullCompact(ctx, tenant, session, s, reply)
	var no refusal
	switch {
	case errors.As(err, &no):
		reply.Reason += "; a full compaction is not served: " + no.reason
		return reply
	case err != nil:
		c.breaker.fail(key)
		c.log.WarnContext(ctx, "full compaction failed", "tenant", tenant, "session", session, "err", err)
		reply.Reason += "; full compaction failed: " + err.Error()
		return reply
	}
	c.breaker.succeed(key)
	switch {
	case full.TokensBefore > 0 && full.TokensAfter >= full.TokensBefore:
		// A summary as long as the context it replaces helps no one: the
		// platform keeps its context.
		reply.Reason += fmt.Sprintf("; a full compaction would not reduce it either (%d tokens, no fewer than %d)", full.TokensAfter, full.TokensBefore)
		return reply
	case full.TokensAfter >= s.threshold:
		reply.Reason += fmt.Sprintf("; a full compaction would still hold %d tokens, at or over the auto-compact threshold of %d", full.TokensAfter, s.threshold)
		return reply
	}
	*keptMsgs = msgs
	return full
}

// refusal is a full compaction that is not served because nothing faithful
// fits: not a failure of the provider.
type refusal struct{ reason string }

func (r refusal) Error() string { return r.reason }

// fullInput is what a full compaction summarizes and keeps.
type fullInput struct {
	notes   string        // "" when there are none (or only the empty template)
	trail   *events.Trail // the memory's trail with the summarized records folded in
	h       *history
	es      []memory.WindowEntry
	from    int // the first record to summarize
	w       memory.Window
	quoted  []*events.Message
	ref     string
	context int64 // tokens before
}

// fullCompact summarizes the platform's current context: the session notes
// (the summary the context already holds), the records the last compaction
// kept and every record the notes do not cover, and what followed the last
// boundary, up to the latest user request. The latest request and what
// follows it are kept verbatim (quoted in the summary instead when they
// exceed the keep window's maximum). The served summary always holds the
// notes (section-truncated); the offline provider's summary is built
// structurally (structuralSummary), a model's follows them.
func (c *Compactor) fullCompact(ctx context.Context, tenant, session string, s settings, prev *events.CompactReply) (*events.CompactReply, []*events.Message, error) {
	in, err := c.fullInput(ctx, tenant, session, s, prev)
	if err != nil {
		return nil, nil, err
	}
	var summary string
	if c.provider.Name() == llm.KindOffline {
		summary, err = structuralSummary(in, s.threshold)
	} else {
		summary, err = c.modelSummary(ctx, in)
	}
	if err != nil {
		return nil, nil, err
	}
	summary = memory.WithTrail(summary, in.trail)
	reply, msgs := c.fullReply(s, prev, in, memory.FullCompactText(summary, in.ref, in.quoted))
	return reply, msgs, nil
}

// fullInput reads what a full compaction summarizes and keeps.
func (c *Compactor) fullInput(ctx context.Context, tenant, session string, s settings, prev *events.CompactReply) (fullInput, error) {
	notes, trail, err := c.currentNotes(ctx, tenant, session)
	if err != nil {
		return fullInput{}, err
	}
	h, err := c.readEnd(ctx, tenant, session)
	if err != nil {
		return fullInput{}, err
	}
	from, err := h.contextStart(ctx, prev.LastSummarizedID)
	if err != nil {
		return fullInput{}, err
	}
	es := h.entries()
	w := keepFromRequest(es, s.window.MaxTokens)
	// The notes may cover the latest request and what follows it (a short
	// session, or one summarized to its end): those records are kept
	// verbatim anyway, and only the notes are summarized.
	in := fullInput{notes: notes, h: h, es: es, from: min(from, w.Start), w: w, context: s.context,
		ref: c.transcriptRef(tenant, session)}
	if in.context <= 0 {
		in.context = memory.ContextEstimate(es, w.Floor)
	}
	for _, i := range w.Quoted {
		in.quoted = append(in.quoted, es[i].Message)
	}
	in.trail = foldEntries(trail, es[in.from:])
	return in, nil
}

// structuralSummary is the summary of a full compaction without a model:
// the notes and the records they do not cover condensed
// (memory.CondenseRecords), sized so that the compaction ends below the
// threshold and below the current context. It refuses when nothing
// faithful fits.
func structuralSummary(in fullInput, threshold int64) (string, error) {
	limit := threshold
	if in.context > 0 {
		limit = min(limit, in.context)
	}
	room := limit - 1 - in.w.Tokens // padded tokens left for the summary message
	budget := (room-1)*3/4 - memory.EstimateText(memory.FullCompactText(memory.RenderTrail(in.trail), in.ref, in.quoted)) - 6
	if budget <= 0 {
		return "", refusal{fmt.Sprintf("the messages kept from the latest request on hold about %d tokens, which leaves no room for a summary below %d", in.w.Tokens, limit)}
	}
	msgs := make([]*events.Message, 0, in.w.Start-in.from)
	for i := in.from; i < in.w.Start; i++ {
		msgs = append(msgs, in.es[i].Message)
	}
	summary, ok := memory.CondenseRecords(in.notes, msgs, budget)
	if !ok && in.notes == "" {
		return "", refusal{fmt.Sprintf("there are no notes, and nothing before the latest request condenses into the %d tokens left for a summary below %d", budget, limit)}
	}
	if !ok {
		return "", refusal{fmt.Sprintf("the notes alone (about %d tokens) do not fit in the %d tokens left for a summary below %d", memory.EstimateText(in.notes), budget, limit)}
	}
	return summary, nil
}

// modelSummary asks the provider to summarize the notes and the records
// they do not cover; the served summary is the notes (section-truncated)
// followed by the model's text, so a reply never drops the notes.
func (c *Compactor) modelSummary(ctx context.Context, in fullInput) (string, error) {
	conv := renderConversation(in.es[in.from:in.w.Start], in.notes, c.cfg.FullCompactMaxChars)
	if conv == "" {
		return "", fmt.Errorf("nothing to summarize before the latest request")
	}
	ask := "Summarize this conversation transcript:\n\n"
	if in.notes != "" {
		ask = "Summarize this conversation transcript. The earlier summary is kept word for word beside yours: do not repeat it, summarize what the transcript adds to it.\n\n"
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.FullCompactTimeout)
	defer cancel()
	resp, err := c.provider.Complete(cctx, llm.Request{
		System:     fullCompactSystem,
		Messages:   []events.Message{{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: ask + conv}}}},
		MaxTokens:  8192,
		CacheAfter: -1,
	})
	if err != nil {
		return "", fmt.Errorf("calling %s: %w", c.provider.Name(), err)
	}
	text := strings.TrimSpace(resp.Text)
	if text == "" {
		return "", fmt.Errorf("%s returned no summary text", c.provider.Name())
	}
	if in.notes == "" {
		return text, nil
	}
	notes, _ := memory.TruncateForCompact(in.notes, c.cfg.SectionMaxChars)
	return strings.TrimSpace(notes) + "\n\nSince these notes were last updated (summarized by " + c.provider.Model() + "):\n\n" + text, nil
}

// fullReply builds the served reply of a full compaction and returns it
// with the kept records' messages.
func (c *Compactor) fullReply(s settings, prev *events.CompactReply, in fullInput, summary string) (*events.CompactReply, []*events.Message) {
	h, w := in.h, in.w
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
		TokensBefore:      in.context,
	}
	reply.TokensAfter = memory.Padded(memory.EstimateText(summary)) + w.Tokens
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
	msgs := fillServed(reply, s.trigger, uuid.NewString(), summary, kept)
	return reply, msgs
}

// currentNotes returns the session's notes when they hold more than the
// empty template ("" otherwise), and its trail (nil when none).
func (c *Compactor) currentNotes(ctx context.Context, tenant, session string) (string, *events.Trail, error) {
	rec, _, err := c.readMemory(ctx, tenant, session)
	if err != nil || rec == nil {
		return "", nil, err
	}
	if memory.IsEmptyTemplate(rec.Notes, orDefault(c.tenants.Get(tenant).Template)) {
		return "", rec.Trail, nil
	}
	return rec.Notes, rec.Trail, nil
}

// foldEntries folds the messages of es into trail (memory.FoldTrail by
// their sequences; records the trail covers are skipped).
func foldEntries(trail *events.Trail, es []memory.WindowEntry) *events.Trail {
	msgs := make([]*events.Message, 0, len(es))
	seqs := make([]uint64, 0, len(es))
	for _, e := range es {
		if e.Message != nil {
			msgs, seqs = append(msgs, e.Message), append(seqs, e.Seq)
		}
	}
	return memory.FoldTrail(trail, msgs, seqs)
}

// contextStart reads back until the history holds the platform's current
// context and returns the index where the conversation to summarize starts:
// after the last boundary, or earlier at the head of the segment that
// boundary preserved, or after the last summarized record (summarized is its
// uuid; "" when there are no notes) when the notes stop before that. With no
// boundary, the notes cover everything up to summarized.
func (h *history) contextStart(ctx context.Context, summarized string) (int, error) {
	for !h.complete && !hasBoundary(h.recs) {
		if err := h.earlierRecords(ctx); err != nil {
			return 0, err
		}
	}
	var head string
	if floor := h.boundaryIndex(); floor >= 0 {
		head = h.recs[floor].Compacted.FirstKeptUUID
	}
	for _, id := range []string{head, summarized} {
		for id != "" && h.index(id) < 0 && !h.complete {
			if err := h.earlierRecords(ctx); err != nil {
				return 0, err
			}
		}
	}
	floor := h.boundaryIndex()
	from := floor + 1
	if i := h.index(head); head != "" && i >= 0 {
		from = min(from, i)
	}
	if i := h.index(summarized); summarized != "" && i >= 0 {
		if floor < 0 {
			return i + 1, nil
		}
		from = min(from, i+1)
	}
	return from, nil
}

// boundaryIndex is the index of the last compaction boundary, -1 for none.
func (h *history) boundaryIndex() int {
	for i := len(h.recs) - 1; i >= 0; i-- {
		if h.recs[i].Compacted != nil {
			return i
		}
	}
	return -1
}

// keepFromRequest selects what a full compaction keeps: the latest request
// and everything after it when that fits max, otherwise a bounded tail with
// the request quoted.
func keepFromRequest(es []memory.WindowEntry, max int64) memory.Window {
	cfg := memory.WindowConfig{MinTokens: 1, MinTextMessages: 1, MaxTokens: max}
	w := memory.SelectWindow(memory.WindowInput{Entries: es, Start: len(es), Complete: true}, cfg)
	if w.LatestRequest < 0 {
		return w
	}
	if r := memory.SelectWindow(memory.WindowInput{Entries: es, Start: w.LatestRequest, Complete: true}, cfg); !r.Overflow {
		return r
	}
	return w
}

// renderConversation renders the notes (the summary the context already
// holds, "" for none) and the main-thread messages of es for the
// summarizer, keeping the newest maxChars characters of the transcript.
func renderConversation(es []memory.WindowEntry, notes string, maxChars int) string {
	var b strings.Builder
	for i := range es {
		if m := es[i].Message; m != nil && m.IsMain() {
			renderMessage(&b, m)
		}
	}
	conv := b.String()
	if conv == "" && strings.TrimSpace(notes) == "" {
		return ""
	}
	if cut := len(conv) - maxChars; cut > 0 {
		for cut < len(conv) && !utf8.RuneStart(conv[cut]) {
			cut++
		}
		conv = "[… earlier part omitted …]\n" + conv[cut:]
	}
	var out strings.Builder
	if strings.TrimSpace(notes) != "" {
		out.WriteString("<earlier_summary>\nThe conversation began before this transcript; these session notes summarize that earlier part.\n\n")
		out.WriteString(strings.TrimSpace(notes))
		out.WriteString("\n</earlier_summary>\n\n")
	}
	out.WriteString("<transcript>\n" + conv + "</transcript>")
	return out.String()
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
