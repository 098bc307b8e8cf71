package eval

import (
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
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

func TestCheckArtifacts(t *testing.T) {
	truth := []events.TrailFile{
		{Path: "/w/app/src/a.py", Created: true, Changes: 2},
		{Path: "src/b.py", From: "src/old_b.py", Changes: 1},
		{Path: "legacy.py", Deleted: true, Changes: 1},
		{Path: "/w/app/README.md", Changes: 3},
	}
	for _, tc := range []struct {
		name   string
		text   string
		pass   int
		missed string
	}{
		{"a rendered trail", memory.RenderTrail(&events.Trail{Files: truth}), 4, ""},
		{"raw tool calls", `tool call Write {"file_path":"/w/app/src/a.py"} tool call Bash {"command":"git mv src/old_b.py src/b.py"} tool call Bash {"command":"rm legacy.py"} tool call Edit {"file_path":"/w/app/README.md"}`, 4, ""},
		{"only read", `tool call Read {"file_path":"/w/app/src/a.py"} the README.md is long; legacy.py is old`, 0, "/w/app/src/a.py"},
		{"moved without its origin", "- `src/b.py` — moved here. `src/a.py` — created. `legacy.py` deleted. Edited README.md.", 3, "src/b.py"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pass, misses := CheckArtifacts(truth, "/w/app", tc.text)
			if pass != tc.pass {
				t.Fatalf("%d files pass, want %d; misses %+v", pass, tc.pass, misses)
			}
			if tc.missed != "" && (len(misses) == 0 || misses[0].Path != tc.missed) {
				t.Fatalf("misses %+v, want %s first", misses, tc.missed)
			}
		})
	}
}
