package memory_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// hostileTranscript decodes bytes into window entries that break every rule
// the model APIs have, on purpose: on top of fuzzTranscript's kinds it adds
// crash-orphaned tool_use records, tool results for calls never made,
// duplicate tool_use ids, blank texts (also inside results), unsigned
// thinking, thinking in user records, results in assistant records, tool
// uses without input, user text recorded before the results of its turn,
// and messages with an unknown role. Ids come from small pools so they
// collide.
func hostileTranscript(data []byte) []memory.WindowEntry {
	es := fuzzTranscript(data)
	for i, b := range data {
		if b%3 != 0 || es[i].Message == nil {
			continue // keep two thirds of fuzzTranscript's records as they are
		}
		es[i].Message = hostileMessage(i, int(b/3))
	}
	return es
}

func hostileMessage(i, p int) *events.Message {
	id := func(k int) string { return fmt.Sprintf("t%d", k%6) }
	text := events.Block{Type: events.BlockText, Text: fmt.Sprintf("note %d about port %d", i, 8000+p)}
	m := &events.Message{UUID: fmt.Sprint("h", i), Role: events.RoleAssistant, MessageID: fmt.Sprintf("m%d", p%3)}
	switch p % 10 {
	case 0: // a call the agent died in
		m.Content = events.Content{{Type: events.BlockToolUse, ID: fmt.Sprintf("orphan%d", i), Name: "Bash", Input: json.RawMessage(`{"command":"make"}`)}}
	case 1:
		m.Role = events.RoleUser
		m.Content = events.Content{{Type: events.BlockToolResult, ToolUseID: fmt.Sprintf("never%d", p), Content: events.Content{text}}}
	case 2:
		m.Content = events.Content{text, {Type: events.BlockText, Text: "  \n"}, {Type: events.BlockToolUse, ID: id(p), Name: "Edit", Input: json.RawMessage(`{"file_path":"a.go"}`)}}
	case 3:
		m.Content = events.Content{{Type: events.BlockThinking, Thinking: "considering"}, text}
		if p%20 == 13 { // a signed thinking-only record, as Claude Code writes them
			m.Content = events.Content{{Type: events.BlockThinking, Thinking: "considering", Signature: "sig"}}
		}
	case 4:
		m.Role = events.RoleUser
		m.Content = events.Content{{Type: events.BlockThinking, Thinking: "x", Signature: "s"}, text}
	case 5:
		m.Content = events.Content{{Type: events.BlockToolResult, ToolUseID: id(p)}, text}
	case 6:
		m.Content = events.Content{{Type: events.BlockToolUse, ID: id(p), Name: "Read"}}
	case 7:
		m.Role = events.RoleUser
		m.Content = events.Content{text, {Type: events.BlockToolResult, ToolUseID: id(p), Content: events.Content{{Type: events.BlockText, Text: ""}}}}
	case 8:
		m.Role = "system"
		m.Content = events.Content{text}
	case 9:
		m.Role = events.RoleUser
		m.Content = events.Content{{Type: events.BlockText, Text: fmt.Sprintf("actually, use port %d instead", 9000+p)}}
	}
	return m
}

