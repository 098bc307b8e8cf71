package sessiongen

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// holdout is a session of the holdout family being generated.
type holdout struct {
	*gen
	h hvalues
}

// hvalues are the holdout family's planted answers beside values.
type hvalues struct {
	cacheKind, command, rowsLine string
	fixFirst                     bool // the agent reads the broken file before editing
	buildCmd, buildErr, errWant  string
	fixFunc                      string // math.Round or math.RoundToEven
}

// generateHoldout writes a session of the holdout family. Sessions come
// three to a project.
func generateHoldout(spec Spec) *Session {
	r := rand.New(rand.NewPCG(spec.Seed^0x5bd1e995, uint64(spec.Index)+0x2545f4914f6cdd1d))
	p := projects[(int(spec.Seed%4)+spec.Index/3)%len(projects)]
	id := fmt.Sprintf("holdout-%d-%d", spec.Seed, spec.Index)
	start := time.Date(2025, 10, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(spec.Index) * 24 * time.Hour)
	g := &holdout{gen: &gen{r: r, p: p, spec: spec, w: newWriter(id, "/home/dev/src/"+p.name, start)}}
	g.pickValues()
	g.pickHoldout()
	g.files = g.fillerFiles()
	g.runHoldout()
	return &Session{Spec: spec, ID: id, Project: p.name, JSONL: g.w.buf.Bytes(), Records: g.w.records, Tokens: g.w.total, Compactions: g.compactions, Facts: g.facts}
}

func (g *holdout) pick(list []string) string { return list[g.r.IntN(len(list))] }

func (g *holdout) pickHoldout() {
	h, v := &g.h, &g.v
	h.cacheKind = g.pick([]string{"lru", "lfu", "arc"})
	switch g.r.IntN(3) {
	case 0:
		h.command = "go test -tags=integration -run '^" + v.testName + "$' ./internal/importer/"
	case 1:
		h.command = "go test -count=1 -tags integration -run " + v.testName + " ./internal/importer/..."
	default:
		h.command = "make integration RUN=" + v.testName
	}
	h.rowsLine = g.pick(rowsLine)
	h.fixFirst = g.r.IntN(2) == 0
	h.buildCmd = g.pick([]string{"go build ./...", "go vet ./...", "make build"})
	if g.r.IntN(2) == 0 {
		h.buildErr, h.errWant = "undefined: "+v.oldSym, "undefined: "+v.oldSym
	} else {
		h.buildErr, h.errWant = "too many arguments in call to "+v.oldSym+"\n\thave (string, int)\n\twant (string)", "too many arguments in call to "+v.oldSym
	}
	h.fixFunc = g.pick([]string{"math.Round", "math.RoundToEven"})
	v.validator = g.pick([]string{"Validate", "Check", "Reject"}) + camel(strings.TrimSuffix(v.valFile[len("internal/importer/"):], "_check.go"))
	switch g.r.IntN(3) {
	case 1:
		v.valFile = "internal/importer/validate/" + strings.ToLower(v.validator) + ".go"
	case 2:
		v.valFile = "internal/guard/" + strings.TrimSuffix(v.valFile[len("internal/importer/"):], "_check.go") + "_rows.go"
	}
	switch g.r.IntN(3) {
	case 1:
		v.oldPath = fmt.Sprintf("build/export/%s.ndjson", g.word())
	case 2:
		v.newPath = fmt.Sprintf("reports/%s/%s.csv", g.word(), g.p.name)
	}
}

func (g *holdout) runHoldout() {
	plan := []planted{
		{0.03, g.hPreference},
		{0.10, g.hInstruction},
		{0.22, g.hDecision},
		{0.33, g.hIntegration},
		{0.45, g.hBuildError},
		{0.56, g.hNewFile},
		{0.67, g.hTemporal},
		{0.78, g.hPathUpdate},
		{0.84, g.hPortUpdate},
		{0.90, g.hTestFailure},
	}
	for i := range plan {
		plan[i].at += (g.r.Float64() - 0.5) * 0.03
	}
	g.hFirstRequest()
	next := 0
	target := g.spec.Tokens
	span := float64(target - 12000)
	for g.w.total < target-9000 || next < len(plan) {
		switch {
		case next < len(plan) && float64(g.w.total) >= plan[next].at*span:
			plan[next].turn()
			next++
		case g.w.total < target-9000:
			g.hFiller()
		default:
			plan[next].turn()
			next++
		}
		g.maybeCompact()
	}
	g.hLatest()
	g.abstain()
}

// longMessage surrounds phrase with n sentences of background on each side.
func (g *holdout) longMessage(n int, phrase string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, g.pick(fillerLead)+" ", g.filler1(), g.filler1())
	}
	b.WriteString("Oh, and " + phrase + ". ")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, g.pick(fillerLead)+" ", g.filler1(), g.filler1())
	}
	return strings.TrimSpace(b.String())
}

func (g *holdout) hFirstRequest() {
	p := g.p.name
	g.w.prompt(fmt.Sprintf("We're adding exporting to the report command of %s (module example.com/%s): ledger entries grouped by %s, written out to a file. Have a look at internal/report/report.go and internal/export/export.go first and sketch an approach.", p, p, g.v.groupBy))
	g.w.read(nil, "internal/report/report.go", g.files[0].src)
	g.w.read(nil, "internal/export/export.go", g.files[1].src)
	g.w.respond(text(fmt.Sprintf("Sketch: internal/report already builds the rows; a Writer in internal/export takes them grouped by %s and the command wires flags to it.", g.v.groupBy)))
}

func (g *holdout) hPreference() {
	g.w.prompt(g.longMessage(4+g.r.IntN(4), fmt.Sprintf(g.pick(preferenceSay), g.v.tag)))
	g.w.respond(text("Got it, thanks for the background."))
	g.fact(Fact{Category: CatExtraction, Kind: "preference", Question: "What must every commit message start with?", Expect: []string{g.v.tag}})
}

func (g *holdout) hInstruction() {
	v := &g.v
	say := fmt.Sprintf(g.pick(instructionSay), v.oldPath, v.oldPort)
	if g.r.IntN(2) == 0 {
		say = g.longMessage(2+g.r.IntN(3), strings.TrimSuffix(strings.ToLower(say[:1])+say[1:], "."))
	}
	g.w.prompt(say)
	src := fmt.Sprintf("package export\n\nconst (\n\tdefaultPath = %q\n\tpreviewPort = %d\n)\n", v.oldPath, v.oldPort)
	g.w.create(nil, "internal/export/settings.go", src)
	g.w.respond(text("Settings are in internal/export/settings.go."))
}
