package sessiongen

import (
	"fmt"
	"strings"
)

// hDecision: the agent's choice of cache is only in the code it writes.
func (g *holdout) hDecision() {
	v, h := &g.v, &g.h
	g.w.prompt(g.pick(decisionAsk))
	g.w.read(nil, "internal/rates/rates.go", g.files[3].src)
	code := fmt.Sprintf("var lookups = %s.New[pair, float64](%d) // bounded: a year of data has many pairs\n\nfunc Lookup(", h.cacheKind, v.cacheSize)
	if g.r.IntN(2) == 0 {
		g.w.edit([]part{thinking("Bounded cache in front of the table.")}, "internal/rates/rates.go", "func Lookup(", code)
	} else {
		src := fmt.Sprintf("package rates\n\nimport \"example.com/%s/internal/%s\"\n\ntype pair struct{ from, to string }\n\nvar lookups = %s.New[pair, float64](%d)\n", g.p.name, h.cacheKind, h.cacheKind, v.cacheSize)
		g.w.create(nil, "internal/rates/cache.go", src)
	}
	g.w.bash(nil, "go test ./internal/rates/...", "Run the rates tests", g.testOutput("rates"), 0)
	g.w.respond(text(g.pick([]string{"That should take care of the slow year-long runs.", "Lookups go through a cache now; tests pass.", "Done."})))
	g.fact(Fact{Category: CatExtraction, Kind: "decision", Question: "What cache did the agent put in front of rate lookups, and of what size?", Expect: []string{h.cacheKind, fmt.Sprint(v.cacheSize)}})
}

// hIntegration: the row count is only in the test's output, a few lines
// before its end.
func (g *holdout) hIntegration() {
	v, h := &g.v, &g.h
	g.w.prompt(g.pick(integrationAsk))
	var out strings.Builder
	fmt.Fprintf(&out, "=== RUN   %s\n", v.testName)
	for i := 0; i < 80+g.r.IntN(80); i++ {
		fmt.Fprintf(&out, "    import_test.go:%d: batch %d: %d %s records committed\n", 40+i%9, i, 200+g.r.IntN(300), g.filler1())
	}
	fmt.Fprintf(&out, h.rowsLine+"\n", v.rows)
	fmt.Fprintf(&out, "--- PASS: %s (2.43s)\nPASS\n", v.testName)
	if g.r.IntN(2) == 0 {
		fmt.Fprintf(&out, "coverage: %d.%d%% of statements\n", 40+g.r.IntN(50), g.r.IntN(10))
	}
	fmt.Fprintf(&out, "ok  \texample.com/%s/internal/importer\t2.512s\n", g.p.name)
	g.w.bash(nil, h.command, "Integration tests", out.String(), 0)
	g.w.respond(text(g.pick([]string{"All green.", "The suite passes.", "Integration tests pass; the output is above."})))
	g.fact(Fact{Category: CatExtraction, Kind: "command", Question: "Which command runs the importer's integration tests?", Expect: []string{h.command}})
	g.fact(Fact{Category: CatExtraction, Kind: "result", Question: "How many rows does the big fixture import?", Expect: []string{fmt.Sprint(v.rows)}})
}

// hBuildError: the fix is only in the edit that follows the failure.
func (g *holdout) hBuildError() {
	v, h := &g.v, &g.h
	g.w.prompt(g.pick(fixAsk))
	g.w.bash(nil, h.buildCmd, "Build", fmt.Sprintf("# example.com/%s/internal/report\n%s:%d:%d: %s", g.p.name, v.brokenFile, 20+g.r.IntN(200), 2+g.r.IntN(30), h.buildErr), 1)
	if h.fixFirst {
		g.w.read([]part{text("Let me look at that file.")}, v.brokenFile, g.files[g.r.IntN(len(g.files))].src)
	}
	g.w.edit(nil, v.brokenFile, "rows, err := "+v.oldSym+"(line, 0)", "rows, err := "+v.fixSym+"(line)")
	g.w.bash(nil, h.buildCmd, "Build", "", 0)
	g.w.respond(text(g.pick([]string{"Builds cleanly now.", "It compiles again.", "Green again."})))
	g.fact(Fact{Category: CatErrorsFixes, Kind: "build_error", Question: "What broke the build after the merge, and what fixed it?", Expect: []string{h.errWant, v.fixSym}})
}

