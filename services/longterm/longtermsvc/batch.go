package longtermsvc

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// A commit's batch is cut into parts that fit RECALL_LONGTERM_MAX_BATCH_CHARS,
// oldest messages first: the model sees every message of a part, and the
// commit record advances over that part only, so a long batch becomes
// consecutive commits and no message is passed over.

// batchPart is the part of a batch one commit shows the model.
type batchPart struct {
	msgs []*events.Message
	// texts are the messages as the model sees them (entryText).
	texts []string
	// end is the newest transcript record the part covers: the batch's
	// end when every message fits, else the record before the first
	// message left for the next part.
	end uint64
}

// batch reads the session's messages with from <= seq <= to, as many as
// fit the budget, the first always. The read stops at the first message
// that does not fit, so a long backlog is never read whole.
func (c *committer) batch(ctx context.Context, tenant, session string, from, to uint64) (batchPart, error) {
	part := batchPart{end: to}
	total := 0
	err := c.reader.Scan(ctx, tenant, session, from, to, func(r transcript.Record) bool {
		if r.Message == nil {
			return true
		}
		t := entryText(len(part.msgs), r.Message, c.cfg.MaxBatch)
		if len(part.msgs) > 0 && total+len(t) > c.cfg.MaxBatch {
			part.end = r.Seq - 1
			return false
		}
		total += len(t)
		part.msgs, part.texts = append(part.msgs, r.Message), append(part.texts, t)
		return true
	})
	if err != nil {
		return batchPart{}, fmt.Errorf("reading the batch of %s: %w", session, err)
	}
	return part, nil
}

// entryText is batch message i as the model sees it: its index, role and
// peer, tool calls and (hydrated, clipped) tool outputs. A message alone
// over maxChars (a paste, a file) is cut to its beginning and end.
func entryText(i int, m *events.Message, maxChars int) string {
	who := m.Role
	if m.PeerID != "" {
		who += " (peer " + m.PeerID + ")"
	}
	p := fmt.Sprintf("[%d] %s: %s", i, who, memory.MessagePassage(m))
	if len(p) > maxChars {
		p, _ = memory.ClipText(p, maxChars/4)
	}
	return p
}

// batchText is the model's view of a batch part.
func batchText(texts []string) string {
	return "<batch>\n" + strings.Join(texts, "\n\n") + "\n</batch>"
}

// merged adds the outcome of a commit's next part to the outcome so far
// (nil before the first part): the records from the first part's start to
// the last part's end, everything written, skipped and refused, the usage;
// success and error are the last part's.
func merged(total, part *events.MemoryCommitted) *events.MemoryCommitted {
	if total == nil || part == nil {
		if total == nil {
			return part
		}
		return total
	}
	total.ToSeq = part.ToSeq
	total.Messages += part.Messages
	total.Written = append(total.Written, part.Written...)
	for _, s := range part.Skipped {
		i := slices.IndexFunc(total.Skipped, func(t events.MemorySkip) bool { return t.Reason == s.Reason && t.Type == s.Type })
		if i < 0 {
			total.Skipped = append(total.Skipped, s)
			continue
		}
		total.Skipped[i].Count += s.Count
	}
	total.Denied = append(total.Denied, part.Denied...)
	for _, p := range part.AllowedPeers {
		if !slices.Contains(total.AllowedPeers, p) {
			total.AllowedPeers = append(total.AllowedPeers, p)
		}
	}
	for _, p := range part.Phases {
		if !slices.Contains(total.Phases, p) {
			total.Phases = append(total.Phases, p)
		}
	}
	total.Usage = total.Usage.Add(part.Usage)
	total.DurationMS += part.DurationMS
	total.Model, total.Success, total.Error = part.Model, part.Success, part.Error
	return total
}
