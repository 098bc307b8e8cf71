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

// Holdout sessions import cleanly, hold every category, every expected
// answer and no invented one, use none of the planted family's marker words,
// and come several to a project.
func TestGenerateHoldout(t *testing.T) {
	projects := map[string]int{}
	for _, spec := range FamilySuite(FamilyHoldout, 3, 6, Lengths) {
		t.Run(fmt.Sprint(spec.Index, "-", spec.Tokens), func(t *testing.T) {
			s := Generate(spec)
			projects[s.Project]++
			if !strings.HasPrefix(s.ID, "holdout-") {
				t.Errorf("id %s", s.ID)
			}
			if s.Tokens < spec.Tokens-8000 || s.Tokens > spec.Tokens+30000 {
				t.Errorf("tokens %d, want about %d", s.Tokens, spec.Tokens)
			}
			res, err := importer.ClaudeCode(bytes.NewReader(s.JSONL), importer.Options{Session: s.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Warnings) > 0 {
				t.Fatalf("import warnings: %v", res.Warnings[:min(3, len(res.Warnings))])
			}
			raw := string(s.JSONL)
			for _, marker := range []string{"Actually", "actually", "change of plan", "Decision", "instead"} {
				if strings.Contains(raw, marker) {
					t.Errorf("the transcript says %q", marker)
				}
			}
			cats := map[string]int{}
			for _, f := range s.Facts {
				cats[f.Category]++
				for _, e := range f.Expect {
					js, _ := json.Marshal(e)
					if !strings.Contains(raw, strings.Trim(string(js), `"`)) {
						t.Errorf("%s: expected answer %q is not in the transcript", f.ID, e)
					}
				}
				for _, inv := range f.Invented {
					if regexp.MustCompile(`\b` + inv + `\b`).MatchString(strings.ToLower(raw)) {
						t.Errorf("%s: invented answer %q is in the transcript", f.ID, inv)
					}
				}
			}
			for _, c := range Categories {
				if cats[c] == 0 {
					t.Errorf("no %s fact", c)
				}
			}
		})
	}
	for p, n := range projects {
		if n < 2 {
			t.Errorf("project %s has %d session", p, n)
		}
	}
}

// The holdout family is deterministic and differs from the planted one.
func TestGenerateHoldoutDeterministic(t *testing.T) {
	spec := Spec{Seed: 7, Index: 1, Tokens: 60000, Family: FamilyHoldout}
	a, b := Generate(spec), Generate(spec)
	if !bytes.Equal(a.JSONL, b.JSONL) || fmt.Sprint(a.Facts) != fmt.Sprint(b.Facts) {
		t.Fatal("same spec, different sessions")
	}
	spec.Family = FamilyPlanted
	if bytes.Equal(a.JSONL, Generate(spec).JSONL) {
		t.Fatal("the families generate the same session")
	}
}
