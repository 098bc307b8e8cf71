package eval

import (
	"context"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

func prepare(t *testing.T, tokens int64) *Prepared {
	t.Helper()
	p, err := Prepare(sessiongen.Generate(sessiongen.Spec{Seed: 11, Tokens: tokens}), DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Truncation keeps a suffix of the current context within the budget that
// starts with no orphaned tool result.
func TestTruncate(t *testing.T) {
	p := prepare(t, 240000)
	cur := p.current()
	for _, budget := range []int64{5000, 20000, 52000} {
		c := Truncate(p, budget)
		if c.Tokens > budget || c.Tokens != messagesTokens(c.Kept) || len(c.Kept) == 0 {
			t.Fatalf("budget %d: %d tokens (%d counted) in %d messages", budget, c.Tokens, messagesTokens(c.Kept), len(c.Kept))
		}
		if c.Kept[len(c.Kept)-1].UUID != cur[len(cur)-1].UUID {
			t.Fatalf("budget %d: the newest message is not kept", budget)
		}
		if orphanResults(c.Kept) {
			t.Fatalf("budget %d: the context starts with a tool result whose call was cut", budget)
		}
	}
	if n := len(Truncate(p, 1<<40).Kept); n != len(cur) {
		t.Fatalf("an unbounded budget keeps %d of %d messages", n, len(cur))
	}
}

// The reference compacts a session without an earlier compaction from its
// notes and a window of 10,000–40,000 tokens; after a compaction its
// summarized id predates the current context and it gives up.
func TestReference(t *testing.T) {
	ctx := context.Background()
	short := prepare(t, 100000)
	c, err := Reference(ctx, short, llm.NewOffline(), 167000)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Served || c.Outcome != memory.OutcomeSessionMemory || len(c.Kept) == 0 {
		t.Fatalf("short session: %s (%s)", c.Outcome, c.Reason)
	}
	if kept := messagesTokens(c.Kept); kept < refMinTokens || kept > refMaxTokens+20000 {
		t.Errorf("kept %d tokens", kept)
	}
	if orphanResults(c.Kept) {
		t.Error("the kept messages start with an orphaned tool result")
	}
	long := prepare(t, 240000)
	if long.Compactions == 0 {
		t.Fatal("the long session has no earlier compaction")
	}
	c, err = Reference(ctx, long, llm.NewOffline(), 167000)
	if err != nil {
		t.Fatal(err)
	}
	if c.Served || c.Outcome != memory.OutcomeSummarizedIDNotFound {
		t.Fatalf("long session: %s (%s), want %s", c.Outcome, c.Reason, memory.OutcomeSummarizedIDNotFound)
	}
}

func TestFromReply(t *testing.T) {
	kept := events.Message{UUID: "u1", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "Next: stream the rows."}}}
	e := eventtest.NewSession("", "s1").Message("1", kept)
	r := &events.CompactReply{Outcome: memory.OutcomeSessionMemory, Served: true, TokensAfter: 1234,
		Summary: &events.SummaryMessage{Message: events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "# Worklog\n- did things"}}}},
		Kept:    []event.Event{e}}
	c, err := FromReply(r)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tokens != 1234 || len(c.Kept) != 1 || c.Kept[0].UUID != "u1" {
		t.Fatalf("context %+v", c)
	}
	if v := Check(&sessiongen.Fact{Expect: []string{"did things"}}, c.Text()); !v.Pass {
		t.Fatalf("summary not in the text: %s", v.Why)
	}
	if v := Check(&sessiongen.Fact{Expect: []string{"Next: stream the rows."}, Verbatim: true}, c.Text()); !v.Pass {
		t.Fatalf("kept message not in the text: %s", v.Why)
	}
	c, err = FromReply(&events.CompactReply{Outcome: memory.OutcomeThresholdExceeded, Reason: "too big"})
	if err != nil || c.Served || c.Text() != "" {
		t.Fatalf("not served: %+v, %v", c, err)
	}
}
