package compactorsvc

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

var (
	clearedTokens, _ = meter.Int64Counter("recall_context_cleared_tokens_total",
		metric.WithDescription("estimated input tokens cleared by context editing, by where (edit, compact) and strategy"))
	clearedUses, _ = meter.Int64Counter("recall_context_cleared_tool_uses_total",
		metric.WithDescription("tool uses whose results were cleared by context editing, by where (edit, compact)"))
)

// contextEdits returns the strategies of a request: its own, else the
// tenant's default, else fallback (nil for none).
func (c *Compactor) contextEdits(tenant string, own *events.ContextManagement, fallback []events.ContextEdit) []events.ContextEdit {
	if own != nil {
		return own.Edits
	}
	if tc := c.tenants.Get(tenant); tc.ContextManagement != nil {
		return tc.ContextManagement.Edits
	}
	return fallback
}

// Edit answers an edit request: which blocks of the session's current
// context (after the last compaction boundary, with the segment it
// preserved) to clear by the request's strategies. Errors are read failures.
func (c *Compactor) Edit(ctx context.Context, tenant, session string, r events.EditRequest) (*events.EditReply, error) {
	start := time.Now()
	ctx, span := tracer.Start(ctx, "edit", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("recall.tenant", tenant), attribute.String("recall.session", session)))
	defer span.End()
	edits := c.contextEdits(tenant, r.ContextManagement, memory.DefaultContextEdits())
	h, err := c.readEnd(ctx, tenant, session)
	if err != nil {
		return nil, err
	}
	from, err := h.contextStart(ctx, "")
	if err != nil {
		return nil, err
	}
	es := h.entries()
	reply := &events.EditReply{TokensBefore: r.ContextTokens}
	if reply.TokensBefore <= 0 {
		reply.TokensBefore = memory.ContextEstimate(es, h.boundaryIndex())
	}
	p := memory.PlanContextEdits(memory.ContextEditInput{Entries: es[from:], Tokens: reply.TokensBefore, Edits: edits})
	reply.AppliedEdits, reply.Clear = p.Applied, p.Clear
	if reply.AppliedEdits == nil {
		reply.AppliedEdits = []events.AppliedEdit{}
	}
	if reply.Clear == nil {
		reply.Clear = []events.ClearedBlock{}
	}
	reply.TokensAfter = reply.TokensBefore - p.Freed
	if from < len(h.recs) {
		reply.FirstSeq, reply.LastSeq = h.recs[from].Seq, h.recs[len(h.recs)-1].Seq
	}
	reply.DurationUS = time.Since(start).Microseconds()
	countCleared(ctx, "edit", p)
	span.SetAttributes(attribute.Int("recall.cleared_blocks", len(p.Clear)), attribute.Int64("recall.cleared_tokens", p.Freed))
	return reply, nil
}

func countCleared(ctx context.Context, where string, p memory.ContextEditPlan) {
	for _, a := range p.Applied {
		attrs := metric.WithAttributes(attribute.String("where", where), attribute.String("strategy", a.Type))
		clearedTokens.Add(ctx, a.ClearedInputTokens, attrs)
		if a.ClearedToolUses > 0 {
			clearedUses.Add(ctx, int64(a.ClearedToolUses), attrs)
		}
	}
}

// editKept applies the compaction's context editing to the kept records of
// a served reply: cleared blocks are replaced in the kept events' data (and
// in keptMsgs, the messages served), the
// counts are set and tokens_after is recomputed. Triggers measure the
// context being compacted (tokens_before; tool uses of the kept records).
func (c *Compactor) editKept(ctx context.Context, tenant string, own *events.ContextManagement, reply *events.CompactReply, plan memory.CompactPlan, recs []transcript.Record, keptMsgs []*events.Message) error {
	edits := c.contextEdits(tenant, own, nil)
	if len(edits) == 0 || len(plan.Window.Kept) == 0 {
		return nil
	}
	es := make([]memory.WindowEntry, 0, len(plan.Window.Kept))
	for _, i := range plan.Window.Kept {
		es = append(es, memory.WindowEntry{Seq: recs[i].Seq, Message: recs[i].Message})
	}
	p := memory.PlanContextEdits(memory.ContextEditInput{Entries: es, Tokens: reply.TokensBefore, Edits: edits})
	if len(p.Clear) == 0 {
		return nil
	}
	touched := map[string]bool{}
	for _, b := range p.Clear {
		touched[b.UUID] = true
	}
	var raw int64
	for k, e := range es {
		if !touched[e.Message.UUID] {
			raw += memory.EstimateMessage(e.Message)
			continue
		}
		m := memory.ApplyClearing(e.Message, p.Clear)
		keptMsgs[k] = m
		raw += memory.EstimateMessage(m)
		ev := reply.Kept[k].Clone()
		if err := ev.SetData("application/json", m); err != nil {
			return fmt.Errorf("editing kept record %s: %w", m.UUID, err)
		}
		ev.SetExtension(events.ExtSeq, strconv.FormatUint(e.Seq, 10))
		reply.Kept[k] = ev
	}
	reply.TokensAfter += memory.Padded(raw) - plan.Window.Tokens
	reply.AppliedEdits = p.Applied
	for _, a := range p.Applied {
		reply.ClearedToolUses += a.ClearedToolUses
	}
	reply.ClearedTokens = p.Freed
	countCleared(ctx, "compact", p)
	return nil
}

// checkEdit decodes an edit request into r.Value.
func checkEdit(_ context.Context, r *microapi.Request) *microapi.Error {
	e, err := events.DecodeEditRequest(r.Data)
	if err != nil {
		return microapi.Fail(400, "%v", err)
	}
	r.Value = e
	return nil
}

// edit answers recall.api.edit.<tenant>.<session> like compact answers
// compactions.
func (h *handler) edit(ctx context.Context, r microapi.Request) (any, *microapi.Error) {
	reply, err := h.c.Edit(ctx, r.Tenant, r.Session, r.Value.(events.EditRequest))
	if err != nil {
		return nil, microapi.Fail(500, "%v", err)
	}
	return encode(reply)
}
