package memory_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// fuzzTranscript decodes bytes into window entries: each byte picks a kind of
// record (user request, streamed assistant text, tool_use, tool_result,
// subagent record, compaction boundary, other lifecycle record, mixed user
// record, large assistant text) and a small parameter (tool and message ids
// collide on purpose).
func fuzzTranscript(data []byte) []memory.WindowEntry {
	es := make([]memory.WindowEntry, 0, len(data))
	text := func(n int) events.Block {
		return events.Block{Type: events.BlockText, Text: fuzzWords[:min(n*5, len(fuzzWords))]}
	}
	for i, b := range data {
		kind, p := int(b%9), int(b/9)
		e := memory.WindowEntry{Seq: uint64(i + 1)}
		switch kind {
		case 0:
			e.Message = &events.Message{UUID: fmt.Sprint(i), Role: events.RoleUser, Content: events.Content{text(1 + p*40)}}
		case 1:
			e.Message = &events.Message{UUID: fmt.Sprint(i), Role: events.RoleAssistant, MessageID: fmt.Sprintf("m%d", p%4), Content: events.Content{text(1 + p*30)}}
		case 2:
			e.Message = &events.Message{UUID: fmt.Sprint(i), Role: events.RoleAssistant, MessageID: fmt.Sprintf("m%d", p%5),
				Content: events.Content{{Type: events.BlockToolUse, ID: fmt.Sprintf("t%d", p%6), Name: "Bash", Input: json.RawMessage(`{}`)}}}
		case 3:
			e.Message = &events.Message{UUID: fmt.Sprint(i), Role: events.RoleUser,
				Content: events.Content{{Type: events.BlockToolResult, ToolUseID: fmt.Sprintf("t%d", p%7), Content: events.Content{text(p * 50)}}}}
		case 4:
			e.Message = &events.Message{UUID: fmt.Sprint(i), Role: []string{events.RoleUser, events.RoleAssistant}[p%2], QuerySource: events.QuerySubagent,
				Content: events.Content{text(10), {Type: events.BlockToolUse, ID: fmt.Sprintf("t%d", p%6), Name: "Task"}}}
		case 5:
			e.Boundary, e.PostTokens = true, int64(p*100)
		case 6:
			// another lifecycle record (compacting, ended): no message
		case 7:
			e.Message = &events.Message{UUID: fmt.Sprint(i), Role: events.RoleUser,
				Content: events.Content{text(3), {Type: events.BlockToolResult, ToolUseID: fmt.Sprintf("t%d", p%6)}}}
		case 8:
			e.Message = &events.Message{UUID: fmt.Sprint(i), Role: events.RoleAssistant, Content: events.Content{text(2000 + p*200)}}
		}
		es = append(es, e)
	}
	return es
}

// fuzzWords is sliced for message texts (no allocation per record).
var fuzzWords = strings.Repeat("word ", 8000)

func isMain(e *memory.WindowEntry) bool { return e.Message != nil && e.Message.IsMain() }

