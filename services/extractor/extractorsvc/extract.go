package extractorsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/recallhq/recall/internal/extraction"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// errNotVisible: the transcript records the request covers are not readable
// yet (a lagging replica); the request is retried.
var errNotVisible = errors.New("transcript not visible yet")

// result is the outcome of run.
type result struct {
	outcome  string
	reason   string // for OutcomeFailed
	attempts int    // for OutcomeFailed
	record   events.MemoryRecord
	revision uint64
	usage    events.TokenUsage
	provider string
	model    string
	edits    int       // edits applied
	upToDate bool      // the model found nothing to change
	readAt   time.Time // when the memory was read (set on a fenced commit's conflict)
}

// run reads the memory, skips covered requests, extends the request to the
// newest pending one of the session, runs the forked edit and commits it
// with a compare-and-set on the revision read first. A backlog larger than
// the conversation cap is summarized in parts, each committed (extractPart).
func (w *Worker) run(ctx context.Context, m *pcgroup.Msg, req request, log *slog.Logger) (result, error) {
	readAt := time.Now()
	mem, rev, err := w.readMemory(ctx, req.Tenant, req.Session)
	if err != nil {
		return result{}, err
	}
	if req.UpToSeq <= mem.CoveredSeq {
		return result{outcome: OutcomeSkipped, record: mem, revision: rev}, nil
	}
	target := req.UpToSeq
	if newest, ok := w.newestPending(ctx, m); ok && newest > target {
		log.DebugContext(ctx, "covering newer pending requests too", "up_to_seq", newest)
		target = newest
	}
	key := events.MemoryKey(req.Tenant, req.Session)
	stop := w.markRunning(ctx, key, events.StatusRecord{Running: true, Since: time.Now().UTC(), Worker: w.cfg.WorkerID, UpToSeq: target})
	defer stop()

	var usage events.TokenUsage
	edits := 0
	for {
		res, err := w.extractPart(ctx, req, mem, rev, target)
		usage, edits = usage.Add(res.usage), edits+res.edits
		res.usage, res.edits = usage, edits
		if err != nil {
			res.readAt = readAt
			return res, err
		}
		if res.record.CoveredSeq >= target {
			return res, nil
		}
		log.InfoContext(ctx, "summarizing a backlog in parts", "covered_seq", res.record.CoveredSeq, "up_to_seq", target)
		mem, rev, readAt = res.record, res.revision, time.Now()
	}
}

// extractPart runs the forked edit on the session from mem's read window up
// to target, or up to a safe point inside the backlog when the messages
// after the last summarized one are over the conversation cap (partEnd),
// and commits it; the part's coverage is always beyond mem's.
func (w *Worker) extractPart(ctx context.Context, req request, mem events.MemoryRecord, rev, target uint64) (result, error) {
	budget := w.cfg.MaxConversationTokens
	msgs, seqs, more, err := w.readConversation(ctx, req, mem, target, budget)
	if err != nil {
		return result{}, err
	}
	end := partEnd(msgs, seqs, mem, budget)
	if more && end == len(msgs)-1 {
		// No safe point within the cap: read on to the first one after it
		// (the whole backlog when there is none).
		if msgs, seqs, _, err = w.readConversation(ctx, req, mem, target, 0); err != nil {
			return result{}, err
		}
		end = partEnd(msgs, seqs, mem, budget)
	}
	if end < len(msgs)-1 || more {
		msgs, seqs, target = msgs[:end+1], seqs[:end+1], seqs[end]
	}
	in, contextSeq := w.extractionInput(req, mem, msgs, seqs)
	notes := in.Notes
	out, err := w.extract(ctx, w.provider, in)
	var res result
	switch {
	case err == nil:
		res.usage, res.provider, res.model = out.Usage, out.Provider, out.Model
		res.edits, res.upToDate = out.EditsApplied, out.UpToDate
		notes = out.Notes
	case errors.Is(err, extraction.ErrNoMessages):
		// Nothing to summarize (only lifecycle or subagent records): the
		// range is covered all the same; the notes stay as they were.
		notes = mem.Notes
	case ctx.Err() != nil:
		return result{}, ctx.Err()
	default:
		return w.failure(out, err), err
	}

	next := mem
	next.Notes = notes
	next.Trail = memory.FoldTrail(mem.Trail, messagePointers(msgs), seqs)
	if sp := memory.SafePoint(msgs); sp >= 0 && seqs[sp] > mem.LastSummarizedSeq {
		next.LastSummarizedID, next.LastSummarizedSeq = msgs[sp].UUID, seqs[sp]
	}
	next.CoveredSeq = max(mem.CoveredSeq, target)
	next.ContextSeq, next.ContextTokens = contextSeq, w.cfg.MaxConversationTokens
	next.Usage = mem.Usage.Add(res.usage)
	if err == nil {
		next.Extractions++
		next.Provider, next.Model = res.provider, res.model
	}
	next.UpdatedAt = time.Now().UTC()
	newRev, err := w.commit(ctx, req.Tenant, req.Session, next, rev)
	if err != nil {
		return res, err
	}
	res.outcome, res.record, res.revision = OutcomeCompleted, next, newRev
	return res, nil
}