// hNewFile: the path is in a Write; the request does not name the function.
func (g *holdout) hNewFile() {
	v := &g.v
	g.w.prompt(g.pick(validatorAsk))
	pkg := v.valFile[strings.LastIndex(v.valFile[:strings.LastIndex(v.valFile, "/")], "/")+1 : strings.LastIndex(v.valFile, "/")]
	src := fmt.Sprintf("package %s\n\nimport \"errors\"\n\nfunc %s(amount int64, category string) error {\n\tif amount < 0 {\n\t\treturn errors.New(\"negative amount\")\n\t}\n\tif category == \"\" {\n\t\treturn errors.New(\"empty category\")\n\t}\n\treturn nil\n}\n", pkg, v.validator)
	g.w.create(nil, v.valFile, src)
	g.w.edit(nil, "internal/importer/importer.go", "\tout = append(out, r)", fmt.Sprintf("\tif err := %s(r.Cents, r.Category); err != nil {\n\t\treturn nil, err\n\t}\n\tout = append(out, r)", v.validator))
	g.w.bash(nil, "go test ./internal/...", "Run the tests", g.testOutput("importer"), 0)
	g.w.respond(text(g.pick([]string{"Done — bad rows are rejected now.", "Invalid rows stop the import now.", "Added the check and wired it in."})))
	g.fact(Fact{Category: CatExtraction, Kind: "path", Question: fmt.Sprintf("Which file holds %s?", v.validator), Expect: []string{v.valFile}})
}

func (g *holdout) hTemporal() {
	g.w.prompt(fmt.Sprintf(g.pick(flagAsk), g.v.flag))
	g.w.edit(nil, "internal/report/report.go", "fs := flag.NewFlagSet(\"report\", flag.ExitOnError)", fmt.Sprintf("fs := flag.NewFlagSet(\"report\", flag.ExitOnError)\n\tfs.Bool(%q, false, \"\")", g.v.flag))
	g.w.respond(text("Added."))
	g.w.prompt(fmt.Sprintf(g.pick(footerAsk), g.v.footer))
	g.w.edit(nil, "internal/report/report.go", "\treturn w.Flush()", fmt.Sprintf("\tfmt.Fprintln(w, %q)\n\treturn w.Flush()", g.v.footer))
	g.w.respond(text("Done."))
	g.fact(Fact{Category: CatTemporal, Kind: "order", Question: fmt.Sprintf("What did the user ask for right after the --%s flag?", g.v.flag), Expect: []string{g.v.footer}, After: g.v.flag})
}

// hPathUpdate and hPortUpdate change the early instruction, each in its
// own turn, without a marker word; the port sometimes deep in a long
// message.
func (g *holdout) hPathUpdate() {
	v := &g.v
	g.w.prompt(fmt.Sprintf(g.pick(pathUpdateSay), v.newPath))
	g.w.edit(nil, "internal/export/settings.go", fmt.Sprintf("defaultPath = %q", v.oldPath), fmt.Sprintf("defaultPath = %q", v.newPath))
	g.w.respond(text("Moved."))
	g.fact(Fact{Category: CatKnowledgeUpdate, Kind: "path", Question: "Where must the export be written?", Expect: []string{v.newPath}, Superseded: []string{v.oldPath}})
}

func (g *holdout) hPortUpdate() {
	v := &g.v
	say := fmt.Sprintf(g.pick(portUpdateSay), v.newPort, v.oldPort)
	if g.r.IntN(2) == 0 {
		say = g.longMessage(2+g.r.IntN(3), strings.TrimSuffix(strings.ToLower(say[:1])+say[1:], "."))
	}
	g.w.prompt(say)
	g.w.edit(nil, "internal/export/settings.go", fmt.Sprintf("previewPort = %d", v.oldPort), fmt.Sprintf("previewPort = %d", v.newPort))
	g.w.respond(text("Updated the setting."))
	g.fact(Fact{Category: CatKnowledgeUpdate, Kind: "value", Question: "Which port must the preview server listen on?", Expect: []string{fmt.Sprint(v.newPort)}, Superseded: []string{fmt.Sprint(v.oldPort)}})
}

