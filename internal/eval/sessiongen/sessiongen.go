// Package sessiongen generates the sessions of Recall's evaluation (recall
// eval): coding-agent sessions in Claude Code's JSONL transcript format with
// planted facts, each with a question, the expected answer and a category.
//
// Generation is a pure function of a Spec: the same seed, index and length
// give the same bytes. A session works on a synthetic Go repository: a first
// request, a preference stated once early, an instruction later corrected by
// the user, a decision, an integration test run whose result the user asked
// for, a build error and a test failure with their fixes, a new file, two
// requests in a known order, and a latest request that the agent has just
// started on when the session is compacted. Between them, filler turns —
// tool loops reading files, searching and running tests, with large results
// — bring the session to its length. When the model's context reaches
// CompactAt tokens the session is compacted as Claude Code does (a
// compact_boundary, a summary that carries none of the planted facts) and
// continues, so long sessions hold earlier compactions.
//
// That is the planted family (FamilyPlanted). The holdout family
// (FamilyHoldout, holdout*.go) plants the same kinds of fact said other
// ways — in long messages, only in tool output or in the code an edit
// writes, corrected without marker words — and was written without
// reading the offline provider's rules, to measure them on data they were
// not developed against. The unseen family (FamilyUnseen, unseen*.go) works
// on other kinds of project altogether and was written blind to both the
// rules and the other families' turns. The blind2 family (FamilyBlind2,
// blind2*.go), written blind the same way from the Fact and probe
// contracts, adds probes by kind and sessions that change files through
// every tool and the shell. The blind3 family (FamilyBlind3, blind3*.go)
// says what issue 45 found lost — preferences in passing, end-of-output
// results, yes-confirmed decisions, error texts — in varied phrasings.
package sessiongen

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
	"unicode"
)

// Fact categories, after LongMemEval's abilities adapted to agent sessions.
const (
	// CatExtraction: a path, command, value, decision or preference stated
	// once.
	CatExtraction = "extraction"
	// CatKnowledgeUpdate: the corrected instruction, not the superseded one.
	CatKnowledgeUpdate = "knowledge_update"
	// CatTemporal: what was asked after what.
	CatTemporal = "temporal"
	// CatLatestRequest: the latest user request, verbatim.
	CatLatestRequest = "latest_request"
	// CatErrorsFixes: an error and the fix that resolved it.
	CatErrorsFixes = "errors_fixes"
	// CatAbstention: something never said must not appear as a fact.
	CatAbstention = "abstention"
)

// Categories lists the categories in report order.
var Categories = []string{CatExtraction, CatKnowledgeUpdate, CatTemporal, CatLatestRequest, CatErrorsFixes, CatAbstention}

// Session families.
const (
	// FamilyUnseen is the headline family: sessions of other kinds of work
	// than one Go repository — a Python data pipeline, a Terraform and
	// Kubernetes change, a TypeScript bug hunt, a database migration —
	// whose facts are said in passing, only in tool output, confirmed with
	// "yes, do that" or corrected mid-sentence. It was written by someone
	// who had not read the offline provider's rules nor the other two
	// families' turns (unseen*.go).
	FamilyUnseen = "unseen"
	// FamilyPlanted is the first family: its turns say every fact in the
	// words the offline provider's rules were developed against.
	FamilyPlanted = "planted"
	// FamilyHoldout says the same kinds of fact another way — a preference
	// deep in a long message, a decision only in the code an edit writes,
	// a row count only in a test's output, a fix only in the edit after a
	// build error, corrections without a marker word — with several
	// sessions per project. It was written before the rules were changed
	// and is not tuned to them.
	FamilyHoldout = "holdout"
)

// Families lists the families in report order, the headline first.
var Families = []string{FamilyUnseen, FamilyBlind2, FamilyBlind3, FamilyHoldout, FamilyPlanted}

// CompactAt is the context size at which a generated session is compacted
// by its platform, a little below the 167,000-token threshold of a 200K
// window.
const CompactAt = 155000