// messagePointers points at each of msgs.
func messagePointers(msgs []events.Message) []*events.Message {
	out := make([]*events.Message, len(msgs))
	for i := range msgs {
		out[i] = &msgs[i]
	}
	return out
}

// partEnd is the index of the newest of msgs one extraction covers: the
// last, unless the messages after the last summarized one are estimated
// over maxTokens (a backlog: memory turned on late, failures, an import);
// then the newest safe point (memory.SafePoints) within their first
// maxTokens/2, or failing that the oldest one after it, beyond mem's
// coverage and before the last message (whose point is not final while
// more follows). The rest is summarized in the next parts, so no single
// call is sent a conversation the model rejects as too long, and the notes
// grow in order.
func partEnd(msgs []events.Message, seqs []uint64, mem events.MemoryRecord, maxTokens int64) int {
	last := len(msgs) - 1
	if maxTokens <= 0 || last < 0 {
		return last
	}
	first := summarizedUpTo(seqs, mem)
	var total int64
	for i := first; i <= last; i++ {
		total += memory.EstimateMessage(&msgs[i])
	}
	if total <= maxTokens {
		return last
	}
	k, part := first, int64(0)
	for ; k < last; k++ {
		if part += memory.EstimateMessage(&msgs[k]); part > maxTokens/2 {
			break
		}
	}
	end := -1
	for sp := range memory.SafePoints(msgs) {
		if sp == last || (end >= 0 && sp > k) {
			break
		}
		if sp < first || seqs[sp] <= mem.CoveredSeq {
			continue
		}
		end = sp
		if sp > k {
			break // none within the half-cap: the oldest one after it
		}
	}
	if end < 0 {
		return last
	}
	return end
}

// windowFrom is the sequence an extraction of the session reads from: its
// window (mem.ContextSeq), unless this worker's conversation cap is larger
// than the one the window was cut under — then the first record.
func (w *Worker) windowFrom(mem events.MemoryRecord) uint64 {
	limit := w.cfg.MaxConversationTokens
	if mem.ContextTokens > 0 && (limit <= 0 || mem.ContextTokens < limit) {
		return 1
	}
	return max(mem.ContextSeq, 1)
}

// summarizedUpTo is how many of seqs (ascending) the notes already cover:
// the index of the first message after the last summarized one.
func summarizedUpTo(seqs []uint64, mem events.MemoryRecord) int {
	n := 0
	for n < len(seqs) && seqs[n] <= mem.LastSummarizedSeq {
		n++
	}
	return n
}

