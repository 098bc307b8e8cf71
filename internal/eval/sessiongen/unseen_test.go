package sessiongen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/importer"
)

// The same spec gives the same unseen session; another seed and the other
// families give others.
func TestGenerateUnseenDeterministic(t *testing.T) {
	spec := Spec{Seed: 7, Index: 1, Tokens: 60000, Family: FamilyUnseen}
	a, b := Generate(spec), Generate(spec)
	if !bytes.Equal(a.JSONL, b.JSONL) || fmt.Sprint(a.Facts) != fmt.Sprint(b.Facts) {
		t.Fatal("same spec, different sessions")
	}
	if c := Generate(Spec{Seed: 8, Index: 1, Tokens: 60000, Family: FamilyUnseen}); bytes.Equal(a.JSONL, c.JSONL) {
		t.Fatal("different seeds, same transcript")
	}
	for _, f := range []string{FamilyPlanted, FamilyHoldout} {
		spec.Family = f
		if bytes.Equal(a.JSONL, Generate(spec).JSONL) {
			t.Fatalf("the unseen and %s families generate the same session", f)
		}
	}
}

// Unseen sessions import cleanly, reach their length with their
// compactions, hold every category; every expected answer, superseded
// answer and temporal anchor is in the transcript and none of them (nor
// an invented answer) is in the filler; no invented answer is anywhere;
// the latest request is the last prompt.
func TestGenerateUnseen(t *testing.T) {
	projects := map[string]int{}
	for _, seed := range []uint64{3, 11} {
		for _, spec := range FamilySuite(FamilyUnseen, seed, 8, Lengths) {
			t.Run(fmt.Sprint(seed, "-", spec.Index, "-", spec.Tokens), func(t *testing.T) {
				s, spans := generateUnseenSpans(spec)
				projects[s.Project]++
				checkUnseenShape(t, spec, s)
				checkUnseenFacts(t, s, spans)
			})
		}
	}
	if len(projects) < 6 {
		t.Errorf("projects %v: want the scenarios' projects spread", projects)
	}
}

func checkUnseenShape(t *testing.T, spec Spec, s *Session) {
	t.Helper()
	if !strings.HasPrefix(s.ID, "unseen-") {
		t.Errorf("id %s", s.ID)
	}
	if s.Tokens < spec.Tokens-8000 || s.Tokens > spec.Tokens+30000 {
		t.Errorf("tokens %d, want about %d", s.Tokens, spec.Tokens)
	}
	if want := int((spec.Tokens - 10000) / CompactAt); s.Compactions < want {
		t.Errorf("%d earlier compactions, want at least %d", s.Compactions, want)
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
	ids := regexp.MustCompile(`^unseen-\d+-\d+/\d+-[a-z_]+$`)
	cats := map[string]int{}
	for _, f := range s.Facts {
		cats[f.Category]++
		if !ids.MatchString(f.ID) {
			t.Errorf("fact id %q", f.ID)
		}
	}
	for _, c := range Categories {
		if cats[c] == 0 {
			t.Errorf("no %s fact", c)
		}
	}
	if last := lastPrompt(t, s.JSONL); s.Facts[len(s.Facts)-1].Category != CatLatestRequest || s.Facts[len(s.Facts)-1].Expect[0] != last {
		t.Errorf("the latest request fact is not the last prompt %q", last)
	}
}

func checkUnseenFacts(t *testing.T, s *Session, spans [][2]int) {
	t.Helper()
	raw := string(s.JSONL)
	all := Normalize(texts(t, s.JSONL))
	var filler strings.Builder
	for _, sp := range spans {
		filler.WriteString(texts(t, s.JSONL[sp[0]:sp[1]]))
	}
	fill := Normalize(filler.String())
	for _, f := range s.Facts {
		var stated []string
		stated = append(stated, f.Expect...)
		stated = append(stated, f.Superseded...)
		if f.After != "" {
			stated = append(stated, f.After)
		}
		for _, e := range stated {
			js, _ := json.Marshal(e)
			if !strings.Contains(raw, strings.Trim(string(js), `"`)) || !strings.Contains(all, Normalize(e)) {
				t.Errorf("%s: %q is not in the transcript", f.ID, e)
			}
			if f.Category != CatLatestRequest && strings.Contains(fill, Normalize(e)) {
				t.Errorf("%s: %q occurs in the filler", f.ID, e)
			}
		}
		for _, inv := range f.Invented {
			if strings.Contains(all, Normalize(inv)) {
				t.Errorf("%s: invented answer %q is in the transcript", f.ID, inv)
			}
		}
		if f.After != "" && strings.Index(all, Normalize(f.After)) > strings.LastIndex(all, Normalize(f.Expect[0])) {
			t.Errorf("%s: %q is not before %q", f.ID, f.After, f.Expect[0])
		}
		for _, sup := range f.Superseded {
			if strings.LastIndex(all, Normalize(sup)) > strings.LastIndex(all, Normalize(f.Expect[0])) {
				t.Errorf("%s: the superseded %q is said after %q", f.ID, sup, f.Expect[0])
			}
		}
	}
}

// texts returns every string value of the JSONL records, one a line.
func texts(t *testing.T, jsonl []byte) string {
	t.Helper()
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v)
			b.WriteString("\n")
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("not a JSON record: %v", err)
		}
		walk(v)
	}
	return b.String()
}

// lastPrompt returns the text of the last typed user prompt.
func lastPrompt(t *testing.T, jsonl []byte) string {
	t.Helper()
	var last string
	for _, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		var r struct {
			Type             string `json:"type"`
			IsCompactSummary bool   `json:"isCompactSummary"`
			Message          struct {
				Content any `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if s, ok := r.Message.Content.(string); ok && r.Type == "user" && !r.IsCompactSummary {
			last = s
		}
	}
	return last
}
