package sessiongen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/importer"
)

// The same spec gives the same bytes, facts and probes; another seed or
// index gives others.
func TestBlind2Deterministic(t *testing.T) {
	spec := Spec{Seed: 5, Index: 2, Tokens: 80000, Family: FamilyBlind2}
	a, b := Generate(spec), Generate(spec)
	if !bytes.Equal(a.JSONL, b.JSONL) || fmt.Sprint(a.Facts) != fmt.Sprint(b.Facts) || fmt.Sprint(a.Probes) != fmt.Sprint(b.Probes) {
		t.Fatal("same spec, different sessions")
	}
	for _, other := range []Spec{{Seed: 6, Index: 2, Tokens: 80000, Family: FamilyBlind2}, {Seed: 5, Index: 6, Tokens: 80000, Family: FamilyBlind2}} {
		if bytes.Equal(a.JSONL, Generate(other).JSONL) {
			t.Fatalf("%+v: the same transcript as %+v", other, spec)
		}
	}
}

// Every session of two seeds at every length imports cleanly, reaches its
// length with its compactions, holds every fact category and every probe
// kind a family writes, passes CheckProbes, and says every answer in the
// transcript — not before the turn that says it — and no invented one.
func TestBlind2Sessions(t *testing.T) {
	kinds := map[string]bool{}
	for _, seed := range []uint64{1, 11} {
		for _, spec := range FamilySuite(FamilyBlind2, seed, 2*len(Lengths), Lengths) {
			s, starts := blind2(spec)
			kinds[s.Project] = true
			t.Run(s.ID, func(t *testing.T) {
				checkBlind2Shape(t, spec, s)
				if err := CheckProbes(s); err != nil {
					t.Fatal(err)
				}
				checkBlind2Answers(t, s, starts)
				checkBlind2Artifacts(t, s)
			})
		}
	}
	if len(kinds) < 4 {
		t.Errorf("projects %v: want the four kinds of work", kinds)
	}
}