// readConversation reads the session's messages from its read window
// (windowFrom) up to target, with their stream sequences, each block over
// MaxBlockTokens clipped (memory.ClipContent). With budget > 0
// it stops once the messages after the last summarized one are estimated
// over budget (more: a backlog that goes in parts, partEnd). Direct Get
// may lag behind on replicas: coverage of records not seen yet is never
// claimed (errNotVisible).
func (w *Worker) readConversation(ctx context.Context, req request, mem events.MemoryRecord, target uint64, budget int64) (msgs []events.Message, seqs []uint64, more bool, err error) {
	var backlog int64
	last, clipped := uint64(0), 0
	err = w.reader.Scan(ctx, req.Tenant, req.Session, w.windowFrom(mem), target, func(r transcript.Record) bool {
		last = r.Seq
		if r.Message == nil {
			return true
		}
		m := *r.Message
		var cut bool
		if m.Content, cut = memory.ClipContent(m.Content, w.cfg.MaxBlockTokens); cut {
			clipped++
		}
		msgs, seqs = append(msgs, m), append(seqs, r.Seq)
		if r.Seq > mem.LastSummarizedSeq {
			backlog += memory.EstimateMessage(&m)
		}
		more = budget > 0 && backlog > budget && r.Seq < target
		return !more
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("reading the transcript: %w", err)
	}
	if clipped > 0 {
		w.log.DebugContext(ctx, "messages with blocks over the block limit reach the model clipped",
			"tenant", req.Tenant, "session", req.Session, "messages", clipped, "max_block_tokens", w.cfg.MaxBlockTokens)
	}
	if !more && last < target {
		head, err := w.reader.LastSeq(ctx, req.Tenant, req.Session)
		if err != nil {
			return nil, nil, false, fmt.Errorf("reading the transcript head: %w", err)
		}
		if head < target {
			return nil, nil, false, fmt.Errorf("transcript of %s/%s is visible up to seq %d, the request needs %d: %w", req.Tenant, req.Session, head, target, errNotVisible)
		}
	}
	return msgs, seqs, more, nil
}

// extractionInput is the forked edit's input: the tenant's template and
// prompt, the current notes (the template when empty), and the
// conversation read from windowFrom(mem) (extraction.BuildWindow); and the
// sequence the next extraction can read from.
func (w *Worker) extractionInput(req request, mem events.MemoryRecord, msgs []events.Message, seqs []uint64) (extraction.Input, uint64) {
	lastIdx := summarizedUpTo(seqs, mem) - 1
	tc := w.tenants.Get(req.Tenant)
	template := tc.Template
	if strings.TrimSpace(template) == "" {
		template = memory.DefaultTemplate
	}
	notes := mem.Notes
	if strings.TrimSpace(notes) == "" {
		notes = template
	}
	from := w.windowFrom(mem)
	conv, first := extraction.BuildWindow(msgs, lastIdx, w.cfg.MaxConversationTokens, from > 1)
	contextSeq := from // the window's start stays, or it is the first record (0)
	if from == 1 {
		contextSeq = 0
	}
	if first > 0 {
		contextSeq = seqs[first]
	}
	return extraction.Input{
		Tenant: req.Tenant, Session: req.Session, Notes: notes, Template: template, CustomPrompt: tc.Prompt,
		Conversation: conv, MaxTurns: w.cfg.MaxTurns, MaxTokens: w.cfg.MaxTokens,
	}, contextSeq
}

// failure is the result of an extraction that failed with err: its reason
// and the attempts it made.
func (w *Worker) failure(out *extraction.Output, err error) result {
	res := result{outcome: OutcomeFailed, reason: ReasonLLM, attempts: 1}
	if out != nil {
		res.usage = out.Usage
	}
	switch {
	case errors.Is(err, extraction.ErrNoValidToolCall):
		res.reason, res.attempts = ReasonNoValidToolCall, extraction.DefaultNoToolRetries+1
	case errors.Is(err, llm.ErrRetryable):
		res.reason, res.attempts = ReasonProvider, max(w.cfg.RetryAttempts, 1)
	}
	if ae := (*llm.AttemptsError)(nil); errors.As(err, &ae) {
		res.attempts = ae.Attempts
	}
	return res
}
