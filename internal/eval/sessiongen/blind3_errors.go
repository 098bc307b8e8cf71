package sessiongen

import (
	"fmt"
	"strings"
)

// failureCase is a command that fails with a tool's real-looking output,
// the error's words to keep, and the edit that fixes it (its new text holds
// the fix's words).
type failureCase struct {
	cmd, out      string
	errWords      []string
	path          string
	old, new, fix string
}

// failure runs a command that fails; the agent says little, fixes it with
// an Edit and the command passes.
func (b *blind3) failure() {
	kinds := []func() failureCase{b.tscFailure, b.pythonFailure, b.gradleFailure, b.cargoFailure, b.makeFailure}
	i := b.r.IntN(len(kinds))
	for b.used[fmt.Sprint("failure:", i)] {
		i = b.r.IntN(len(kinds))
	}
	b.used[fmt.Sprint("failure:", i)] = true
	c := kinds[i]()
	b.w.prompt(fmt.Sprintf(b.pick([]string{"Run `%s`, something is off.", "`%s` is red on my machine, can you check?", "Please run `%s` before we go on."}), c.cmd))
	b.w.bash(nil, c.cmd, "Run it", c.out, 1)
	b.w.respond(text(b.pick([]string{"I see the problem.", "Let me fix that.", "One moment."})))
	b.w.edit(nil, c.path, c.old, c.new)
	b.w.bash(nil, c.cmd, "Run it again", "ok", 0)
	b.w.respond(text(b.pick([]string{"Passes now.", "Green again.", "Fixed."})))
	b.fact(Fact{Category: CatErrorsFixes, Kind: "error_fix", Question: "What error did `" + c.cmd + "` give, and what fixed it?", Expect: append(append([]string(nil), c.errWords...), c.fix)})
}

func (b *blind3) tscFailure() failureCase {
	prop, fixed, typ := b.bword(), b.bword(), camel(b.bword())
	file := "src/" + b.filler1() + "/view.ts"
	out := lines(10+b.r.IntN(20), func(i int) string {
		return fmt.Sprintf("src/%s/%s.ts(%d,%d): note: checked", b.filler1(), b.filler1(), 10+i, 1+b.r.IntN(40))
	}) + fmt.Sprintf("%s(%d,%d): error TS2339: Property '%s' does not exist on type '%s'.\n\nFound 1 error in %s:%d\n", file, 40+b.r.IntN(200), 5+b.r.IntN(30), prop, typ, file, 40)
	return failureCase{cmd: "npx tsc --noEmit", out: out, errWords: []string{"TS2339", prop}, path: file,
		old: "  return row." + prop + ";\n", new: "  return row." + fixed + ";\n", fix: fixed}
}

func (b *blind3) pythonFailure() failureCase {
	attr, loader := b.bword(), "load_"+b.bword()
	var tb strings.Builder
	tb.WriteString("Traceback (most recent call last):\n")
	for i := 0; i < 6+b.r.IntN(8); i++ {
		fmt.Fprintf(&tb, "  File \"/home/dev/src/%s/pipeline/%s.py\", line %d, in %s\n    %s(%s)\n", b.p.name, b.filler1(), 10+b.r.IntN(300), b.filler1(), b.filler1(), b.filler1())
	}
	fmt.Fprintf(&tb, "AttributeError: 'NoneType' object has no attribute '%s'", attr)
	return failureCase{cmd: "python -m pipeline.nightly", out: tb.String(), errWords: []string{"AttributeError", attr}, path: "pipeline/config.py",
		old: "    return cfg\n", new: fmt.Sprintf("    if cfg.%s is None:\n        cfg.%s = %s()\n    return cfg\n", attr, attr, loader), fix: loader}
}

func (b *blind3) gradleFailure() failureCase {
	pool, starter := b.bword(), "start"+camel(b.bword())+"Pool"
	out := lines(20+b.r.IntN(30), func(i int) string {
		return fmt.Sprintf("> Task :%s:%s UP-TO-DATE", b.filler1(), b.filler1())
	}) + fmt.Sprintf("\nReportServiceTest > exportsTotals() FAILED\n    java.lang.IllegalStateException: %s pool not started\n        at com.example.report.ReportService.export(ReportService.java:%d)\n        at com.example.report.ReportServiceTest.exportsTotals(ReportServiceTest.java:%d)\n\n%d tests completed, 1 failed\n\nFAILURE: Build failed with an exception.", pool, 30+b.r.IntN(90), 10+b.r.IntN(50), 20+b.r.IntN(60))
	return failureCase{cmd: "./gradlew test", out: out, errWords: []string{"IllegalStateException", pool}, path: "src/main/java/com/example/report/ReportService.java",
		old: "        this.pool = pool;\n", new: "        this.pool = pool;\n        " + starter + "();\n", fix: starter}
}

func (b *blind3) cargoFailure() failureCase {
	v := b.bword()
	out := lines(15+b.r.IntN(25), func(i int) string {
		return fmt.Sprintf("   Compiling %s-%s v0.%d.%d", b.filler1(), b.filler1(), b.r.IntN(9), b.r.IntN(20))
	}) + fmt.Sprintf("error[E0382]: borrow of moved value: `%s`\n  --> src/report.rs:%d:20\n   |\n   = note: move occurs because `%s` has type `Vec<Row>`, which does not implement the `Copy` trait\n\nerror: could not compile `report` (bin \"report\") due to 1 previous error", v, 20+b.r.IntN(100), v)
	return failureCase{cmd: "cargo build --release", out: out, errWords: []string{"E0382", v}, path: "src/report.rs",
		old: "    let totals = sum(" + v + ");\n", new: "    let totals = sum(" + v + ".clone());\n", fix: "clone"}
}

func (b *blind3) makeFailure() failureCase {
	fn, header := b.bword()+"_init", b.bword()+".h"
	out := lines(10+b.r.IntN(20), func(i int) string {
		return fmt.Sprintf("cc -O2 -Wall -c src/%s.c -o build/%s.o", b.filler1(), b.filler1())
	}) + fmt.Sprintf("src/main.c:%d:5: error: implicit declaration of function '%s' [-Werror=implicit-function-declaration]\ncc1: all warnings being treated as errors\nmake: *** [Makefile:%d: build/main.o] Error 1", 10+b.r.IntN(90), fn, 20+b.r.IntN(30))
	return failureCase{cmd: "make all", out: out, errWords: []string{"implicit declaration", fn}, path: "src/main.c",
		old: "#include <stdio.h>\n", new: "#include <stdio.h>\n#include \"" + header + "\"\n", fix: header}
}

// latest is the latest request, which the agent has started on and whose
// next step it announced.
func (b *blind3) latest() {
	w, n := b.bword(), 100+b.r.IntN(900)
	req := fmt.Sprintf("Last thing for today: add a --%s flag to the report command that limits the output to the top %d rows, with a test, and update the README's usage section. Keep the default output unchanged.", w, n)
	b.w.prompt(req)
	b.fact(Fact{Category: CatLatestRequest, Kind: "verbatim", Question: "What is the user's latest request, word for word?", Expect: []string{req}, Verbatim: true})
	b.w.read([]part{thinking("Read the command first.")}, "internal/report/report.go", b.files[0].src)
	b.w.respond(text("The flag fits next to the existing ones. Next I'll write the test for the row limit, then the README."))
	b.probe(Probe{Kind: ProbeContinuation, Question: "What is the agent working on, and what comes next?", Expect: []string{"--" + w, "top"}, Next: []string{"test", "README"}})
}