func checkBlind2Shape(t *testing.T, spec Spec, s *Session) {
	t.Helper()
	if s.Tokens < spec.Tokens-8000 || s.Tokens > spec.Tokens+30000 {
		t.Errorf("tokens %d, want about %d", s.Tokens, spec.Tokens)
	}
	if want := int((spec.Tokens - 10000) / CompactAt); s.Compactions < want {
		t.Errorf("%d compactions, want at least %d", s.Compactions, want)
	}
	res, err := importer.ClaudeCode(bytes.NewReader(s.JSONL), importer.Options{Session: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) > 0 {
		t.Fatalf("import warnings: %v", res.Warnings[:min(3, len(res.Warnings))])
	}
	if res.Counts["compaction"] != s.Compactions {
		t.Errorf("imported %d compactions, generated %d", res.Counts["compaction"], s.Compactions)
	}
	cats, kinds := map[string]int{}, map[string]int{}
	for _, f := range s.Facts {
		cats[f.Category]++
	}
	for _, p := range s.Probes {
		kinds[p.Kind]++
	}
	for _, c := range Categories {
		if cats[c] == 0 {
			t.Errorf("no %s fact", c)
		}
	}
	for _, k := range []string{ProbeRecall, ProbeDecision, ProbeContinuation} {
		if kinds[k] == 0 {
			t.Errorf("no %s probe", k)
		}
	}
	if kinds[ProbeContinuation] != 1 {
		t.Errorf("%d continuation probes, want one", kinds[ProbeContinuation])
	}
}

// checkBlind2Answers: each answer occurs in the transcript, first at or
// after the turn that says it; superseded answers come before the answer
// that replaced them; invented ones never occur.
func checkBlind2Answers(t *testing.T, s *Session, starts map[string]int) {
	t.Helper()
	text, before := blind2Texts(s.JSONL)
	all := Normalize(text)
	normalizedBefore := map[int]string{} // a start → the normalized text before it
	words := strings.Join(strings.Fields(string(s.JSONL)), " ")
	fresh := func(id, a string) {
		n := Normalize(a)
		prefix, ok := normalizedBefore[starts[id]]
		if !ok {
			prefix = Normalize(before(starts[id]))
			normalizedBefore[starts[id]] = prefix
		}
		if !strings.Contains(all, n) {
			t.Errorf("%s: %q is not in the transcript", id, a)
		} else if strings.Contains(prefix, n) {
			t.Errorf("%s: %q occurs before the turn that says it", id, a)
		}
	}
	order := func(id, before, after string) {
		if strings.LastIndex(all, Normalize(before)) > strings.LastIndex(all, Normalize(after)) {
			t.Errorf("%s: %q occurs after the last %q", id, before, after)
		}
	}
	for _, f := range s.Facts {
		switch f.Category {
		case CatAbstention:
			for _, inv := range f.Invented {
				if strings.Contains(all, Normalize(inv)) {
					t.Errorf("%s: invented answer %q is in the transcript", f.ID, inv)
				}
			}
		case CatLatestRequest:
			if !strings.Contains(words, jsonText(strings.Join(strings.Fields(f.Expect[0]), " "))) {
				t.Errorf("%s: the latest request is not in the transcript verbatim", f.ID)
			}
		default:
			for _, e := range f.Expect {
				fresh(f.ID, e)
			}
		}
		for _, sup := range f.Superseded {
			order(f.ID, sup, f.Expect[0])
		}
		if f.After != "" {
			order(f.ID, f.After, f.Expect[0])
		}
	}
	for _, p := range s.Probes {
		if p.Kind != ProbeContinuation {
			fresh(p.ID, p.Expect[0])
		}
		for _, sup := range p.Superseded {
			order(p.ID, sup, p.Expect[0])
		}
	}
}

// checkBlind2Artifacts: a session changes files through every tool an
// agent uses and through the shell (moves, deletes, redirects), and edits
// some file more than once.
func checkBlind2Artifacts(t *testing.T, s *Session) {
	t.Helper()
	tools, edits := map[string]int{}, map[string]int{}
	var commands []string
	for _, line := range bytes.Split(s.JSONL, []byte("\n")) {
		var rec struct {
			Type    string `json:"type"`
			Message struct {
				Content any `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.Type != "assistant" {
			continue
		}
		blocks, _ := rec.Message.Content.([]any)
		for _, bl := range blocks {
			m, _ := bl.(map[string]any)
			if m["type"] != "tool_use" {
				continue
			}
			name, _ := m["name"].(string)
			in, _ := m["input"].(map[string]any)
			tools[name]++
			if name == "Edit" {
				edits[in["file_path"].(string)]++
			}
			if name == "Bash" {
				commands = append(commands, in["command"].(string))
			}
		}
	}
	for _, tool := range []string{"Write", "Edit", "MultiEdit", "Bash", "Read", "TodoWrite"} {
		if tools[tool] == 0 {
			t.Errorf("no %s call", tool)
		}
	}
	shell := strings.Join(commands, "\n")
	for _, op := range []string{"mv ", "rm ", "> "} {
		if !strings.Contains(shell, op) {
			t.Errorf("no shell command with %q", op)
		}
	}
	if !slices.ContainsFunc(slices.Collect(maps.Values(edits)), func(n int) bool { return n > 1 }) {
		t.Error("no file is edited more than once")
	}
}

// blind2Texts is the text of a transcript's records — every string in
// them, map values in key order, one per line — and before(k), the text of
// the records that end within jsonl[:k] (what the text of jsonl[:k] would
// be), so a check per fact decodes the transcript once.
func blind2Texts(jsonl []byte) (text string, before func(k int) string) {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v)
			b.WriteByte('\n')
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(v[k])
			}
		}
	}
	var ends, lens []int // each line's end in jsonl, the text's length after it
	at := 0
	for _, line := range bytes.Split(jsonl, []byte("\n")) {
		var v any
		if json.Unmarshal(line, &v) == nil {
			walk(v)
		}
		at += len(line)
		ends, lens = append(ends, at), append(lens, b.Len())
		at++ // the newline
	}
	text = b.String()
	return text, func(k int) string {
		i, _ := slices.BinarySearch(ends, k+1) // the lines ending at or before k
		if i == 0 {
			return ""
		}
		return text[:lens[i-1]]
	}
}
