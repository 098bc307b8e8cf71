package longtermsvc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/pkg/events"
)

// TestBatchPartsCoverEveryMessage: a batch over the budget is cut into
// consecutive parts, oldest first; each part fits the budget, and together
// they cover every record once, so the commit record never passes over a
// message the model did not see.
func TestBatchPartsCoverEveryMessage(t *testing.T) {
	f := newFixture(t, Config{MaxBatch: 1000})
	var last uint64
	for i := range 12 {
		last = f.say(t, "", fmt.Sprintf("fact %02d %s", i, strings.Repeat("x", 280)))
		if i == 5 {
			last = f.add(t, f.s.Compacted(f.id(), events.SessionCompacted{}))
		}
	}
	ctx := context.Background()
	from, seen, parts := uint64(1), 0, 0
	for from <= last {
		part, err := f.c.batch(ctx, "acme", "s1", from, last)
		if err != nil {
			t.Fatal(err)
		}
		text := batchText(part.texts)
		if len(text) > 1000+len("<batch>\n\n</batch>")+2*len(part.texts) || len(part.msgs) == 0 || part.end < from {
			t.Fatalf("part from %d: %d messages, %d characters, ends at %d", from, len(part.msgs), len(text), part.end)
		}
		for i := range part.msgs {
			if want := fmt.Sprintf("[%d] user: fact %02d", i, seen); !strings.Contains(text, want) {
				t.Fatalf("part from %d lacks %q:\n%.300s", from, want, text)
			}
			seen++
		}
		from, parts = part.end+1, parts+1
	}
	if seen != 12 || parts < 4 {
		t.Fatalf("%d parts covered %d messages, want every one of 12 in at least 4 parts", parts, seen)
	}
}

// TestBatchClipsAMessageAloneOverTheBudget: a message longer than the whole
// budget (a paste, a file) is a part of its own, cut to its beginning and
// end; the messages after it go to the next part.
func TestBatchClipsAMessageAloneOverTheBudget(t *testing.T) {
	f := newFixture(t, Config{MaxBatch: 10_000})
	f.say(t, "", "I prefer tabs")
	paste := f.say(t, "", "START "+strings.Repeat("0123456789", 100_000)+" FINISH")
	last := f.say(t, "", "my name is Ada")
	ctx := context.Background()
	first, err := f.c.batch(ctx, "acme", "s1", 1, last)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.msgs) != 1 || first.end != paste-1 {
		t.Fatalf("first part: %d messages up to %d, want the one before the paste (up to %d)", len(first.msgs), first.end, paste-1)
	}
	second, err := f.c.batch(ctx, "acme", "s1", paste, last)
	if err != nil {
		t.Fatal(err)
	}
	got := batchText(second.texts)
	if len(second.msgs) != 1 || second.end != paste || len(got) > 11_000 || !strings.Contains(got, "[0] user: START") ||
		!strings.Contains(got, "FINISH") || !strings.Contains(got, "omitted by Recall") {
		t.Fatalf("the paste's part: %d messages up to %d, %d characters: %.200s", len(second.msgs), second.end, len(got), got)
	}
}

// TestStartedFoundPastTheFirstRecords: a session's start is found wherever
// it is, not only among its first records; a session without one has no
// user.
func TestStartedFoundPastTheFirstRecords(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	for i := range 40 {
		f.say(t, "", fmt.Sprintf("message %d", i))
	}
	if got, err := f.c.started(ctx, "acme", "s1"); err != nil || got != nil {
		t.Fatalf("a session without a start: %+v, %v", got, err)
	}
	f.start(t, "u-7", nil)
	got, err := f.c.started(ctx, "acme", "s1")
	if err != nil || got == nil || got.UserID != "u-7" {
		t.Fatalf("the start after record 40: %+v, %v", got, err)
	}
}

// TestRetryDelayDoubles: the backoff of a failing commit starts at
// RetryBackoff and doubles per delivery, at most 32 times it.
func TestRetryDelayDoubles(t *testing.T) {
	cfg := Config{RetryBackoff: time.Second}
	for _, tc := range []struct {
		delivered int
		want      time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 32 * time.Second}, {50, 32 * time.Second}} {
		if got := cfg.retryDelay(tc.delivered); got != tc.want {
			t.Errorf("retryDelay(%d) = %v, want %v", tc.delivered, got, tc.want)
		}
	}
}

// TestMergedParts: an explicit commit answers its parts as one outcome —
// the first part's start to the last part's end, every write, skips
// counted together, the last part's success.
func TestMergedParts(t *testing.T) {
	first := &events.MemoryCommitted{FromSeq: 2, ToSeq: 9, Messages: 4, Phases: []string{"long_term"}, AllowedPeers: []string{"bob"},
		Written: []events.MemoryWrite{{Target: "self", Type: "profile"}}, Skipped: []events.MemorySkip{{Reason: "unsafe_peer", Type: "profile", Count: 2}},
		Usage: events.TokenUsage{InputTokens: 10}, Success: true}
	second := &events.MemoryCommitted{FromSeq: 10, ToSeq: 14, Messages: 3, Phases: []string{"long_term", "execution"}, AllowedPeers: []string{"bob", "carol"},
		Written: []events.MemoryWrite{{Target: "peer/carol", Type: "profile"}}, Skipped: []events.MemorySkip{{Reason: "unsafe_peer", Type: "profile", Count: 1}, {Reason: "self_disabled", Count: 1}},
		Usage: events.TokenUsage{InputTokens: 5}, Success: false, Error: "commit failed"}
	if got := merged(nil, nil); got != nil {
		t.Fatalf("no parts: %+v", got)
	}
	got := merged(merged(nil, first), second)
	if got.FromSeq != 2 || got.ToSeq != 14 || got.Messages != 7 || len(got.Written) != 2 || got.Usage.InputTokens != 15 ||
		strings.Join(got.Phases, ",") != "long_term,execution" || strings.Join(got.AllowedPeers, ",") != "bob,carol" || got.Success || got.Error == "" {
		t.Fatalf("merged: %+v", got)
	}
	if len(got.Skipped) != 2 || got.Skipped[0].Count != 3 || got.Skipped[1].Reason != "self_disabled" {
		t.Fatalf("merged skips: %+v", got.Skipped)
	}
}
