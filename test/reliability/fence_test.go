package reliability

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm/llmtest"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
)

// TestShellCommentInNotesIsNotASection: a real model's edit puts a shell
// snippet with a "# " comment into Workflow, inside a fenced code block.
// That is body text, not a new section: the edit lands on its first try.
func TestShellCommentInNotesIsNotASection(t *testing.T) {
	h := newHarness(t)
	fake := llmtest.NewAnthropic(t)
	own := "recall://" + tenantA + "/fence/memory.md"
	const desc = "_What bash commands are usually run and in what order? How to interpret their output if not obvious?_"
	snippet := desc + "\n```sh\n# build first, then the tests\nmake build\ngo test ./...\n```\n"
	fake.SetResponder(func(call int, body []byte) llmtest.Reply {
		if call == 0 {
			b, _ := json.Marshal(map[string]string{"file_path": own, "old_string": desc, "new_string": snippet})
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "Edit", Input: string(b)}}}
		}
		return llmtest.Reply{Text: "done"}
	})
	h.TweakExtractor = func(c *extractorsvc.Config) { c.Provider, c.LLMConfig = nil, fakeAnthropic(fake, 10*time.Second) }
	h.startTrigger()
	h.startExtractor()
	fence := eventtest.NewSession("", "fence")
	publishSession(t, h, tenantA, []event.Event{
		fence.User("f1", "How do I build and test this?"),
		fence.Assistant("f2", "Run make build, then go test ./..."),
	})
	res, err := manualExtract(h, tenantA, "fence", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success {
		t.Fatalf("extraction failed: %+v", res)
	}
	memKV, err := h.js.KeyValue(context.Background(), events.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := readMemory(t, memKV, events.MemoryKey(tenantA, "fence"))
	if !strings.Contains(rec.Notes, "# build first, then the tests") {
		t.Fatalf("the edit with a shell comment did not land:\n%s", rec.Notes)
	}
	if n := fake.Calls(); n != 1 {
		t.Fatalf("%d model calls, want 1: the edit should land on its first try", n)
	}
}