// Fact is a planted fact and how to check that a context still knows it.
type Fact struct {
	ID       string `json:"id"`
	Category string `json:"category"`
	Kind     string `json:"kind"` // path, command, value, decision, preference, …
	Question string `json:"question"`
	// Expect are the parts of the answer; every one must be present.
	Expect []string `json:"expect,omitempty"`
	// Superseded (knowledge_update) are answers the correction replaced:
	// they must be absent or precede the expected answer's last occurrence.
	Superseded []string `json:"superseded,omitempty"`
	// Invented (abstention) are answers that must not appear at all.
	Invented []string `json:"invented,omitempty"`
	// After (temporal) must occur before the expected answer.
	After string `json:"after,omitempty"`
	// Verbatim (latest_request): Expect[0] must appear exactly (whitespace
	// collapsed), not just normalized.
	Verbatim bool `json:"verbatim,omitempty"`
	// At is the session's size in tokens when the fact was stated, and
	// Compactions the earlier compactions before it.
	At          int64 `json:"at_tokens"`
	Compactions int   `json:"compactions_before"`
}

// Normalize is how a fact's answers are matched against a context (the
// scorer's rule, eval.Normalize): lower case, every run of characters that
// are not letters or digits one space, a space at each end, so that
// "`internal/x.go`" matches "internal/x.go" and matches are whole words.
// A generator checks its answers with it.
func Normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(' ')
	space := true
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
			space = false
		} else if !space {
			b.WriteByte(' ')
			space = true
		}
	}
	if !space {
		b.WriteByte(' ')
	}
	return b.String()
}

// Spec says which session to generate.
type Spec struct {
	Seed   uint64 `json:"seed"`
	Index  int    `json:"index"`
	Tokens int64  `json:"tokens"` // target size of the conversation
	// Family is FamilyPlanted (also ""), FamilyHoldout, FamilyUnseen,
	// FamilyBlind2 or FamilyBlind3.
	Family string `json:"family,omitempty"`
}

// Session is a generated session.
type Session struct {
	Spec        Spec   `json:"spec"`
	ID          string `json:"id"`
	Project     string `json:"project"`
	JSONL       []byte `json:"-"`
	Records     int    `json:"records"`
	Tokens      int64  `json:"tokens"`
	Compactions int    `json:"compactions"`
	Facts       []Fact `json:"facts"`
	// Probes are the session's probes by kind (probe.go), in the order
	// they were written; artifact probes are the eval's, not here.
	Probes []Probe `json:"probes,omitempty"`
}

// Lengths are the session sizes of a full evaluation, in order: below the
// threshold, at it, and well past it (with one and two earlier
// compactions).
var Lengths = []int64{50000, 100000, 145000, 240000, 330000}

// QuickLengths are the sizes of a quick evaluation.
var QuickLengths = []int64{50000, 200000}

// Suite returns n specs of the planted family cycling through lengths,
// seeded from seed.
func Suite(seed uint64, n int, lengths []int64) []Spec {
	return FamilySuite(FamilyPlanted, seed, n, lengths)
}

// FamilySuite returns n specs of family cycling through lengths, seeded
// from seed.
func FamilySuite(family string, seed uint64, n int, lengths []int64) []Spec {
	specs := make([]Spec, n)
	for i := range specs {
		specs[i] = Spec{Seed: seed, Index: i, Tokens: lengths[i%len(lengths)], Family: family}
	}
	return specs
}

// Generate writes the session of spec.
func Generate(spec Spec) *Session {
	switch spec.Family {
	case FamilyUnseen:
		return generateUnseen(spec)
	case FamilyHoldout:
		return generateHoldout(spec)
	case FamilyBlind2:
		return generateBlind2(spec)
	case FamilyBlind3:
		return generateBlind3(spec)
	}
	r := rand.New(rand.NewPCG(spec.Seed, uint64(spec.Index)+0x9e3779b97f4a7c15))
	p := projects[r.IntN(len(projects))]
	id := fmt.Sprintf("eval-%d-%d", spec.Seed, spec.Index)
	start := time.Date(2025, 9, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(spec.Index) * 24 * time.Hour)
	g := &gen{r: r, p: p, spec: spec, w: newWriter(id, "/home/dev/src/"+p.name, start)}
	g.pickValues()
	g.files = g.fillerFiles()
	g.run()
	return &Session{Spec: spec, ID: id, Project: p.name, JSONL: g.w.buf.Bytes(), Records: g.w.records, Tokens: g.w.total, Compactions: g.compactions, Facts: g.facts, Probes: g.probes}
}

