package compactorsvc

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// TestShortSparseSessionReadInOneStretch checks that a short session
// interleaved with many others (its records hundreds of sequences apart)
// reaches its first record with one read below its tail: the stretch is
// scaled by the gap between the records already read. Unscaled, the first
// stretch (64 sequences) holds none of its records and the history grows
// back through the whole stream.
func TestShortSparseSessionReadInOneStretch(t *testing.T) {
	e := startEnv(t, envOptions{})
	var uuids []string
	var seqs []uint64
	noise := make([]rec, 500)
	for i := range noise {
		noise[i] = rec{role: events.RoleUser, text: "noise"}
	}
	for _, r := range conversation(2, 100) {
		u, s := e.publish("s1", r)
		uuids, seqs = append(uuids, u...), append(seqs, s...)
		e.publish("noise", noise...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Config: provision.Config{Partitions: 2, MemoryStorage: true}}
	c, err := New(ctx, e.nc, e.js, cfg, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.readTail(ctx, tenant, "s1", seqs[3])
	if err != nil {
		t.Fatal(err)
	}
	if len(h.recs) != 5 || h.complete {
		t.Fatalf("tail from record 3: %d records, complete %v; want 5, not complete", len(h.recs), h.complete)
	}
	if err := h.earlierRecords(ctx); err != nil {
		t.Fatal(err)
	}
	if !h.complete || len(h.recs) != len(uuids) {
		t.Fatalf("after one earlier read: %d of %d records, complete %v (lowest %d)", len(h.recs), len(uuids), h.complete, h.lowest)
	}
	for i, r := range h.recs {
		if r.Message == nil || r.Message.UUID != uuids[i] {
			t.Fatalf("record %d is not %s: %+v", i, uuids[i], r.Message)
		}
	}

	// The compaction itself reads the same history and keeps all of it:
	// the session is shorter than the keep window.
	e.putMemory("s1", events.MemoryRecord{Notes: notes("x"), LastSummarizedID: uuids[3], LastSummarizedSeq: seqs[3], CoveredSeq: seqs[len(seqs)-1]})
	r := e.compact("s1", events.CompactRequest{ContextTokens: 160000})
	if r.Outcome != memory.OutcomeSessionMemory || r.KeptCount != len(uuids) {
		t.Fatalf("outcome %q (%s), %d kept; want %s, %d kept", r.Outcome, r.Reason, r.KeptCount, memory.OutcomeSessionMemory, len(uuids))
	}
}

// TestDenserBelowReadsOnDensely checks the fallback of a scaled stretch: a
// session stored densely at first and then sparsely (other sessions joined)
// holds more records below its tail than the tail's gap predicts; the
// history drops that read and goes on unscaled, so it stays contiguous and
// reads no more than an unscaled stretch would.
func TestDenserBelowReadsOnDensely(t *testing.T) {
	e := startEnv(t, envOptions{})
	uuids, seqs := e.publish("s1", conversation(50, 10)...) // 200 records, dense
	noise := make([]rec, 300)
	for i := range noise {
		noise[i] = rec{role: events.RoleUser, text: "noise"}
	}
	for _, r := range conversation(2, 10) {
		e.publish("noise", noise...)
		u, s := e.publish("s1", r)
		uuids, seqs = append(uuids, u...), append(seqs, s...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Config: provision.Config{Partitions: 2, MemoryStorage: true}}
	c, err := New(ctx, e.nc, e.js, cfg, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	tail := len(seqs) - 8
	h, err := c.readTail(ctx, tenant, "s1", seqs[tail])
	if err != nil {
		t.Fatal(err)
	}
	if err := h.earlierRecords(ctx); err != nil {
		t.Fatal(err)
	}
	if !h.dense || h.complete {
		t.Fatalf("dense %v, complete %v after one earlier read; want dense, not complete", h.dense, h.complete)
	}
	for len(h.recs) == 8 && !h.complete { // unscaled stretches, growing back to the dense part
		if err := h.earlierRecords(ctx); err != nil {
			t.Fatal(err)
		}
	}
	first := tail + 8 - len(h.recs)
	if first < 0 || h.complete {
		t.Fatalf("read %d records, complete %v", len(h.recs), h.complete)
	}
	for i, r := range h.recs {
		if r.Seq != seqs[first+i] {
			t.Fatalf("record %d has seq %d, want %d: the history has a hole", i, r.Seq, seqs[first+i])
		}
	}
}
