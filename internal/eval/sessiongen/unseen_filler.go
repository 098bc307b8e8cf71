package sessiongen

import (
	"fmt"
	"strings"
)

// utooling is how the filler turns of a scenario work on its repository:
// its languages, test runner, linter and the commands that inspect a
// running system.
type utooling struct {
	// tests returns a passing run of the test suite.
	tests func(g *ugen) (cmd, out string)
	// lint returns a lint run with findings in f, and an edit of f that
	// fixes them (old is a part of f.src).
	lint func(g *ugen, f ufile) (cmd, dirty, clean, old, new string)
	// testFor writes a new test file for f about topic.
	testFor func(g *ugen, f ufile, topic string) (path, src string)
	// grepLine is a line of f that uses sym, as Grep prints it.
	grepLine func(g *ugen, f ufile, sym string) string
	// inspect is a look at the running system: the request, the command,
	// its output and the agent's answer.
	inspect func(g *ugen) (ask, cmd, desc, out, answer string)
}

// fillerTurn writes one ordinary turn: a request, a tool loop with large
// results, and a short answer.
func (g *ugen) fillerTurn() {
	start := g.w.buf.Len()
	switch g.r.IntN(6) {
	case 0:
		g.explainTurn()
	case 1:
		g.lintTurn()
	case 2:
		g.testTurn()
	case 3:
		g.searchTurn()
	default:
		g.inspectTurn()
	}
	g.spans = append(g.spans, [2]int{start, g.w.buf.Len()})
}

// prompt writes a filler request and remembers it for summaries.
func (g *ugen) prompt(s string) {
	g.w.prompt(s)
	short := s
	if i := strings.IndexAny(short, ".?"); i > 0 {
		short = short[:i]
	}
	g.recent = append(g.recent, short)
	if len(g.recent) > 3 {
		g.recent = g.recent[1:]
	}
}

func (g *ugen) explainTurn() {
	f := g.file()
	a, b := g.word(), g.word()
	g.prompt(g.pick(
		fmt.Sprintf("How does %s deal with %s %s? I want to understand it before we change anything there.", f.path, a, b),
		fmt.Sprintf("Walk me through %s, specifically the %s part. Why is it done that way?", f.path, a),
		fmt.Sprintf("What happens in %s when a %s has no %s?", f.path, a, b),
	))
	g.w.read([]part{thinking(fmt.Sprintf("The user wants to understand the %s handling. Read the file first.", a))}, f.path, f.src)
	if o := g.file(); o.path != f.path && g.r.IntN(2) == 0 {
		g.w.read([]part{text("It calls into another module; reading that too.")}, o.path, o.src)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "Here is how %s handles it:\n\n", f.path)
	for i, n := 0, 4+g.r.IntN(6); i < n; i++ {
		fmt.Fprintf(&s, "%d. It takes each %s, looks up its %s and keeps the %s %s for the next step.\n", i+1, g.word(), g.word(), g.word(), g.word())
	}
	fmt.Fprintf(&s, "\nSo a missing %s falls through to the default %s; nothing fails loudly there.", b, g.word())
	g.w.respond(text(s.String()))
}

func (g *ugen) lintTurn() {
	f := g.file()
	cmd, dirty, clean, old, new := g.sc.tools.lint(g, f)
	g.prompt(g.pick(
		fmt.Sprintf("Can you clean up the lint warnings in %s? CI flagged it.", f.path),
		fmt.Sprintf("The linter is complaining about %s, fix whatever it says.", f.path),
	))
	g.w.bash([]part{text("Running the linter to see the findings.")}, cmd, "Run the linter", dirty, 1)
	g.w.read(nil, f.path, f.src)
	g.w.edit([]part{text("Fixing the finding.")}, f.path, old, new)
	g.w.bash(nil, cmd, "Run the linter again", clean, 0)
	g.w.respond(text(fmt.Sprintf("Fixed: the linter is clean on %s now.", f.path)))
}

func (g *ugen) testTurn() {
	f := g.file()
	topic := g.word() + " " + g.word()
	g.prompt(g.pick(
		fmt.Sprintf("Add tests for the %s handling in %s.", topic, f.path),
		fmt.Sprintf("There's no coverage for %s in %s, can you add some tests?", topic, f.path),
	))
	g.w.read(nil, f.path, f.src)
	path, src := g.sc.tools.testFor(g, f, topic)
	g.w.create([]part{thinking("Cover the normal case, the empty input and a duplicate.")}, path, src)
	cmd, out := g.sc.tools.tests(g)
	g.w.bash(nil, cmd, "Run the tests", out, 0)
	g.w.respond(text(fmt.Sprintf("Added %s; it covers the %s handling and the suite passes.", path, topic)))
}

