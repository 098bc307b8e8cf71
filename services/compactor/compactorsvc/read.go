package compactorsvc

import (
	"context"
	"fmt"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// firstSpan is about how many of the session's records the first stretch
// read backwards should hold; each further stretch is spanGrowth times
// longer. Starting small matters: the keep window usually needs a handful
// more records, and in a session stored densely every sequence of the
// stretch is a record to fetch and decode. In a session interleaved with
// many others the stretch is scaled by the gap between the records already
// read (see stretch), so a short sparse session reaches its first record in
// one read instead of growing back through the shard.
const (
	firstSpan  = 64
	spanGrowth = 4
)

// history is a contiguous run of one session's transcript records, ending
// at the newest, read with batch Direct Get and extended backwards on
// demand.
type history struct {
	c               *Compactor
	tenant, session string
	recs            []transcript.Record
	// lowest is the lowest stream sequence covered (records of the session
	// below it are not read yet); complete says nothing earlier exists or
	// may be read.
	lowest   uint64
	complete bool
	span     uint64
	earlier  int // records read backwards, bounded by MaxReadRecords
	// dense is set once a stretch held more records than the gap of those
	// already read predicted: later stretches are not scaled.
	dense bool
	// cached is the session's tail cache entry when the compaction started
	// (ok false: none); reads it covers are not sent to the server.
	cached   tailEntry
	cachedOK bool
}

// readTail reads every record from seq from on (from >= 1): from the tail
// cache as far as it reaches, then from the server.
func (c *Compactor) readTail(ctx context.Context, tenant, session string, from uint64) (*history, error) {
	h := &history{c: c, tenant: tenant, session: session, lowest: from, complete: from <= 1, span: firstSpan}
	h.cached, h.cachedOK = c.tails.get(events.MemoryKey(tenant, session))
	start := from
	if h.cachedOK {
		if recs, ok := h.cached.from(from); ok {
			h.recs = recs
			start = max(from, h.cached.next())
			tailHits.Add(1)
		}
	}
	recs, err := c.reader.Read(ctx, tenant, session, start, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("reading the transcript from seq %d: %w", start, err)
	}
	if len(h.recs) == 0 {
		h.recs = recs
	} else if len(recs) > 0 {
		h.recs = append(append(make([]transcript.Record, 0, len(h.recs)+len(recs)), h.recs...), recs...)
	}
	return h, nil
}

// remember puts what h read into the tail cache.
func (h *history) remember() {
	h.c.tails.put(events.MemoryKey(h.tenant, h.session), h.lowest, h.recs)
}

// readEnd starts a history at the session's newest record with nothing read
// yet (resumed sessions).
func (c *Compactor) readEnd(ctx context.Context, tenant, session string) (*history, error) {
	last, err := c.reader.LastSeq(ctx, tenant, session)
	if err != nil {
		return nil, fmt.Errorf("reading the transcript head: %w", err)
	}
	h := &history{c: c, tenant: tenant, session: session, lowest: last + 1, complete: last == 0, span: firstSpan}
	if last > 0 {
		err = h.earlierRecords(ctx)
	}
	return h, err
}

// earlierRecords prepends the session's records in the next stretch of
// sequences below h.lowest (the stretch grows each time, and is scaled by
// the session's gap: see firstSpan), so reads stay bounded however long the
// stream is.
func (h *history) earlierRecords(ctx context.Context) error {
	if h.complete {
		return nil
	}
	recs, lo, err := h.readStretch(ctx)
	if err != nil {
		return err
	}
	h.span *= spanGrowth
	h.recs = append(append(make([]transcript.Record, 0, len(recs)+len(h.recs)), recs...), h.recs...)
	h.lowest = lo
	h.earlier += len(recs)
	if lo <= 1 || h.earlier >= h.c.cfg.MaxReadRecords {
		h.complete = true
	}
	return nil
}

// readStretch reads the session's records in the next stretch below
// h.lowest and returns them with the stretch's first sequence. A scaled
// stretch (a sparse session) asks for about the records it should hold, so
// the server stops near its end instead of sending again (up to a default
// batch of) the records already read after it. When the stretch holds more
// (the session was stored more densely earlier), what was read is dropped
// and the history reads on as a dense one.
func (h *history) readStretch(ctx context.Context) ([]transcript.Record, uint64, error) {
	hi := h.lowest - 1
	for {
		gap := h.gap()
		span := h.span * gap
		if span/gap != h.span { // overflow: the whole stream
			span = hi
		}
		lo := uint64(1)
		if hi > span {
			lo = hi - span + 1
		}
		if recs, ok := h.cached.between(lo, hi); h.cachedOK && ok {
			return recs, lo, nil
		}
		want := 0 // a dense stretch: every record, in default batches
		if gap > 1 {
			want = int(min((hi-lo+1)/gap+2, transcript.DefaultBatch))
		}
		recs, err := h.c.reader.WithBatch(want).Read(ctx, h.tenant, h.session, lo, hi, want)
		if err != nil {
			return nil, 0, fmt.Errorf("reading the transcript between seq %d and %d: %w", lo, hi, err)
		}
		if want == 0 || len(recs) < want || recs[len(recs)-1].Seq >= hi {
			return recs, lo, nil
		}
		h.dense = true
	}
}

// gap is the session's sequences per record in what h holds: 1 when it is
// stored densely, when fewer than two records were read, or once a stretch
// held more records than the gap predicted (dense).
func (h *history) gap() uint64 {
	n := len(h.recs)
	if n < 2 || h.dense {
		return 1
	}
	return max(1, (h.recs[n-1].Seq-h.recs[0].Seq)/uint64(n-1))
}

// entries converts the records for window selection.
func (h *history) entries() []memory.WindowEntry {
	es := make([]memory.WindowEntry, len(h.recs))
	for i := range h.recs {
		r := &h.recs[i]
		es[i] = memory.WindowEntry{Seq: r.Seq, Message: r.Message}
		if r.Compacted != nil {
			es[i].Boundary, es[i].PostTokens = true, r.Compacted.PostTokens
		}
	}
	return es
}

// index returns the index of the record with uuid id, -1 when absent.
func (h *history) index(id string) int {
	for i := len(h.recs) - 1; i >= 0; i-- {
		if m := h.recs[i].Message; m != nil && m.UUID == id {
			return i
		}
	}
	return -1
}

// planWithTranscript reads the transcript from the memory's
// lastSummarizedSeq (or grows back from the end for a resumed session) and
// plans, reading earlier records in bounded stretches while the selection
// asks for them. It never scans the stream and creates no consumer.
func (c *Compactor) planWithTranscript(ctx context.Context, tenant, session string, rec *events.MemoryRecord, in memory.CompactInput) (memory.CompactPlan, []transcript.Record, error) {
	var h *history
	var err error
	if rec.LastSummarizedID != "" && rec.LastSummarizedSeq > 0 {
		h, err = c.readTail(ctx, tenant, session, rec.LastSummarizedSeq)
	} else {
		h, err = c.readEnd(ctx, tenant, session)
	}
	if err != nil {
		return memory.CompactPlan{}, nil, err
	}
	for {
		in.SummarizedIndex = -1
		if rec.LastSummarizedID != "" {
			in.SummarizedIndex = h.index(rec.LastSummarizedID)
			if in.SummarizedIndex < 0 && !h.complete {
				// Not at the recorded sequence (or none was recorded):
				// look further back.
				if err := h.earlierRecords(ctx); err != nil {
					return memory.CompactPlan{}, nil, err
				}
				continue
			}
		}
		in.Entries, in.Complete = h.entries(), h.complete
		p := memory.PlanCompaction(in)
		if !p.NeedEarlier || h.complete {
			h.remember()
			return p, h.recs, nil
		}
		if err := h.earlierRecords(ctx); err != nil {
			return memory.CompactPlan{}, nil, err
		}
	}
}
