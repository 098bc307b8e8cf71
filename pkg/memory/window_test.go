package memory_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// updateGolden is -update. It is looked up first so that other test files of
// this binary may register the same flag.
var updateGolden = func() *bool {
	if f := flag.Lookup("update"); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			if p, ok := g.Get().(bool); ok {
				b := p
				return &b
			}
		}
	}
	return flag.Bool("update", false, "rewrite golden files")
}()

// winFillerText backs winFiller.
var winFillerText = strings.Repeat("lorem ipsum dolor sit amet ", 4000)

// winFiller returns text of exactly n estimated tokens (4n characters).
func winFiller(n int) string {
	for len(winFillerText) < 4*n {
		winFillerText += winFillerText
	}
	return winFillerText[:4*n]
}

// winScript is a parsed window test transcript. Each line of the script is
// one record:
//
//	user|asst|sub|boundary [attrs]
//
// with attrs text=N think=N use=ID:N result=ID:N id=MSGID usage=N post=N
// and "*" marking the last summarized record. Header lines: "config
// min=.. texts=.. max=..", "partial" (not complete), "resumed" (nothing
// summarized). "#" starts a comment.
type winScript struct {
	entries    []memory.WindowEntry
	summarized int
	resumed    bool
	partial    bool
	cfg        memory.WindowConfig
	lines      []string
}

func parseWinScript(t *testing.T, src string) winScript {
	t.Helper()
	s := winScript{summarized: -1, cfg: memory.DefaultWindowConfig()}
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case "config":
			for _, a := range f[1:] {
				k, v, _ := strings.Cut(a, "=")
				n, _ := strconv.Atoi(v)
				switch k {
				case "min":
					s.cfg.MinTokens = int64(n)
				case "texts":
					s.cfg.MinTextMessages = n
				case "max":
					s.cfg.MaxTokens = int64(n)
				}
			}
			continue
		case "partial":
			s.partial = true
			continue
		case "resumed":
			s.resumed = true
			continue
		}
		e := memory.WindowEntry{Seq: uint64(len(s.entries) + 1)}
		var m *events.Message
		switch f[0] {
		case "user":
			m = &events.Message{Role: events.RoleUser}
		case "asst":
			m = &events.Message{Role: events.RoleAssistant}
		case "sub":
			m = &events.Message{Role: events.RoleAssistant, QuerySource: events.QuerySubagent}
		case "boundary":
			e.Boundary = true
		default:
			t.Fatalf("script line %q: unknown kind", line)
		}
		for _, a := range f[1:] {
			if a == "*" {
				s.summarized = len(s.entries)
				continue
			}
			k, v, _ := strings.Cut(a, "=")
			id, num, hasID := strings.Cut(v, ":")
			if !hasID {
				num = v
			}
			n, _ := strconv.Atoi(num)
			switch k {
			case "text":
				m.Content = append(m.Content, events.Block{Type: events.BlockText, Text: winFiller(n)})
			case "think":
				m.Content = append(m.Content, events.Block{Type: events.BlockThinking, Thinking: winFiller(n)})
			case "use":
				in, _ := json.Marshal(map[string]string{"c": winFiller(n)})
				m.Content = append(m.Content, events.Block{Type: events.BlockToolUse, ID: id, Name: "Bash", Input: in})
			case "result":
				m.Content = append(m.Content, events.Block{Type: events.BlockToolResult, ToolUseID: id, Content: events.Content{{Type: events.BlockText, Text: winFiller(n)}}})
			case "id":
				m.MessageID = v
			case "usage":
				m.Usage = &events.Usage{InputTokens: int64(n)}
			case "post":
				e.PostTokens = int64(n)
			default:
				t.Fatalf("script line %q: unknown attribute %q", line, k)
			}
		}
		if m != nil {
			m.UUID = fmt.Sprintf("u%d", len(s.entries)+1)
			e.Message = m
		}
		s.entries = append(s.entries, e)
		s.lines = append(s.lines, line)
	}
	return s
}

func (s winScript) start() int {
	if s.resumed || s.summarized < 0 {
		return len(s.entries)
	}
	return s.summarized + 1
}

// render prints the script with the selection's marks, for golden files.
func (s winScript) render(w memory.Window) string {
	var b strings.Builder
	kept := map[int]bool{}
	for _, i := range w.Kept {
		kept[i] = true
	}
	for i, line := range s.lines {
		mark := "  "
		if kept[i] {
			mark = "K "
		} else if i >= w.Start {
			mark = "- "
		}
		var tags []string
		if i == w.Start {
			tags = append(tags, "start")
		}
		if i == w.Floor {
			tags = append(tags, "floor")
		}
		if i == w.LatestRequest {
			tags = append(tags, "request")
		}
		if i == s.summarized {
			tags = append(tags, "summarized")
		}
		fmt.Fprintf(&b, "%s%3d  %-50s %s\n", mark, i, line, strings.Join(tags, ","))
	}
	fmt.Fprintf(&b, "start=%d kept=%d tokens=%d text_messages=%d need_earlier=%v dropped=%d request_outside=%v quoted=%v overflow=%v\n",
		w.Start, len(w.Kept), w.Tokens, w.TextMessages, w.NeedEarlier, w.Dropped, w.RequestOutside, w.Quoted, w.Overflow)
	return b.String()
}

func TestSelectWindowGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/window/*.txt")
	if len(files) == 0 {
		t.Fatal("no window scripts in testdata/window")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txt")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s := parseWinScript(t, string(src))
			w := memory.SelectWindow(memory.WindowInput{Entries: s.entries, Start: s.start(), Complete: !s.partial}, s.cfg)
			checkWindowInvariants(t, s.entries, s.start(), w, !s.partial, s.cfg)
			got := s.render(w)
			golden := strings.TrimSuffix(file, ".txt") + ".golden"
			if *updateGolden {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("window differs from %s (go test -update rewrites it)\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

// checkWindowInvariants asserts the properties every selection must have.
func checkWindowInvariants(t *testing.T, es []memory.WindowEntry, start int, w memory.Window, complete bool, cfg memory.WindowConfig) {
	t.Helper()
	isMain := func(i int) bool { return es[i].Message != nil && es[i].Message.IsMain() }
	// Kept is exactly the main-thread messages from w.Start on: a suffix.
	var want []int
	for i := w.Start; i < len(es); i++ {
		if isMain(i) {
			want = append(want, i)
		}
	}
	if fmt.Sprint(want) != fmt.Sprint(w.Kept) {
		t.Fatalf("kept %v is not the main-thread suffix from %d (%v)", w.Kept, w.Start, want)
	}
	kept := map[int]bool{}
	uses := map[string]bool{}
	ids := map[string]bool{}
	for _, i := range w.Kept {
		kept[i] = true
		for _, b := range es[i].Message.Content {
			if b.Type == events.BlockToolUse {
				uses[b.ID] = true
			}
		}
		if id := es[i].Message.MessageID; id != "" {
			ids[id] = true
		}
	}
	if complete || !w.NeedEarlier {
		for _, i := range w.Kept {
			for _, b := range es[i].Message.Content {
				if b.Type == events.BlockToolResult && !uses[b.ToolUseID] {
					t.Fatalf("kept record %d answers tool_use %s, which is not kept", i, b.ToolUseID)
				}
			}
		}
		// Streamed siblings are kept together.
		for i := range es {
			if isMain(i) && es[i].Message.MessageID != "" && ids[es[i].Message.MessageID] && !kept[i] {
				t.Fatalf("record %d shares message_id %s with a kept record but is not kept", i, es[i].Message.MessageID)
			}
		}
	}
	// The latest user request is kept, or quoted instead.
	if w.LatestRequest >= 0 && !kept[w.LatestRequest] && (!w.RequestOutside || w.Quoted[0] != w.LatestRequest) {
		t.Fatalf("latest user request %d is neither kept nor quoted", w.LatestRequest)
	}
	// The kept messages fit the maximum, unless the unsummarized ones alone
	// do not.
	if w.Tokens > cfg.WithDefaults().MaxTokens && !w.Overflow {
		t.Fatalf("kept %d tokens, over the maximum", w.Tokens)
	}
	for i := len(es) - 1; i >= 0; i-- {
		if isMain(i) && memory.IsUserRequest(es[i].Message) {
			if i != w.LatestRequest {
				t.Fatalf("latest request is %d, selection says %d", i, w.LatestRequest)
			}
			break
		}
	}
	// Everything after the last summarized record is kept, even before the
	// floor, unless dropped for an orphaned tool_result.
	if w.Dropped == 0 {
		for i := start; i < len(es); i++ {
			if isMain(i) && !kept[i] && !(w.RequestOutside && i == w.LatestRequest) {
				t.Fatalf("record %d after the summarized point is not kept", i)
			}
		}
	}
}

// winRandomTranscript generates a plausible transcript: turns of a user
// request, streamed assistant responses (thinking, text, tool_use records
// sharing a message_id), tool_result records, subagent chatter, and
// compaction boundaries at turn edges.
func winRandomTranscript(r *rand.Rand) []memory.WindowEntry {
	var es []memory.WindowEntry
	add := func(m *events.Message, boundary bool) {
		e := memory.WindowEntry{Seq: uint64(len(es) + 1), Message: m, Boundary: boundary}
		if m != nil {
			m.UUID = fmt.Sprintf("u%d", len(es)+1)
		}
		if boundary {
			e.PostTokens = int64(r.Intn(20000))
		}
		es = append(es, e)
	}
	tool := 0
	turns := 1 + r.Intn(12)
	for turn := 0; turn < turns; turn++ {
		if turn > 0 && r.Intn(6) == 0 {
			add(nil, true)
		}
		add(&events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: winFiller(1 + r.Intn(800))}}}, false)
		steps := r.Intn(6)
		for step := 0; step <= steps; step++ {
			msgID := fmt.Sprintf("msg_%d_%d", turn, step)
			if r.Intn(2) == 0 {
				add(&events.Message{Role: events.RoleAssistant, MessageID: msgID, Content: events.Content{{Type: events.BlockThinking, Thinking: winFiller(r.Intn(400))}}}, false)
			}
			if r.Intn(2) == 0 {
				add(&events.Message{Role: events.RoleAssistant, MessageID: msgID, Content: events.Content{{Type: events.BlockText, Text: winFiller(1 + r.Intn(300))}}}, false)
			}
			if step == steps {
				add(&events.Message{Role: events.RoleAssistant, MessageID: msgID, Content: events.Content{{Type: events.BlockText, Text: winFiller(1 + r.Intn(200))}}, Usage: &events.Usage{InputTokens: int64(r.Intn(100000))}}, false)
				break
			}
			var ids []string
			for k := 0; k <= r.Intn(3); k++ {
				tool++
				id := fmt.Sprintf("toolu_%d", tool)
				ids = append(ids, id)
				add(&events.Message{Role: events.RoleAssistant, MessageID: msgID, Content: events.Content{{Type: events.BlockToolUse, ID: id, Name: "Bash", Input: json.RawMessage(`{"command":"go test ./..."}`)}}}, false)
			}
			if r.Intn(4) == 0 {
				add(&events.Message{Role: events.RoleAssistant, QuerySource: events.QuerySubagent, MessageID: "sub_" + msgID, Content: events.Content{{Type: events.BlockText, Text: winFiller(r.Intn(500))}}}, false)
			}
			if r.Intn(2) == 0 {
				res := events.Content{}
				for _, id := range ids {
					res = append(res, events.Block{Type: events.BlockToolResult, ToolUseID: id, Content: events.Content{{Type: events.BlockText, Text: winFiller(r.Intn(6000))}}})
				}
				add(&events.Message{Role: events.RoleUser, Content: res}, false)
			} else {
				for _, id := range ids {
					add(&events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: id, Content: events.Content{{Type: events.BlockText, Text: winFiller(r.Intn(6000))}}}}}, false)
				}
			}
		}
	}
	return es
}

// TestSelectWindowProperties checks the invariants on random transcripts
// and that reading earlier records on demand (NeedEarlier) gives the same
// answer as selecting over the whole transcript.
func TestSelectWindowProperties(t *testing.T) {
	r := rand.New(rand.NewSource(20260507))
	for iter := 0; iter < 600; iter++ {
		es := winRandomTranscript(r)
		start := len(es)
		if r.Intn(4) != 0 {
			start = r.Intn(len(es) + 1)
		}
		cfg := memory.WindowConfig{MinTokens: int64(1 + r.Intn(15000)), MinTextMessages: 1 + r.Intn(6), MaxTokens: int64(5000 + r.Intn(40000))}
		full := memory.SelectWindow(memory.WindowInput{Entries: es, Start: start, Complete: true}, cfg)
		if full.NeedEarlier {
			t.Fatalf("iteration %d: NeedEarlier on a complete transcript", iter)
		}
		if full.Dropped != 0 {
			t.Fatalf("iteration %d: dropped records of a transcript without orphans", iter)
		}
		checkWindowInvariants(t, es, start, full, true, cfg)

		// Incremental: begin with a suffix holding the summarized record and
		// prepend earlier records while the selection asks for them.
		from := min(max(start-1, 0), len(es))
		from = max(0, from-r.Intn(3))
		for {
			part := memory.SelectWindow(memory.WindowInput{Entries: es[from:], Start: start - from, Complete: from == 0}, cfg)
			if !part.NeedEarlier {
				if from+part.Start != full.Start || len(part.Kept) != len(full.Kept) || part.Tokens != full.Tokens {
					t.Fatalf("iteration %d: incremental selection from %d starts at %d (%d kept), full at %d (%d kept)",
						iter, from, from+part.Start, len(part.Kept), full.Start, len(full.Kept))
				}
				break
			}
			if from == 0 {
				t.Fatalf("iteration %d: NeedEarlier with nothing earlier", iter)
			}
			from = max(0, from-1-r.Intn(24))
		}
	}
}

func TestSelectWindowEmpty(t *testing.T) {
	w := memory.SelectWindow(memory.WindowInput{Complete: true}, memory.WindowConfig{})
	if w.Start != 0 || len(w.Kept) != 0 || w.NeedEarlier || w.Floor != -1 || w.LatestRequest != -1 {
		t.Fatalf("empty transcript: %+v", w)
	}
}
