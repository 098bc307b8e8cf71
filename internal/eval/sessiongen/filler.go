package sessiongen

import (
	"fmt"
	"strings"
)

// srcFile is a file of the synthetic repository.
type srcFile struct {
	path string
	pkg  string
	src  string
}

func (g *gen) filler1() string { return fillerWords[g.r.IntN(len(fillerWords))] }

// fillerFiles makes the repository's files: report.go, export.go,
// importer.go and rates.go first (the planted turns edit them), then one or
// two more files per package. Agents read the same files again and again,
// so the pool is small.
func (g *gen) fillerFiles() []srcFile {
	files := []srcFile{
		{path: "internal/report/report.go", pkg: "report"},
		{path: "internal/export/export.go", pkg: "export"},
		{path: "internal/importer/importer.go", pkg: "importer"},
		{path: "internal/rates/rates.go", pkg: "rates"},
	}
	for _, p := range g.p.pkgs {
		files = append(files, srcFile{path: fmt.Sprintf("internal/%s/%s.go", p, g.filler1()), pkg: p})
		if g.r.IntN(2) == 0 {
			files = append(files, srcFile{path: fmt.Sprintf("internal/%s/%s_%s.go", p, g.filler1(), g.filler1()), pkg: p})
		}
	}
	seen := map[string]bool{}
	out := files[:0]
	for _, f := range files {
		if seen[f.path] {
			continue
		}
		seen[f.path] = true
		f.src = g.source(f.pkg, f.path)
		out = append(out, f)
	}
	return out
}

// source writes a plausible Go file of 3,000–6,000 tokens.
func (g *gen) source(pkg, path string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// Package %s handles %s %ss.\npackage %s\n\nimport (\n\t\"errors\"\n\t\"flag\"\n\t\"fmt\"\n\t\"io\"\n\t\"sort\"\n)\n\n", pkg, g.filler1(), g.filler1(), pkg)
	switch path {
	case "internal/report/report.go":
		b.WriteString("// Run is the report command.\nfunc Run(args []string, w *Writer) error {\n\tfs := flag.NewFlagSet(\"report\", flag.ExitOnError)\n\tif err := fs.Parse(args); err != nil {\n\t\treturn err\n\t}\n\tfor _, v := range totals() {\n\t\tcents := int64(v * 100)\n\t\tfmt.Fprintln(w, cents)\n\t}\n\treturn w.Flush()\n}\n\n")
	case "internal/importer/importer.go":
		b.WriteString("// Import reads rows.\nfunc Import(rows []Row) ([]Row, error) {\n\tvar out []Row\n\tfor _, r := range rows {\n\tout = append(out, r)\n\t}\n\treturn out, nil\n}\n\n")
	case "internal/rates/rates.go":
		b.WriteString("// Lookup returns the rate of a currency pair.\nfunc Lookup(from, to string) (float64, error) {\n\treturn table[from+to], nil\n}\n\n")
	}
	target := 12000 + g.r.IntN(12000) // characters
	for b.Len() < target {
		a, c, d := g.filler1(), g.filler1(), g.filler1()
		name := camel(a) + camel(c)
		fmt.Fprintf(&b, "// %s returns the %s of each %s, in %s order.\n// It fails with errEmpty%s when there is no %s.\nfunc %s(in []%s, w io.Writer) ([]int64, error) {\n", name, c, a, d, camel(d), a, name, camel(a))
		fmt.Fprintf(&b, "\tif len(in) == 0 {\n\t\treturn nil, errEmpty%s\n\t}\n\tout := make([]int64, 0, len(in))\n", camel(d))
		for j, n := 0, 3+g.r.IntN(8); j < n; j++ {
			x, y := g.filler1(), g.filler1()
			switch g.r.IntN(4) {
			case 0:
				fmt.Fprintf(&b, "\tfor i, %s := range in {\n\t\tif %s.%s > %d {\n\t\t\tout = append(out, int64(i)*%d)\n\t\t}\n\t}\n", x, x, camel(y), g.r.IntN(500), 1+g.r.IntN(64))
			case 1:
				fmt.Fprintf(&b, "\tsort.Slice(out, func(i, j int) bool { return out[i] < out[j] }) // by %s\n", x)
			case 2:
				fmt.Fprintf(&b, "\tif _, err := fmt.Fprintf(w, \"%s %%d %s\\n\", len(out)); err != nil {\n\t\treturn nil, fmt.Errorf(\"writing %s: %%w\", err)\n\t}\n", x, y, x)
			default:
				fmt.Fprintf(&b, "\t%s%s := len(in) %% %d\n\t_ = %s%s\n", x, camel(y), 2+g.r.IntN(30), x, camel(y))
			}
		}
		b.WriteString("\treturn out, nil\n}\n\n")
		if g.r.IntN(5) == 0 {
			fmt.Fprintf(&b, "var errEmpty%s = errors.New(\"%s: no %s\")\n\n", camel(d), pkg, a)
		}
	}
	return b.String()
}

