package eval

import (
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/eval/sessiongen"
)

func TestCheckProbe(t *testing.T) {
	decision := sessiongen.Probe{Kind: sessiongen.ProbeDecision, Expect: []string{"LRU", "4096"}, Why: []string{"unbounded", "memory"}}
	reversed := sessiongen.Probe{Kind: sessiongen.ProbeDecision, Expect: []string{"sqlite"}, Why: []string{"single file"}, Superseded: []string{"postgres"}}
	cont := sessiongen.Probe{Kind: sessiongen.ProbeContinuation, Expect: []string{"retry budget"}, Next: []string{"TestRetryBudget"}}
	recall := sessiongen.Probe{Kind: sessiongen.ProbeRecall, Expect: []string{"8123"}, Superseded: []string{"4123"}}
	for _, tc := range []struct {
		name  string
		p     sessiongen.Probe
		text  string
		pass  bool
		about string
	}{
		{"decision", decision, "We chose an `lru` cache of 4,096? no: LRU of 4096 entries; a map is unbounded.", true, ""},
		{"decision without a reason", decision, "An LRU cache of 4096 entries.", false, "reason"},
		{"decision without the size", decision, "An LRU cache; a map grows without bound in memory.", false, "4096"},
		{"reversed decision", reversed, "First postgres, then sqlite: a single file to ship.", true, ""},
		{"reversal lost", reversed, "sqlite was considered (single file) but postgres is used.", false, "postgres"},
		{"continuation", cont, "Working on the retry budget; next: make TestRetryBudget pass.", true, ""},
		{"continuation without next", cont, "Working on the retry budget.", false, "next step"},
		{"recall corrected", recall, "port 4123, then moved to 8123", true, ""},
		{"recall stale", recall, "8123 … no, it is 4123", false, "4123"},
		{"whole words", recall, "port 81234", false, "8123"},
		{"artifact is not text-scored", sessiongen.Probe{Kind: sessiongen.ProbeArtifact}, "x.go edited", false, "CheckArtifacts"},
		{"unknown kind", sessiongen.Probe{Kind: "vibes", Expect: []string{"x"}}, "x", false, "unknown"},
		{"empty probe", sessiongen.Probe{Kind: sessiongen.ProbeRecall}, "x", false, "expects nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckProbe(&tc.p, tc.text)
			if v.Pass != tc.pass || !strings.Contains(v.Why, tc.about) {
				t.Fatalf("CheckProbe = %+v, want pass=%v and a reason about %q", v, tc.pass, tc.about)
			}
		})
	}
}