func (g *ugen) searchTurn() {
	sym := g.word() + "_" + g.word()
	g.prompt(g.pick(
		fmt.Sprintf("Where else do we use %s? I'd like to know before renaming it.", sym),
		fmt.Sprintf("Find every place that touches %s.", sym),
	))
	var out strings.Builder
	seen := map[string]bool{}
	for i, n := 0, 6+g.r.IntN(20); i < n; i++ {
		f := g.file()
		out.WriteString(g.sc.tools.grepLine(g, f, sym))
		seen[f.path] = true
	}
	ids := g.w.respond(g.w.tool("Grep", map[string]any{"pattern": sym, "output_mode": "content", "-n": true}))
	g.w.result(ids[0], out.String(), false, map[string]any{"mode": "content", "numFiles": len(seen), "content": out.String()})
	f := g.file()
	g.w.read([]part{text("Reading one of the call sites to see how it's used.")}, f.path, f.src)
	g.w.respond(text(fmt.Sprintf("%s is used in %d files. Renaming it is mechanical; the call sites only read it.", sym, len(seen))))
}

func (g *ugen) inspectTurn() {
	ask, cmd, desc, out, answer := g.sc.tools.inspect(g)
	g.prompt(ask)
	g.w.bash([]part{thinking("Check the running system before answering.")}, cmd, desc, out, 0)
	g.w.respond(text(answer))
}

// pad appends generated blocks to b until it holds size characters.
func pad(b *strings.Builder, size int, block func()) {
	for b.Len() < size {
		block()
	}
}

// tableOf renders rows as psql prints a query result.
func tableOf(cols []string, rows [][]string) string {
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = len(c)
		for _, r := range rows {
			widths[i] = max(widths[i], len(r[i]))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				b.WriteString(" | ")
			}
			fmt.Fprintf(&b, " %-*s", widths[i], c)
		}
		b.WriteString("\n")
	}
	line(cols)
	for i, w := range widths {
		if i > 0 {
			b.WriteString("+")
		}
		b.WriteString(strings.Repeat("-", w+2))
	}
	b.WriteString("\n")
	for _, r := range rows {
		line(r)
	}
	fmt.Fprintf(&b, "(%d rows)\n", len(rows))
	return b.String()
}

// pytestOutput is a passing pytest run over files.
func (g *ugen) pytestOutput(files []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "============================= test session starts ==============================\nplatform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0\nrootdir: %s\nconfigfile: pyproject.toml\nplugins: cov-5.0.0, mock-3.14.0\n", g.w.cwd)
	total := 0
	var lines strings.Builder
	for i, f := range files {
		n := 4 + g.r.IntN(30)
		total += n
		fmt.Fprintf(&lines, "%-60s [%3d%%]\n", f+" "+strings.Repeat(".", n), (i+1)*100/len(files))
	}
	fmt.Fprintf(&b, "collected %d items\n\n%s\n", total, lines.String())
	fmt.Fprintf(&b, "============================== %d passed in %d.%02ds ==============================\n", total, 3+g.r.IntN(20), g.r.IntN(100))
	return b.String()
}

// ruffLint is a ruff run finding the unused import every generated Python
// file has, and the edit removing it.
func (g *ugen) ruffLint(f ufile) (cmd, dirty, clean, old, new string) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:5:8: F401 [*] `os` imported but unused\n", f.path)
	for i, n := 0, g.r.IntN(4); i < n; i++ {
		fmt.Fprintf(&b, "%s:%d:89: E501 Line too long (%d > 88)\n", f.path, 20+g.r.IntN(200), 89+g.r.IntN(30))
	}
	b.WriteString("Found errors.\n[*] 1 fixable with the `--fix` option.\n")
	return "make lint", b.String(), "ruff check .\nAll checks passed!\nruff format --check .\n" + fmt.Sprint(20+g.r.IntN(60)) + " files already formatted\n", "import logging\nimport os\n", "import logging\n"
}

// pyTestFile is a pytest module for f about topic.
func (g *ugen) pyTestFile(f ufile, topic string) (path, src string) {
	mod := strings.TrimSuffix(strings.ReplaceAll(f.path, "/", "."), ".py")
	name := strings.ReplaceAll(topic, " ", "_")
	base := f.path[strings.LastIndex(f.path, "/")+1:]
	path = "tests/test_" + strings.TrimSuffix(base, ".py") + "_" + name + ".py"
	var b strings.Builder
	fmt.Fprintf(&b, "import pandas as pd\nimport pytest\n\nfrom %s import *  # noqa: F403\n\n\n@pytest.mark.parametrize(\n    \"rows, want\",\n    [\n", mod)
	for i, n := 0, 8+g.r.IntN(20); i < n; i++ {
		fmt.Fprintf(&b, "        ([{\"%s_id\": %d, \"%s\": %d}], %d),\n", g.word(), g.r.IntN(900), g.word(), g.r.IntN(900), g.r.IntN(900))
	}
	fmt.Fprintf(&b, "    ],\n)\ndef test_%s(rows, want):\n    df = pd.DataFrame(rows)\n    assert len(df) >= 0\n    assert want >= 0\n", name)
	return path, b.String()
}