// filler is an ordinary turn: a request, a tool loop over the repository
// with large results, and a short answer.
func (g *gen) filler() {
	f := g.files[g.r.IntN(len(g.files))]
	other := g.files[g.r.IntN(len(g.files))]
	a, c := g.filler1(), g.filler1()
	switch g.r.IntN(3) {
	case 0:
		g.w.prompt(fmt.Sprintf("Look through %s and tighten the error messages: wrap errors with %%w where they are returned bare.", f.path))
		g.w.read([]part{text("Reading the file first.")}, f.path, f.src)
		g.w.grep(nil, "return nil, err$", g.grepOutput(f.pkg))
		g.w.edit(nil, f.path, "\t\treturn nil, err\n", fmt.Sprintf("\t\treturn nil, fmt.Errorf(\"%s %s: %%w\", err)\n", a, c))
		g.w.bash(nil, fmt.Sprintf("go test ./internal/%s/...", f.pkg), fmt.Sprintf("Run the %s tests", f.pkg), g.testOutput(f.pkg), 0)
		g.w.respond(text(fmt.Sprintf("Done: the errors in %s are wrapped with context and the %s tests pass.", f.path, f.pkg)))
	case 1:
		g.w.prompt(fmt.Sprintf("How does the %s package compute the %s %s? Walk me through it.", f.pkg, a, c))
		g.w.read([]part{thinking("Read the package and the code that calls it.")}, f.path, f.src)
		if other.path != f.path {
			g.w.read(nil, other.path, other.src)
		}
		var b strings.Builder
		for i := 0; i < 6+g.r.IntN(6); i++ {
			fmt.Fprintf(&b, "%d. %s walks each %s, keeps the %s per %s and sorts by %s.\n", i+1, camel(g.filler1())+camel(g.filler1()), g.filler1(), g.filler1(), g.filler1(), g.filler1())
		}
		g.w.respond(text("Here is how it works:\n" + b.String()))
	default:
		g.w.prompt(fmt.Sprintf("Add table tests for the %s helpers in %s.", a, f.path))
		g.w.read(nil, f.path, f.src)
		var b strings.Builder
		fmt.Fprintf(&b, "package %s\n\nimport \"testing\"\n\nfunc Test%s%s(t *testing.T) {\n\ttests := []struct {\n\t\tname string\n\t\tin   []int64\n\t\twant int64\n\t}{\n", f.pkg, camel(a), camel(c))
		for i := 0; i < 20+g.r.IntN(30); i++ {
			fmt.Fprintf(&b, "\t\t{%q, []int64{%d, %d, %d}, %d},\n", g.filler1()+" "+g.filler1(), g.r.IntN(999), g.r.IntN(999), g.r.IntN(999), g.r.IntN(999))
		}
		b.WriteString("\t}\n\tfor _, tt := range tests {\n\t\tt.Run(tt.name, func(t *testing.T) {\n\t\t\tif got := sum(tt.in); got != tt.want {\n\t\t\t\tt.Errorf(\"got %d, want %d\", got, tt.want)\n\t\t\t}\n\t\t})\n\t}\n}\n")
		test := strings.TrimSuffix(f.path, ".go") + "_" + a + "_test.go"
		g.w.create(nil, test, b.String())
		g.w.bash(nil, fmt.Sprintf("go test ./internal/%s/...", f.pkg), fmt.Sprintf("Run the %s tests", f.pkg), g.testOutput(f.pkg), 0)
		g.w.respond(text(fmt.Sprintf("Added %s; the table covers the %s helpers and passes.", test, a)))
	}
}

func (g *gen) grepOutput(pkg string) string {
	var b strings.Builder
	for i := 0; i < 15+g.r.IntN(40); i++ {
		f := g.files[g.r.IntN(len(g.files))]
		fmt.Fprintf(&b, "%s:%d:\t\treturn nil, err\n", f.path, 10+g.r.IntN(400))
	}
	return b.String()
}

func (g *gen) testOutput(pkg string) string {
	var b strings.Builder
	for i := 0; i < 20+g.r.IntN(60); i++ {
		name := "Test" + camel(g.filler1()) + camel(g.filler1())
		fmt.Fprintf(&b, "=== RUN   %s\n--- PASS: %s (0.0%ds)\n", name, name, g.r.IntN(10))
	}
	fmt.Fprintf(&b, "PASS\nok  \texample.com/%s/internal/%s\t0.%03ds\n", g.p.name, pkg, g.r.IntN(1000))
	return b.String()
}
