package longtermsvc

import (
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

// TestBatchTextBounded keeps the newest messages that fit, and the newest
// one even when it alone is over the budget (a paste, a file), cut to its
// beginning and end: the model's input stays bounded either way.
func TestBatchTextBounded(t *testing.T) {
	msg := func(role, text string) *events.Message {
		return &events.Message{Role: role, Content: events.Content{{Type: events.BlockText, Text: text}}}
	}
	batch := []*events.Message{msg("user", "I prefer tabs"), msg("assistant", "noted"), msg("user", "my name is Ada")}
	got := batchText(batch, 1000)
	for _, want := range []string{"[0] user: I prefer tabs", "[2] user: my name is Ada"} {
		if !strings.Contains(got, want) {
			t.Fatalf("batch text lacks %q:\n%s", want, got)
		}
	}
	paste := "START " + strings.Repeat("0123456789", 100_000) + " FINISH"
	got = batchText(append(batch, msg("user", paste)), 10_000)
	if len(got) > 11_000 || !strings.Contains(got, "[3] user: START") || !strings.Contains(got, "FINISH") || !strings.Contains(got, "omitted by Recall") {
		t.Fatalf("a 1 MB newest message gave %d bytes of batch text (budget 10,000): %.200s", len(got), got)
	}
	if !strings.Contains(got, "(3 earlier messages left out)") {
		t.Fatalf("the older messages are not said to be left out: %.200s", got)
	}
}
