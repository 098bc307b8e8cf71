package longtermsvc

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

var factRE = regexp.MustCompile(`FACT-\d+`)

// factPlan writes every FACT-<n> of the batch part it is shown into the
// user's preferences.
func factPlan(req llm.Request) []llm.ToolCall {
	var lines []string
	for _, m := range req.Batch {
		for _, fact := range factRE.FindAllString(memory.MessagePassage(m), -1) {
			lines = append(lines, "- Prefers "+fact+".")
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return []llm.ToolCall{write("w", "preferences", strings.Join(lines, "\n"), "")}
}

// shown counts how often the model was shown each fact in the first call
// of a phase (a call without tool results).
func shown(reqs []llm.Request) map[string]int {
	out := map[string]int{}
	for _, req := range reqs {
		if len(req.Messages) != 1 {
			continue
		}
		for _, m := range req.Batch {
			for _, fact := range factRE.FindAllString(memory.MessagePassage(m), -1) {
				out[fact]++
			}
		}
	}
	return out
}

// facts stores n user messages stating FACT-<from>…, pad characters each.
func (f *fixture) facts(t *testing.T, from, n, pad int) uint64 {
	t.Helper()
	var last uint64
	for i := from; i < from+n; i++ {
		last = f.say(t, "", fmt.Sprintf("I prefer FACT-%02d. %s", i, strings.Repeat("z", pad)))
	}
	return last
}

// TestLongBatchCommitsInConsecutiveParts: a batch over MaxBatch is
// committed in consecutive parts, each announced, that together cover
// every record once; the model sees each message exactly once, the commit
// record ends at the session's last record, and a commit after it has
// nothing new.
func TestLongBatchCommitsInConsecutiveParts(t *testing.T) {
	f := newFixture(t, Config{MaxBatch: 1000})
	a := f.watch(t)
	f.model.setPlan(factPlan)
	f.start(t, "u1", nil)
	f.facts(t, 1, 12, 280)
	last := f.end(t)
	ctx := context.Background()
	out, err := f.c.commit(ctx, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded})
	if err != nil || !out.Success || out.FromSeq != 1 || out.ToSeq != last || out.Messages != 12 {
		t.Fatalf("merged outcome %+v, %v; want records 1-%d, 12 messages", out, err, last)
	}
	calls := len(f.model.requests())
	firsts := 0 // one per part
	for _, req := range f.model.requests() {
		if len(req.Messages) == 1 {
			firsts++
		}
	}
	waitAnnounced(t, a, firsts)
	parts := a.list()
	if len(parts) < 4 || len(parts) != firsts {
		t.Fatalf("%d parts announced for %d extractions; want 12 messages of ~300 characters in parts of at most 1,000", len(parts), firsts)
	}
	for i, p := range parts {
		if !p.Success || (i > 0 && p.FromSeq != parts[i-1].ToSeq+1) {
			t.Fatalf("part %d: %+v after %+v", i, p, parts[max(i-1, 0)])
		}
	}
	for i := 1; i <= 12; i++ {
		if n := shown(f.model.requests())[fmt.Sprintf("FACT-%02d", i)]; n != 1 {
			t.Errorf("FACT-%02d shown %d times, want once", i, n)
		}
	}
	if doc := f.docs(t, "acme", "u1")["self/preferences"]; strings.Count(doc, "FACT-") != 12 {
		t.Errorf("preferences hold %d facts, want 12:\n%s", strings.Count(doc, "FACT-"), doc)
	}
	if rec := f.record(t); rec.LastSeq != last || rec.Commits != len(parts) {
		t.Errorf("commit record %+v, want up to %d after %d commits", rec, last, len(parts))
	}
	if _, err := f.c.commit(ctx, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonExplicit}); !errors.Is(err, errNothingNew) {
		t.Fatalf("a second commit: %v, want errNothingNew", err)
	}
	if n := len(f.model.requests()); n != calls {
		t.Fatalf("a commit with nothing new called the model (%d calls, then %d)", calls, n)
	}
}

// TestCommitStopsAtItsCommitPoint: a commit queued at a compaction covers
// the records up to it and no further; the next commit starts after it.
func TestCommitStopsAtItsCommitPoint(t *testing.T) {
	f := newFixture(t, Config{})
	f.model.setPlan(factPlan)
	f.start(t, "u1", nil)
	f.facts(t, 1, 3, 0)
	compacted := f.add(t, f.s.Compacted(f.id(), events.SessionCompacted{Trigger: "auto"}))
	f.facts(t, 4, 2, 0)
	last := f.end(t)
	ctx := context.Background()
	out, err := f.c.commit(ctx, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonCompaction, upTo: compacted})
	if err != nil || out.ToSeq != compacted || out.Messages != 3 || f.record(t).LastSeq != compacted {
		t.Fatalf("commit at the compaction: %+v, %v; want records up to %d, 3 messages", out, err, compacted)
	}
	out, err = f.c.commit(ctx, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded, upTo: last})
	if err != nil || out.FromSeq != compacted+1 || out.ToSeq != last || out.Messages != 2 {
		t.Fatalf("commit at the end: %+v, %v; want records %d-%d, 2 messages", out, err, compacted+1, last)
	}
	for fact, n := range shown(f.model.requests()) {
		if n != 1 {
			t.Errorf("%s shown %d times", fact, n)
		}
	}
}

// TestFailedPartLeavesItsBatch: when a later part of a long commit fails,
// the parts before it stay committed, the failure is announced and
// returned with the outcome so far, and the commit record stays at the
// last committed part, so the next attempt commits exactly the rest.
func TestFailedPartLeavesItsBatch(t *testing.T) {
	f := newFixture(t, Config{MaxBatch: 1000})
	a := f.watch(t)
	f.model.setPlan(factPlan)
	f.model.onResults = func(llm.Request) { f.model.setFailing(-1) } // after the first part's writes
	f.start(t, "u1", nil)
	f.facts(t, 1, 8, 280)
	last := f.end(t)
	ctx := context.Background()
	out, err := f.c.commit(ctx, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded})
	if !errors.Is(err, errFailed) || !errors.Is(err, llm.ErrRetryable) || out == nil || out.Success {
		t.Fatalf("a commit whose second part fails: %+v, %v", out, err)
	}
	waitAnnounced(t, a, 2)
	first, failed := a.list()[0], a.list()[1]
	if !first.Success || failed.Success || failed.FromSeq != first.ToSeq+1 || !strings.Contains(failed.Error, "529") {
		t.Fatalf("announced %+v then %+v", first, failed)
	}
	if rec := f.record(t); rec.LastSeq != first.ToSeq {
		t.Fatalf("commit record at %d, want the first part's end %d", rec.LastSeq, first.ToSeq)
	}
	f.model.onResults = nil
	f.model.setFailing(0)
	out, err = f.c.commit(ctx, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded})
	if err != nil || out.FromSeq != first.ToSeq+1 || out.ToSeq != last {
		t.Fatalf("the next attempt: %+v, %v; want records %d-%d", out, err, first.ToSeq+1, last)
	}
	if doc := f.docs(t, "acme", "u1")["self/preferences"]; strings.Count(doc, "FACT-") != 8 {
		t.Fatalf("preferences hold %d of 8 facts:\n%s", strings.Count(doc, "FACT-"), doc)
	}
}
