package sessiongen

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/importer"
)

// The same spec gives the same bytes and facts; another seed gives others.
func TestGenerateDeterministic(t *testing.T) {
	spec := Spec{Seed: 7, Index: 1, Tokens: 60000}
	a, b := Generate(spec), Generate(spec)
	if !bytes.Equal(a.JSONL, b.JSONL) {
		t.Fatal("same spec, different transcripts")
	}
	if fmt.Sprint(a.Facts) != fmt.Sprint(b.Facts) {
		t.Fatal("same spec, different facts")
	}
	c := Generate(Spec{Seed: 8, Index: 1, Tokens: 60000})
	if bytes.Equal(a.JSONL, c.JSONL) {
		t.Fatal("different seeds, same transcript")
	}
}

// Every session imports cleanly, reaches its length, holds every category
// and, past the threshold, earlier compactions; every expected answer is in
// the transcript and no invented one is.
func TestGenerateSessions(t *testing.T) {
	for _, spec := range Suite(3, len(Lengths), Lengths) {
		t.Run(fmt.Sprint(spec.Tokens), func(t *testing.T) {
			s := Generate(spec)
			if s.Tokens < spec.Tokens-8000 || s.Tokens > spec.Tokens+30000 {
				t.Errorf("tokens %d, want about %d", s.Tokens, spec.Tokens)
			}
			wantCompactions := int((spec.Tokens - 10000) / CompactAt)
			if s.Compactions < wantCompactions {
				t.Errorf("%d earlier compactions, want at least %d", s.Compactions, wantCompactions)
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
			cats := map[string]int{}
			raw := string(s.JSONL)
			for _, f := range s.Facts {
				cats[f.Category]++
				for _, e := range f.Expect {
					if !strings.Contains(raw, jsonText(e)) {
						t.Errorf("%s: expected answer %q is not in the transcript", f.ID, e)
					}
				}
				for _, inv := range f.Invented {
					if strings.Contains(strings.ToLower(raw), inv) {
						t.Errorf("%s: invented answer %q is in the transcript", f.ID, inv)
					}
				}
			}
			for _, c := range Categories {
				if cats[c] == 0 {
					t.Errorf("no %s fact", c)
				}
			}
			t.Logf("%s: %d records, %d tokens, %d compactions, %d facts, sha256 %x", s.ID, s.Records, s.Tokens, s.Compactions, len(s.Facts), sha256.Sum256(s.JSONL))
		})
	}
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	return strings.NewReplacer(`"`, `\"`).Replace(s)
}

func TestCheckProbes(t *testing.T) {
	s := &Session{JSONL: []byte(`{"text":"We picked an LRU cache of 4096 entries: a map is unbounded. Next: run TestRates."}`)}
	ok := []Probe{
		{ID: "a", Kind: ProbeDecision, Question: "Which cache, why?", Expect: []string{"lru", "4096"}, Why: []string{"unbounded"}},
		{ID: "b", Kind: ProbeContinuation, Question: "What next?", Expect: []string{"LRU cache"}, Next: []string{"TestRates"}},
	}
	s.Probes = ok
	if err := CheckProbes(s); err != nil {
		t.Fatalf("valid probes: %v", err)
	}
	for name, bad := range map[string]Probe{
		"artifact":        {ID: "c", Kind: ProbeArtifact, Question: "q", Expect: []string{"lru"}},
		"unknown":         {ID: "c", Kind: "vibes", Question: "q", Expect: []string{"lru"}},
		"repeated id":     {ID: "a", Kind: ProbeRecall, Question: "q", Expect: []string{"lru"}},
		"no answer":       {ID: "c", Kind: ProbeRecall, Question: "q"},
		"no reason":       {ID: "c", Kind: ProbeDecision, Question: "q", Expect: []string{"lru"}},
		"no next":         {ID: "c", Kind: ProbeContinuation, Question: "q", Expect: []string{"lru"}},
		"answer not said": {ID: "c", Kind: ProbeRecall, Question: "q", Expect: []string{"redis"}},
		"partial word":    {ID: "c", Kind: ProbeRecall, Question: "q", Expect: []string{"409"}},
	} {
		s.Probes = append(append([]Probe(nil), ok...), bad)
		if err := CheckProbes(s); err == nil {
			t.Errorf("%s: CheckProbes accepted %+v", name, bad)
		}
	}
}

func TestPlantedProbes(t *testing.T) {
	for _, spec := range Suite(3, 2, QuickLengths) {
		s := Generate(spec)
		if len(s.Probes) != 3 {
			t.Fatalf("%s: %d probes, want 3", s.ID, len(s.Probes))
		}
		if err := CheckProbes(s); err != nil {
			t.Fatalf("%s: %v", s.ID, err)
		}
	}
}
