package compactorsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/cloudevents/sdk-go/v2/event"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

var (
	repairsCounter, _ = meter.Int64Counter("recall_context_repairs_total",
		metric.WithDescription("changes made to served contexts so they pass the model APIs' structural rules, by rule"))
	invalidCounter, _ = meter.Int64Counter("recall_context_invalid_total",
		metric.WithDescription("compactions withheld because their context failed validation after repair (a defect: report it)"))
)

// OutcomeInvalidContext is reported when a context failed validation even
// after repair; it is not served.
const OutcomeInvalidContext = "invalid_context"

// checkServed is the boundary every served reply passes — session memory,
// preview, context edits applied, full compaction: the context (summary
// message, then the kept records) is repaired once (memory.RepairContext)
// and validated (memory.ValidateContext), and it is served only when it
// validates and ends below the threshold it was asked with. A reply that
// fails keeps its numbers and says why, unserved.
func (c *Compactor) checkServed(ctx context.Context, tenant, session string, reply *events.CompactReply, kept []*events.Message) {
	if !reply.Served {
		return
	}
	if err := repairKept(tenant, session, reply, kept); err != nil {
		reply.Outcome, reply.Served, reply.Reason = OutcomeInvalidContext, false, err.Error()
		invalidCounter.Add(ctx, 1)
		c.log.ErrorContext(ctx, "served context invalid after repair", "tenant", tenant, "session", session, "err", err)
		return
	}
	for _, r := range reply.Repaired {
		repairsCounter.Add(ctx, 1, metric.WithAttributes(attribute.String("rule", r.Rule)))
	}
	if len(reply.Repaired) > 0 {
		c.log.InfoContext(ctx, "served context repaired", "tenant", tenant, "session", session, "repairs", len(reply.Repaired), "first_rule", reply.Repaired[0].Rule)
	}
	if reply.TokensAfter >= reply.Threshold {
		reply.Served = false
		if reply.FallbackFrom != "" {
			reply.Outcome = reply.FallbackFrom
		} else {
			reply.Outcome = memory.OutcomeThresholdExceeded
		}
		reply.Reason = fmt.Sprintf("the compacted context would hold about %d tokens, at or over the threshold of %d it was asked with", reply.TokensAfter, reply.Threshold)
	}
}

// repairKept repairs reply's summary and kept records in place and
// validates the result: changed records are re-encoded (their seq kept),
// synthetic ones added (ExtSynthetic, no seq), tokens_after recomputed.
// kept are the kept records' messages as served (decoded from the events
// when the caller has none to give).
func repairKept(tenant, session string, reply *events.CompactReply, kept []*events.Message) error {
	msgs := make([]*events.Message, 0, 1+len(reply.Kept))
	msgs = append(msgs, &reply.Summary.Message)
	if len(kept) == len(reply.Kept) {
		msgs = append(msgs, kept...)
	} else {
		for i := range reply.Kept {
			var m events.Message
			if err := json.Unmarshal(reply.Kept[i].Data(), &m); err != nil {
				return fmt.Errorf("decoding kept record %s: %w", reply.Kept[i].ID(), err)
			}
			msgs = append(msgs, &m)
		}
	}
	served, repairs := memory.RepairContext(msgs)
	if len(repairs) > 0 {
		if served[0].From != 0 || served[0].Changed {
			return fmt.Errorf("repairing the context would change the summary message: %w", memory.ErrInvalidContext)
		}
		kept, err := rebuildKept(tenant, session, reply.Kept, served[1:])
		if err != nil {
			return err
		}
		reply.Kept, reply.KeptCount = kept, len(kept)
		markSegment(reply, served[1:])
		reply.Repaired = make([]events.ContextRepair, len(repairs))
		for i, r := range repairs {
			reply.Repaired[i] = events.ContextRepair{Rule: r.Rule, UUID: r.UUID}
		}
		var raw int64
		for _, s := range served[1:] {
			raw += memory.EstimateMessage(s.Message)
		}
		reply.TokensAfter = memory.Padded(memory.EstimateText(memory.RequestText(&reply.Summary.Message))) + memory.Padded(raw)
		msgs = msgs[:0]
		for _, s := range served {
			msgs = append(msgs, s.Message)
		}
	}
	return memory.ValidateContext(msgs)
}

// rebuildKept turns repaired messages back into kept events: unchanged ones
// are the original events, changed ones copies with new data, synthetic
// ones new events of the session (subject and tenant as stored records
// have them).
func rebuildKept(tenant, session string, orig []event.Event, served []memory.ServedMessage) ([]event.Event, error) {
	out := make([]event.Event, 0, len(served))
	for _, s := range served {
		switch {
		case s.From > 0 && !s.Changed:
			out = append(out, orig[s.From-1])
		case s.From > 0:
			e := orig[s.From-1].Clone()
			if err := e.SetData(event.ApplicationJSON, s.Message); err != nil {
				return nil, fmt.Errorf("encoding repaired record %s: %w", s.Message.UUID, err)
			}
			out = append(out, e)
		default:
			e := event.New()
			e.SetID(s.Message.UUID)
			e.SetSource(eventpub.Source(Component))
			e.SetType(events.TypeMessage)
			e.SetSubject(session)
			e.SetExtension(events.ExtTenant, tenant)
			e.SetExtension(events.ExtSynthetic, events.SyntheticInterrupted)
			if err := e.SetData(event.ApplicationJSON, s.Message); err != nil {
				return nil, fmt.Errorf("encoding synthetic record: %w", err)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// markSegment points the boundary's preserved segment and first_kept_seq
// at the repaired kept records.
func markSegment(reply *events.CompactReply, kept []memory.ServedMessage) {
	reply.FirstKeptSeq = 0
	for _, e := range reply.Kept {
		if seq := seqOf(e); seq > 0 {
			reply.FirstKeptSeq = seq
			break
		}
	}
	if seg := reply.Boundary.PreservedSegment; seg != nil {
		if len(kept) == 0 {
			reply.Boundary.PreservedSegment = nil
			return
		}
		seg.HeadUUID, seg.TailUUID = kept[0].Message.UUID, kept[len(kept)-1].Message.UUID
	}
}

// seqOf is the kept event's stream sequence (0 for a synthetic record).
func seqOf(e event.Event) uint64 {
	s, _ := e.Extensions()[events.ExtSeq].(string)
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