// hTestFailure: the fix is only in the edit.
func (g *holdout) hTestFailure() {
	v, h := &g.v, &g.h
	want := 100 + g.r.IntN(900)
	g.w.prompt(g.pick(monthlyAsk))
	g.w.bash(nil, "go test ./internal/report/...", "Report tests",
		fmt.Sprintf("--- FAIL: %s (0.00s)\n    report_test.go:57: total for 2025-03 = %d, want %d\nFAIL\nFAIL\texample.com/%s/internal/report\t0.214s\nFAIL", v.failTest, want-1, want, g.p.name), 1)
	g.w.respond(text("Found it."))
	g.w.edit(nil, "internal/report/report.go", "cents := int64(v * 100)", "cents := int64("+h.fixFunc+"(v * 100))")
	g.w.bash(nil, "go test ./internal/report/...", "Report tests", fmt.Sprintf("ok  \texample.com/%s/internal/report\t0.198s", g.p.name), 0)
	g.w.respond(text(g.pick([]string{"Tests pass now.", "Green.", "Totals match now."})))
	g.fact(Fact{Category: CatErrorsFixes, Kind: "test_failure", Question: "Which test failed on the monthly totals, and what fixed it?", Expect: []string{v.failTest, h.fixFunc}})
}

// hLatest is a long last request, sometimes a list over several lines.
func (g *holdout) hLatest() {
	v := &g.v
	flush, bench, rows := 100+g.r.IntN(900), "Benchmark"+camel(g.word())+"Stream", 10000+g.r.IntN(90000)
	var req string
	if g.r.IntN(2) == 0 {
		req = fmt.Sprintf("Next step is streaming. Right now the exporter buffers the whole ledger in memory, which falls over on the big customers. I'd like:\n- rows written as they are produced, flushed every %d rows\n- the %s trailer kept exactly as it is\n- a %s benchmark writing %d rows to io.Discard\nLeave the CSV column order alone, downstream parsers depend on it.", flush, v.footer, bench, rows)
	} else {
		req = fmt.Sprintf("Let's make the exporter stream rather than hold the ledger in memory: write rows as they come, flush every %d rows, keep the %s trailer, and add %s that pushes %d rows into io.Discard so we can watch allocations. The CSV columns stay in their current order.", flush, v.footer, bench, rows)
	}
	g.w.prompt(req)
	g.fact(Fact{Category: CatLatestRequest, Kind: "verbatim", Question: "What is the user's latest request, word for word?", Expect: []string{req}, Verbatim: true})
	g.w.read(nil, "internal/export/export.go", g.files[1].src)
	g.w.read(nil, "internal/report/report.go", g.files[0].src)
}

// hFiller is an ordinary turn in the holdout family's words.
func (g *holdout) hFiller() {
	f := g.files[g.r.IntN(len(g.files))]
	a, c := g.filler1(), g.filler1()
	say := func() string { return fmt.Sprintf(g.pick(chatter), 1+g.r.IntN(9), f.path, a) }
	switch g.r.IntN(4) {
	case 0:
		g.w.prompt(fmt.Sprintf("Errors in %s come back bare; give them some context.", f.path))
		g.w.read(nil, f.path, f.src)
		g.w.grep(nil, "return nil, err$", g.grepOutput(f.pkg))
		g.w.edit(nil, f.path, "\t\treturn nil, err\n", fmt.Sprintf("\t\treturn nil, fmt.Errorf(\"%s %s: %%w\", err)\n", a, c))
		g.w.bash(nil, fmt.Sprintf("go test ./internal/%s/...", f.pkg), "Tests", g.testOutput(f.pkg), 0)
		g.w.respond(text(say()))
	case 1:
		g.w.prompt(fmt.Sprintf("What does %s do with the %s %s? Explain.", f.path, a, c))
		g.w.read(nil, f.path, f.src)
		var b strings.Builder
		for i := 0; i < 5+g.r.IntN(6); i++ {
			fmt.Fprintf(&b, "- %s keeps the %s per %s, %d at a time.\n", camel(g.filler1())+camel(g.filler1()), g.filler1(), g.filler1(), 2+g.r.IntN(60))
		}
		g.w.respond(text(b.String()))
	case 2:
		g.w.prompt(fmt.Sprintf("Is %s covered by tests at all? Run them and see.", f.pkg))
		g.w.bash(nil, fmt.Sprintf("go test -cover ./internal/%s/...", f.pkg), "Coverage", g.testOutput(f.pkg)+fmt.Sprintf("coverage: %d.%d%% of statements\n", 20+g.r.IntN(70), g.r.IntN(10)), 0)
		g.w.read(nil, f.path, f.src)
		g.w.respond(text(say()))
	default:
		g.w.prompt(fmt.Sprintf("Tidy up the %s helpers in %s, nothing fancy.", a, f.path))
		g.w.read(nil, f.path, f.src)
		g.w.edit(nil, f.path, "\treturn out, nil\n}\n", fmt.Sprintf("\treturn out, nil // %s %s\n}\n", a, c))
		g.w.bash(nil, "go vet ./...", "Vet", "", 0)
		g.w.respond(text(say()))
	}
}
