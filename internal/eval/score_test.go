package eval

import (
	"testing"

	"github.com/recallhq/recall/internal/eval/sessiongen"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"`internal/x_check.go`":  " internal x check go ",
		"Undefined: parseRow":    " undefined parserow ",
		"  go test -tags=a ./… ": " go test tags a ",
		"":                       " ",
		"Port 8080.":             " port 8080 ",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	path := &sessiongen.Fact{Category: sessiongen.CatExtraction, Expect: []string{"internal/importer/quill_check.go"}}
	both := &sessiongen.Fact{Category: sessiongen.CatErrorsFixes, Expect: []string{"undefined: parseDuneRow", "decodeFjordRow"}}
	update := &sessiongen.Fact{Category: sessiongen.CatKnowledgeUpdate, Expect: []string{"9321"}, Superseded: []string{"4417"}}
	order := &sessiongen.Fact{Category: sessiongen.CatTemporal, Expect: []string{"raven-dune"}, After: "copper-yarrow"}
	latest := &sessiongen.Fact{Category: sessiongen.CatLatestRequest, Expect: []string{"Next: stream the rows. Keep the footer."}, Verbatim: true}
	abstain := &sessiongen.Fact{Category: sessiongen.CatAbstention, Invented: []string{"postgres", "github actions"}}
	tests := []struct {
		name string
		fact *sessiongen.Fact
		text string
		pass bool
	}{
		{"path as written", path, "- `/home/dev/src/x/internal/importer/quill_check.go` — Write", true},
		{"path missing", path, "- `/home/dev/src/x/internal/importer/importer.go` — Edit", false},
		{"path is a word match, not a prefix", path, "internal/importer/quill_check.golden", false},
		{"case and punctuation", both, "Build failed: UNDEFINED parseDuneRow … fixed by calling decodeFjordRow()", true},
		{"error without its fix", both, "go build failed: undefined: parseDuneRow", false},
		{"update only", update, "listen on port 9321", true},
		{"update after the old value", update, "port 4417 … Actually, port 9321", true},
		{"old value mentioned last", update, "User correction: port 9321\n# Worklog\n- run the preview on port 4417", false},
		{"update missing", update, "run the preview on port 4417", false},
		{"order kept", order, "- add --copper-yarrow flag\n- add a raven-dune footer", true},
		{"order reversed", order, "raven-dune footer, then the --copper-yarrow flag", false},
		{"anchor missing", order, "add a raven-dune footer", false},
		{"verbatim with other spacing", latest, "[user]\nNext: stream the rows.\n  Keep the footer.\n", true},
		{"verbatim cut", latest, "Latest request: Next: stream the rows. Keep the…", false},
		{"verbatim case changed", latest, "next: stream the rows. keep the footer.", false},
		{"nothing invented", abstain, "the export is written to exports/x.csv", true},
		{"invented answer", abstain, "Configured GitHub Actions for CI.", false},
		{"invented inside another word does not count", abstain, "postgresql-ish", true},
		{"empty context abstains", abstain, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Check(tt.fact, tt.text)
			if v.Pass != tt.pass {
				t.Fatalf("Check = %+v, want pass %v", v, tt.pass)
			}
			if !v.Pass && v.Why == "" {
				t.Fatal("a failure without a reason")
			}
		})
	}
}