// gen is one session being generated.
type gen struct {
	r           *rand.Rand
	p           project
	spec        Spec
	w           *writer
	facts       []Fact
	probes      []Probe
	compactions int
	files       []srcFile
	used        map[string]bool
	v           values
}

// values are the session's planted answers.
type values struct {
	tag                string
	oldPath, newPath   string
	oldPort, newPort   int
	cacheSize          int
	rows               int
	testName, command  string
	oldSym, fixSym     string
	brokenFile         string
	validator, valFile string
	flag, footer       string
	failTest           string
	groupBy            string
}

func (g *gen) word() string {
	for {
		w := factWords[g.r.IntN(len(factWords))]
		if !g.used[w] {
			g.used[w] = true
			return w
		}
	}
}

func camel(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

func (g *gen) pickValues() {
	g.used = map[string]bool{}
	v := &g.v
	v.tag = fmt.Sprintf("%s-%d", tagWords[g.r.IntN(len(tagWords))], 100+g.r.IntN(900))
	v.groupBy = g.word()
	v.oldPath = fmt.Sprintf("out/%s-%s.json", g.p.name, g.word())
	v.newPath = fmt.Sprintf("exports/%s-%s.csv", g.p.name, g.word())
	v.oldPort = 4000 + g.r.IntN(2500)
	v.newPort = 7000 + g.r.IntN(2500)
	v.cacheSize = 1000 + g.r.IntN(8000)
	v.rows = 10000 + g.r.IntN(89000)
	v.testName = "TestImport" + camel(g.word())
	v.command = "go test -tags=integration -run " + v.testName + " ./internal/importer/..."
	v.oldSym = "parse" + camel(g.word()) + "Row"
	v.fixSym = "decode" + camel(g.word()) + "Row"
	v.brokenFile = "internal/report/" + g.word() + ".go"
	w := g.word()
	v.validator = "Validate" + camel(w)
	v.valFile = "internal/importer/" + w + "_check.go"
	v.flag = g.word() + "-" + g.word()
	v.footer = g.word() + "-" + g.word()
	v.failTest = "TestMonthly" + camel(g.word())
}

// planted is a fact-bearing turn due at a fraction of the session.
type planted struct {
	at   float64
	turn func()
}

func (g *gen) run() {
	plan := []planted{
		{0.03, g.preference},
		{0.10, g.instruction},
		{0.22, g.decision},
		{0.33, g.integration},
		{0.45, g.buildError},
		{0.56, g.newFile},
		{0.67, g.temporal}, // two requests in a row
		{0.80, g.correction},
		{0.90, g.testFailure},
	}
	for i := range plan {
		plan[i].at += (g.r.Float64() - 0.5) * 0.03
	}
	g.firstRequest()
	next := 0
	target := g.spec.Tokens
	span := float64(target - 12000) // the latest request and its reads come after
	for g.w.total < target-9000 || next < len(plan) {
		if next < len(plan) && float64(g.w.total) >= plan[next].at*span {
			plan[next].turn()
			next++
		} else if g.w.total < target-9000 {
			g.filler()
		} else {
			plan[next].turn()
			next++
		}
		g.maybeCompact()
	}
	g.latest()
	g.abstain()
}

func (g *gen) maybeCompact() {
	if g.w.ctxTokens < CompactAt {
		return
	}
	g.compactions++
	g.w.compact("This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n\n" +
		"1. Primary request: add an export feature to the report command of " + g.p.name + ".\n" +
		"2. Work so far: several packages were read, tidied and tested; the tests pass.\n" +
		"3. Continue with the user's most recent request.")
}

// fact records a planted fact at the current position.
func (g *gen) fact(f Fact) {
	f.ID = fmt.Sprintf("%s/%02d-%s", g.w.session, len(g.facts)+1, f.Kind)
	f.At, f.Compactions = g.w.total, g.compactions
	g.facts = append(g.facts, f)
}

// probe records a probe at the current position.
func (g *gen) probe(p Probe) {
	p.ID = fmt.Sprintf("%s/p%02d-%s", g.w.session, len(g.probes)+1, p.Kind)
	p.At, p.Compactions = g.w.total, g.compactions
	g.probes = append(g.probes, p)
}

func (g *gen) firstRequest() {
	p := g.p.name
	g.w.prompt(fmt.Sprintf("In %s (Go module example.com/%s) I want an export feature for the report command: read the ledger, group the entries by %s, and write the result to a file. Start by reading internal/report/report.go and internal/export/export.go and tell me how you would structure it.", p, p, g.v.groupBy))
	g.w.read([]part{thinking("The user wants an export feature. Read the report package first, then the export package.")}, "internal/report/report.go", g.files[0].src)
	g.w.read(nil, "internal/export/export.go", g.files[1].src)
	g.w.respond(text(fmt.Sprintf("Plan: the report command builds its rows in internal/report; I will add a Writer in internal/export that takes those rows grouped by %s, so the command only wires flags to the writer. Tests go next to each package.", g.v.groupBy)))
}

func (g *gen) preference() {
	g.w.prompt(fmt.Sprintf("One preference for the whole session: start every commit message with the ticket tag %s; our release tooling reads it.", g.v.tag))
	g.w.respond(text("Understood."))
	g.fact(Fact{Category: CatExtraction, Kind: "preference", Question: "What must every commit message start with?", Expect: []string{g.v.tag}})
}

func (g *gen) instruction() {
	v := &g.v
	g.w.prompt(fmt.Sprintf("Write the export to %s, and run the preview server on port %d.", v.oldPath, v.oldPort))
	src := fmt.Sprintf("package export\n\n// defaultPath is where the export is written.\nconst defaultPath = %q\n\n// previewPort is the port of the preview server.\nconst previewPort = %d\n", v.oldPath, v.oldPort)
	g.w.create([]part{text("I'll put both settings in the export package.")}, "internal/export/settings.go", src)
	g.w.respond(text("Done: internal/export/settings.go holds the export path and the preview port."))
}

func (g *gen) decision() {
	n := 40 + g.r.IntN(200)
	g.w.prompt("The rate lookups are slow when the report runs over a whole year. How should we cache them?")
	g.w.read(nil, "internal/rates/rates.go", g.files[3].src)
	g.w.respond(thinking("Each lookup goes to the rates table; a bounded cache keyed by currency pair fits."),
		text(fmt.Sprintf("Decision: an LRU cache of %d entries keyed by currency pair, evicting the least recently used entry; a plain map would grow without bound with the %d pairs in a year of data.", g.v.cacheSize, n)))
	g.w.edit(nil, "internal/rates/rates.go", "func Lookup(", fmt.Sprintf("var lookups = newLRU(%d)\n\nfunc Lookup(", g.v.cacheSize))
	g.w.respond(text("The cache is in place."))
	g.fact(Fact{Category: CatExtraction, Kind: "decision", Question: "What cache did the agent decide on for rate lookups, and of what size?", Expect: []string{"LRU", fmt.Sprint(g.v.cacheSize)}})
	g.probe(Probe{Kind: ProbeDecision, Question: "What did the agent choose for caching rate lookups, and why?", Expect: []string{"LRU", fmt.Sprint(g.v.cacheSize)}, Why: []string{"without bound", "bounded cache"}})
}

func (g *gen) integration() {
	v := &g.v
	g.w.prompt("Run the importer's integration tests and tell me how many rows the big fixture imports.")
	var out strings.Builder
	fmt.Fprintf(&out, "=== RUN   %s\n", v.testName)
	for i := 0; i < 120; i++ {
		fmt.Fprintf(&out, "    import_test.go:%d: batch %d: %d %s records committed (%s %s)\n", 40+i%9, i, 200+g.r.IntN(300), g.filler1(), g.filler1(), g.filler1())
	}
	fmt.Fprintf(&out, "    import_test.go:88: imported %d rows from testdata/big.csv in 2.41s\n--- PASS: %s (2.43s)\nPASS\nok  \texample.com/%s/internal/importer\t2.512s\n", v.rows, v.testName, g.p.name)
	g.w.bash(nil, v.command, "Run the importer integration tests", out.String(), 0)
	g.w.respond(text(fmt.Sprintf("The integration test passes; the big fixture imports %d rows.", v.rows)))
	g.fact(Fact{Category: CatExtraction, Kind: "command", Question: "Which command runs the importer's integration tests?", Expect: []string{v.command}})
	g.fact(Fact{Category: CatExtraction, Kind: "result", Question: "How many rows does the big fixture import?", Expect: []string{fmt.Sprint(v.rows)}})
}

func (g *gen) buildError() {
	v := &g.v
	g.w.prompt("Build everything and fix whatever broke after the merge.")
	g.w.bash(nil, "go build ./...", "Build all packages",
		fmt.Sprintf("# example.com/%s/internal/report\n%s:%d:%d: undefined: %s", g.p.name, v.brokenFile, 20+g.r.IntN(200), 2+g.r.IntN(30), v.oldSym), 1)
	g.w.respond(text(fmt.Sprintf("%s was renamed to %s in the merge; updating the call site.", v.oldSym, v.fixSym)))
	g.w.edit(nil, v.brokenFile, "rows, err := "+v.oldSym+"(line)", "rows, err := "+v.fixSym+"(line)")
	g.w.bash(nil, "go build ./...", "Build all packages", "", 0)
	g.w.respond(text(fmt.Sprintf("Fixed: the call site now uses %s and the build passes.", v.fixSym)))
	g.fact(Fact{Category: CatErrorsFixes, Kind: "build_error", Question: "What broke the build after the merge, and what fixed it?", Expect: []string{"undefined: " + v.oldSym, v.fixSym}})
	g.probe(Probe{Kind: ProbeRecall, Question: "Which file did the build error after the merge point at?", Expect: []string{v.brokenFile}})
}

func (g *gen) newFile() {
	v := &g.v
	g.w.prompt(fmt.Sprintf("Add a %s function that rejects rows with a negative amount or an empty category, and call it before import.", v.validator))
	src := fmt.Sprintf("package importer\n\nimport \"errors\"\n\n// %s rejects rows with a negative amount or an empty category.\nfunc %s(r Row) error {\n\tif r.Cents < 0 {\n\t\treturn errors.New(\"negative amount\")\n\t}\n\tif r.Category == \"\" {\n\t\treturn errors.New(\"empty category\")\n\t}\n\treturn nil\n}\n", v.validator, v.validator)
	g.w.create(nil, v.valFile, src)
	g.w.edit(nil, "internal/importer/importer.go", "\tout = append(out, r)", fmt.Sprintf("\tif err := %s(r); err != nil {\n\t\treturn nil, err\n\t}\n\tout = append(out, r)", v.validator))
	g.w.bash(nil, "go test ./internal/importer/...", "Run the importer tests", fmt.Sprintf("ok  \texample.com/%s/internal/importer\t0.31%ds", g.p.name, g.r.IntN(10)), 0)
	g.w.respond(text(fmt.Sprintf("%s is in place and called before every row is imported.", v.validator)))
	g.fact(Fact{Category: CatExtraction, Kind: "path", Question: fmt.Sprintf("Which file holds %s?", v.validator), Expect: []string{v.valFile}})
}

// temporal asks for a flag, then right after it for a footer.
func (g *gen) temporal() {
	g.temporalFirst()
	g.temporalSecond()
}

func (g *gen) temporalFirst() {
	g.w.prompt(fmt.Sprintf("Add a --%s flag to the report command.", g.v.flag))
	g.w.edit(nil, "internal/report/report.go", "fs := flag.NewFlagSet(\"report\", flag.ExitOnError)", fmt.Sprintf("fs := flag.NewFlagSet(\"report\", flag.ExitOnError)\n\tfs.Bool(%q, false, \"\")", g.v.flag))
	g.w.respond(text("The flag is added."))
}

func (g *gen) temporalSecond() {
	g.w.prompt(fmt.Sprintf("Next, add a %s footer to the report output.", g.v.footer))
	g.w.edit(nil, "internal/report/report.go", "\treturn w.Flush()", fmt.Sprintf("\tfmt.Fprintln(w, %q)\n\treturn w.Flush()", g.v.footer))
	g.w.respond(text("The footer is printed after the last row."))
	g.fact(Fact{Category: CatTemporal, Kind: "order", Question: fmt.Sprintf("What did the user ask for right after the --%s flag?", g.v.flag), Expect: []string{g.v.footer}, After: g.v.flag})
}

func (g *gen) correction() {
	v := &g.v
	g.w.prompt(fmt.Sprintf("Actually, change of plan: write the export to %s, and the preview server must listen on port %d.", v.newPath, v.newPort))
	g.w.edit(nil, "internal/export/settings.go", fmt.Sprintf("const defaultPath = %q", v.oldPath), fmt.Sprintf("const defaultPath = %q", v.newPath))
	g.w.edit(nil, "internal/export/settings.go", fmt.Sprintf("const previewPort = %d", v.oldPort), fmt.Sprintf("const previewPort = %d", v.newPort))
	g.w.respond(text("Both settings are updated."))
	g.fact(Fact{Category: CatKnowledgeUpdate, Kind: "path", Question: "Where must the export be written?", Expect: []string{v.newPath}, Superseded: []string{v.oldPath}})
	g.fact(Fact{Category: CatKnowledgeUpdate, Kind: "value", Question: "Which port must the preview server listen on?", Expect: []string{fmt.Sprint(v.newPort)}, Superseded: []string{fmt.Sprint(v.oldPort)}})
}

func (g *gen) testFailure() {
	v := &g.v
	want := 100 + g.r.IntN(900)
	g.w.prompt("Some monthly totals are off by a cent; find out why.")
	g.w.bash(nil, "go test ./internal/report/...", "Run the report tests",
		fmt.Sprintf("--- FAIL: %s (0.00s)\n    report_test.go:57: total for 2025-03 = %d, want %d\nFAIL\nFAIL\texample.com/%s/internal/report\t0.214s\nFAIL", v.failTest, want-1, want, g.p.name), 1)
	g.w.respond(text("The monthly total converts cents with a truncating cast; math.Round fixes the last cent."))
	g.w.edit(nil, "internal/report/report.go", "cents := int64(v * 100)", "cents := int64(math.Round(v * 100))")
	g.w.bash(nil, "go test ./internal/report/...", "Run the report tests", fmt.Sprintf("ok  \texample.com/%s/internal/report\t0.198s", g.p.name), 0)
	g.w.respond(text("Fixed with math.Round; the report tests pass."))
	g.fact(Fact{Category: CatErrorsFixes, Kind: "test_failure", Question: "Which test failed on the monthly totals, and what fixed it?", Expect: []string{v.failTest, "math.Round"}})
}

// latest is the last request: the agent has read two files for it when the
// session is compacted.
func (g *gen) latest() {
	v := &g.v
	req := fmt.Sprintf("Next: make the export stream rows instead of buffering the whole ledger. Keep the %s footer, flush every %d rows, and add a benchmark named Benchmark%sStream that writes %d rows to io.Discard. Don't change the CSV column order.",
		v.footer, 100+g.r.IntN(900), camel(g.word()), 10000+g.r.IntN(90000))
	g.w.prompt(req)
	g.fact(Fact{Category: CatLatestRequest, Kind: "verbatim", Question: "What is the user's latest request, word for word?", Expect: []string{req}, Verbatim: true})
	g.w.read([]part{thinking("Streaming needs the writer and the report loop; read both.")}, "internal/export/export.go", g.files[1].src)
	g.w.read(nil, "internal/report/report.go", g.files[0].src)
	g.probe(Probe{Kind: ProbeContinuation, Question: "What is the agent working on, and what comes next?", Expect: []string{"stream rows"}, Next: []string{"benchmark"}})
}

func (g *gen) abstain() {
	for _, i := range g.r.Perm(len(abstentions))[:2] {
		a := abstentions[i]
		g.fact(Fact{Category: CatAbstention, Kind: "never_said", Question: a.question, Invented: a.invented})
	}
}
