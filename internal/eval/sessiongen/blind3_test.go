package sessiongen

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/importer"
)

// Every blind3 session imports cleanly, reaches its length and compactions,
// holds its ten turns' facts (three preferences, three results, two
// decisions, two errors), the latest request and two abstentions, passes
// CheckProbes, says every answer and no invented one.
func TestBlind3Sessions(t *testing.T) {
	for _, seed := range []uint64{1, 11} {
		for _, spec := range FamilySuite(FamilyBlind3, seed, len(Lengths), Lengths) {
			t.Run(fmt.Sprint(seed, "/", spec.Tokens), func(t *testing.T) {
				s := Generate(spec)
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
				kinds := map[string]int{}
				raw, norm := string(s.JSONL), Normalize(string(s.JSONL))
				for _, f := range s.Facts {
					kinds[f.Kind]++
					for _, e := range f.Expect {
						if !strings.Contains(raw, jsonText(e)) {
							t.Errorf("%s: answer %q is not in the transcript", f.ID, e)
						}
					}
					for _, inv := range f.Invented {
						if strings.Contains(norm, Normalize(inv)) {
							t.Errorf("%s: invented answer %q is in the transcript", f.ID, inv)
						}
					}
				}
				want := map[string]int{"preference": 3, "result": 3, "decision": 2, "error_fix": 2, "verbatim": 1, "never_said": 2}
				if fmt.Sprint(kinds) != fmt.Sprint(want) {
					t.Errorf("fact kinds %v, want %v", kinds, want)
				}
				if err := CheckProbes(s); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// The same spec gives the same bytes, facts and probes.
func TestBlind3Deterministic(t *testing.T) {
	spec := Spec{Seed: 5, Index: 2, Tokens: 100000, Family: FamilyBlind3}
	a, b := Generate(spec), Generate(spec)
	if !bytes.Equal(a.JSONL, b.JSONL) || fmt.Sprint(a.Facts, a.Probes) != fmt.Sprint(b.Facts, b.Probes) {
		t.Fatal("same spec, different sessions")
	}
}