// servedContext plans a compaction of es with notes covering the records up
// to summarized (-1: resumed) and returns the context it would serve — the
// summary message, then the kept messages with the request's context edits
// applied — or nil when the plan is not served.
func servedContext(es []memory.WindowEntry, summarized int, clear bool) []*events.Message {
	in := memory.CompactInput{HasMemory: true, Notes: "# Session Title\n_t_\nport work\n", SummarizedIndex: -1, Entries: es, Complete: true,
		Window: memory.WindowConfig{MinTokens: 200, MinTextMessages: 2, MaxTokens: 4000}, Threshold: 1 << 40, ContextTokens: 1 << 30}
	if summarized >= 0 && summarized < len(es) && es[summarized].Message != nil && es[summarized].Message.UUID != "" {
		in.LastSummarizedID, in.SummarizedIndex = es[summarized].Message.UUID, summarized
	}
	all := make([]*events.Message, 0, len(es))
	for _, e := range es {
		all = append(all, e.Message)
	}
	in.Trail = memory.FoldTrail(nil, all, nil) // the served summary carries the trail
	p := memory.PlanCompaction(in)
	if !memory.Served(p.Outcome) {
		return nil
	}
	msgs := []*events.Message{{UUID: "summary", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: p.Summary}}}}
	kept := make([]memory.WindowEntry, 0, len(p.Window.Kept))
	for _, i := range p.Window.Kept {
		kept = append(kept, es[i])
	}
	var cleared []events.ClearedBlock
	if clear {
		edits := []events.ContextEdit{{Type: events.EditClearThinking}, {Type: events.EditClearToolUses, ClearToolInputs: true}}
		cp := memory.PlanContextEdits(memory.ContextEditInput{Entries: kept, Tokens: 1 << 30, Edits: edits})
		cleared = cp.Clear
	}
	for _, e := range kept {
		m := e.Message
		if len(cleared) > 0 {
			m = memory.ApplyClearing(m, cleared)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// checkServed asserts the served-context property on msgs: after
// RepairContext it validates, and every non-blank user text of the kept
// user and assistant messages is still there.
func checkServed(t *testing.T, msgs []*events.Message) {
	t.Helper()
	served, _ := memory.RepairContext(msgs)
	out := make([]*events.Message, len(served))
	for i, s := range served {
		out[i] = s.Message
	}
	if err := memory.ValidateContext(out); err != nil {
		t.Fatalf("served context invalid after repair: %v\n%s", err, dumpContext(out))
	}
	want, got := userTexts(msgs), userTexts(out)
	for s, n := range want {
		if got[s] < n {
			t.Fatalf("repair lost the user's text %q", s)
		}
	}
	if again, repairs := memory.RepairContext(out); len(repairs) > 0 || len(again) != len(out) {
		t.Fatalf("repair is not idempotent: %+v", repairs)
	}
}

func userTexts(msgs []*events.Message) map[string]int {
	n := map[string]int{}
	for _, m := range msgs {
		if m.Role != events.RoleUser {
			continue
		}
		for _, b := range m.Content {
			if b.Type == events.BlockText && strings.TrimSpace(b.Text) != "" {
				n[b.Text]++
			}
		}
	}
	return n
}

func dumpContext(msgs []*events.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&b, "%d %s:", i, m.Role)
		for _, bl := range m.Content {
			fmt.Fprintf(&b, " %s(%s%s)", bl.Type, bl.ID, bl.ToolUseID)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestServedContextProperty is the property over random transcripts, a
// bounded count in every test run: whatever the transcript holds, the
// context a served compaction hands out — kept as planned, context edits
// applied, repaired once — passes every structural rule and keeps what the
// user said.
func TestServedContextProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 2026))
	served := 0
	for iter := range 3000 {
		data := make([]byte, 1+rng.IntN(120))
		for i := range data {
			data[i] = byte(rng.UintN(256))
		}
		es := hostileTranscript(data)
		msgs := servedContext(es, rng.IntN(len(es)+1)-1, iter%2 == 0)
		if msgs == nil {
			continue
		}
		served++
		t.Run(fmt.Sprint(iter), func(t *testing.T) { checkServed(t, msgs) })
	}
	if served < 500 {
		t.Fatalf("only %d of 3000 random transcripts were served: the property tested too little", served)
	}
}

// FuzzServedContext is the same property under the fuzzer (.ci/fuzz-smoke
// runs it for a few seconds).
func FuzzServedContext(f *testing.F) {
	f.Add([]byte{0, 2, 9, 3, 0, 27, 1, 0}, 2, true)
	f.Add([]byte{0, 2, 30, 60, 1, 3, 90, 0, 15, 3}, -1, false)
	f.Fuzz(func(t *testing.T, data []byte, summarized int, clear bool) {
		if len(data) == 0 || len(data) > 300 {
			return
		}
		if msgs := servedContext(hostileTranscript(data), summarized, clear); msgs != nil {
			checkServed(t, msgs)
		}
	})
}

// FuzzRepairContext repairs arbitrary message lists that start with a
// summary, not only the ones a compaction plan keeps.
func FuzzRepairContext(f *testing.F) {
	f.Add([]byte{0, 3, 6, 9, 12, 15, 18, 21, 24, 27})
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs := []*events.Message{{UUID: "summary", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "notes"}}}}
		for i, b := range data {
			if i >= 200 {
				break
			}
			msgs = append(msgs, hostileMessage(i, int(b)))
		}
		checkServed(t, msgs)
	})
}