// FuzzSelectWindow checks compaction window selection on arbitrary
// transcripts, starts and bounds: deterministic; the kept records are every
// main-thread message of a suffix; no kept tool_result lacks its tool_use;
// streamed responses are kept whole; the kept tokens never exceed the
// maximum unless the window overflows, and overflow only when the
// unsummarized messages alone do not fit; the latest user request is kept or
// quoted; every message after the summarized point is kept unless dropped
// for an orphan; a complete transcript never asks for earlier records.
func FuzzSelectWindow(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 1, 0, 2, 3, 8}, 4, true, uint16(100), uint8(2), uint16(5000))
	f.Add([]byte{0, 2, 11, 3, 12, 5, 0, 3, 1, 4, 7}, 3, false, uint16(0), uint8(0), uint16(0))
	f.Add([]byte{3, 0, 1, 0, 1, 0, 1}, 7, true, uint16(10), uint8(1), uint16(20))
	f.Add([]byte{0, 8, 8, 8, 1, 10, 19, 2, 3, 5, 0, 6, 2, 3}, 10, true, uint16(50000), uint8(9), uint16(60000))
	f.Add([]byte{}, 0, true, uint16(1), uint8(1), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, start int, complete bool, minTok uint16, minText uint8, maxTok uint16) {
		if len(data) > 400 {
			data = data[:400]
		}
		es := fuzzTranscript(data)
		n := len(es)
		if start < 0 {
			start = -start
		}
		if start < 0 { // math.MinInt
			start = 0
		}
		start %= n + 1
		in := memory.WindowInput{Entries: es, Start: start, Complete: complete}
		cfg := memory.WindowConfig{MinTokens: int64(minTok), MinTextMessages: int(minText % 16), MaxTokens: int64(maxTok) * 4}
		w := memory.SelectWindow(in, cfg)
		if again := memory.SelectWindow(in, cfg); !reflect.DeepEqual(w, again) {
			t.Fatalf("not deterministic:\n%+v\n%+v", w, again)
		}

		if w.Start < 0 || w.Start > n {
			t.Fatalf("start %d outside [0,%d]", w.Start, n)
		}
		var want []int
		var tokens int64
		for i := w.Start; i < n; i++ {
			if isMain(&es[i]) {
				want = append(want, i)
				tokens += memory.EstimateMessage(es[i].Message)
			}
		}
		if !reflect.DeepEqual(w.Kept, want) && !(len(w.Kept) == 0 && len(want) == 0) {
			t.Fatalf("kept %v, want every main message from %d: %v", w.Kept, w.Start, want)
		}
		if w.Tokens != memory.Padded(tokens) {
			t.Fatalf("tokens %d, kept messages estimate %d padded %d", w.Tokens, tokens, memory.Padded(tokens))
		}
		if maxTokens := cfg.WithDefaults().MaxTokens; w.Tokens > maxTokens && !w.Overflow {
			t.Fatalf("kept %d tokens, over the maximum %d, without overflow", w.Tokens, maxTokens)
		}
		// Overflow only when the smallest window holding every unsummarized
		// message (with the records they need) does not fit.
		if w.Overflow && ((w.Start > start && w.Dropped == 0) || w.Tokens <= cfg.WithDefaults().MaxTokens) {
			t.Fatalf("overflow with start %d (unsummarized from %d), %d tokens within %d", w.Start, start, w.Tokens, cfg.WithDefaults().MaxTokens)
		}

		floor := -1
		for i := range es {
			if es[i].Boundary {
				floor = i
			}
		}
		if w.Floor != floor {
			t.Fatalf("floor %d, last boundary at %d", w.Floor, floor)
		}

		// Tool pairs and streamed responses.
		kept := map[int]bool{}
		keptUses := map[string]bool{}
		keptMsgIDs := map[string]bool{}
		allUses := map[string]bool{}
		for _, i := range w.Kept {
			kept[i] = true
			m := es[i].Message
			if m.MessageID != "" {
				keptMsgIDs[m.MessageID] = true
			}
			for _, b := range m.Content {
				if b.Type == events.BlockToolUse {
					keptUses[b.ID] = true
				}
			}
		}
		for i := range es {
			if isMain(&es[i]) {
				for _, b := range es[i].Message.Content {
					if b.Type == events.BlockToolUse {
						allUses[b.ID] = true
					}
				}
			}
		}
		for _, i := range w.Kept {
			for _, b := range es[i].Message.Content {
				if b.Type != events.BlockToolResult || keptUses[b.ToolUseID] {
					continue
				}
				if complete || allUses[b.ToolUseID] {
					t.Fatalf("record %d keeps a tool_result for %s without its tool_use (window %+v)", i, b.ToolUseID, w)
				}
				if !w.NeedEarlier {
					t.Fatalf("record %d keeps a tool_result for %s whose tool_use is not in view, without asking for earlier records", i, b.ToolUseID)
				}
			}
		}
		for i := range es {
			if isMain(&es[i]) && es[i].Message.MessageID != "" && keptMsgIDs[es[i].Message.MessageID] && !kept[i] {
				t.Fatalf("streamed response %s split: record %d not kept", es[i].Message.MessageID, i)
			}
		}

		// The latest user request.
		latest := -1
		for i := n - 1; i >= 0; i-- {
			if isMain(&es[i]) && memory.IsUserRequest(es[i].Message) {
				latest = i
				break
			}
		}
		if w.LatestRequest != latest {
			t.Fatalf("latest request %d, want %d", w.LatestRequest, latest)
		}
		if latest >= 0 && !kept[latest] && !w.RequestOutside {
			t.Fatalf("latest user request %d dropped silently (start %d)", latest, w.Start)
		}
		if w.RequestOutside != (latest >= 0 && !kept[latest]) || (w.RequestOutside && (len(w.Quoted) == 0 || w.Quoted[0] != latest)) {
			t.Fatalf("request %d: outside %v, quoted %v, kept %v", latest, w.RequestOutside, w.Quoted, latest >= 0 && kept[latest])
		}

		// Everything after the summarized point is kept unless dropped, or
		// quoted: a latest request too large to keep, first of the
		// unsummarized records, is quoted and the window starts after it.
		pastQuoted := w.RequestOutside && latest >= min(max(start, 0), n) && w.Start > latest
		if w.Dropped == 0 && w.Start > start && !pastQuoted {
			t.Fatalf("window starts at %d, after the first unsummarized record %d, with nothing dropped", w.Start, start)
		}
		if complete && w.NeedEarlier {
			t.Fatal("a complete transcript asks for earlier records")
		}
	})
}
