package sessiongen

import (
	"fmt"
	"path"
	"strings"
)

// The four languages of the blind2 family's filler code.

var rustLang = &lang{
	comment: "//",
	header: func(b *bgen, p string) string {
		return fmt.Sprintf("//! %s %s handling for %s.\nuse std::collections::HashMap;\nuse std::io::{self, Write};\n\n", camel(b.fw()), b.fw(), p)
	},
	fn: func(b *bgen, a, c, d string) string {
		var s strings.Builder
		fmt.Fprintf(&s, "/// Returns the %s of every %s, ordered by %s.\npub fn %s_%s(items: &[%s], out: &mut impl Write) -> io::Result<Vec<u64>> {\n    let mut acc = Vec::with_capacity(items.len());\n", c, a, d, a, c, camel(a))
		for i, n := 0, 2+b.r.IntN(6); i < n; i++ {
			switch b.r.IntN(3) {
			case 0:
				fmt.Fprintf(&s, "    for (i, it) in items.iter().enumerate() {\n        if it.%s > %d {\n            acc.push(i as u64 * %d);\n        }\n    }\n", b.fw(), b.r.IntN(400), 1+b.r.IntN(32))
			case 1:
				fmt.Fprintf(&s, "    let by_%s: HashMap<&str, usize> = items.iter().map(|it| (it.%s.as_str(), it.%s.len())).collect();\n", b.fw(), b.fw(), b.fw())
			default:
				fmt.Fprintf(&s, "    writeln!(out, \"%s {} %s\", acc.len())?;\n", b.fw(), b.fw())
			}
		}
		s.WriteString("    acc.sort_unstable();\n    Ok(acc)\n}\n")
		return s.String()
	},
	test:     "cargo test",
	testLine: func(b *bgen, name string) string { return fmt.Sprintf("test %s::tests::%s ... ok", b.fw(), name) },
	testTail: func(b *bgen) string {
		n := 80 + b.r.IntN(90)
		return fmt.Sprintf("\ntest result: ok. %d passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.%02ds", n, b.r.IntN(99))
	},
	lint: "cargo clippy --all-targets -- -D warnings",
	lintLine: func(b *bgen, p string, line int) string {
		return fmt.Sprintf("error: %s\n  --> %s:%d:%d\n   |\n   = help: for further information visit https://rust-lang.github.io/rust-clippy/master/index.html",
			pick(b, "redundant clone", "this `if` has identical blocks", "called `map(..).flatten()` on `Iterator`", "needless borrow", "manual implementation of `Option::map`"), p, line, 5+b.r.IntN(30))
	},
}

var pythonLang = &lang{
	comment: "#",
	header: func(b *bgen, p string) string {
		return fmt.Sprintf("\"\"\"%s %s helpers (%s).\"\"\"\nfrom __future__ import annotations\n\nimport numpy as np\nimport pandas as pd\n\n\n", camel(b.fw()), b.fw(), p)
	},
	fn: func(b *bgen, a, c, d string) string {
		var s strings.Builder
		fmt.Fprintf(&s, "def %s_%s(df: pd.DataFrame, by: str = %q) -> pd.DataFrame:\n    \"\"\"Return the %s per %s, sorted by %s.\"\"\"\n    out = df.copy()\n", a, c, d, c, a, d)
		for i, n := 0, 2+b.r.IntN(6); i < n; i++ {
			switch b.r.IntN(3) {
			case 0:
				fmt.Fprintf(&s, "    out[%q] = out[%q].where(out[%q] > %d, np.nan)\n", b.fw(), b.fw(), b.fw(), b.r.IntN(400))
			case 1:
				fmt.Fprintf(&s, "    out = out.groupby(by, dropna=False)[%q].agg([\"mean\", \"count\"]).reset_index()\n", b.fw())
			default:
				fmt.Fprintf(&s, "    out = out.sort_values(by).head(%d)\n", 10+b.r.IntN(990))
			}
		}
		s.WriteString("    return out\n\n")
		return s.String()
	},
	test: "pytest -q",
	testLine: func(b *bgen, name string) string {
		return fmt.Sprintf("tests/test_%s.py::test_%s PASSED", b.fw(), name)
	},
	testTail: func(b *bgen) string {
		return fmt.Sprintf("\n======================== %d passed, %d warnings in %d.%02ds ========================", 60+b.r.IntN(200), b.r.IntN(9), 3+b.r.IntN(30), b.r.IntN(99))
	},
	lint: "ruff check .",
	lintLine: func(b *bgen, p string, line int) string {
		return fmt.Sprintf("%s:%d:%d: %s", p, line, 1+b.r.IntN(40), pick(b, "F841 Local variable `"+b.fw()+"` is assigned to but never used",
			"E501 Line too long (104 > 88)", "B006 Do not use mutable data structures for argument defaults", "PD901 Avoid using the generic variable name `df` for DataFrames"))
	},
}

var kotlinLang = &lang{
	comment: "//",
	header: func(b *bgen, p string) string {
		return fmt.Sprintf("package app.%s.%s\n\nimport kotlinx.coroutines.flow.Flow\nimport kotlinx.coroutines.flow.map\n\n", b.fw(), strings.TrimSuffix(path.Base(p), path.Ext(p)))
	},
	fn: func(b *bgen, a, c, d string) string {
		var s strings.Builder
		fmt.Fprintf(&s, "/** Maps each %s to its %s, keyed by %s. */\nfun %s%s(items: List<%s>): Map<String, Int> {\n    val out = mutableMapOf<String, Int>()\n", a, c, d, a, camel(c), camel(a))
		for i, n := 0, 2+b.r.IntN(6); i < n; i++ {
			switch b.r.IntN(3) {
			case 0:
				fmt.Fprintf(&s, "    items.filter { it.%s > %d }.forEach { out[it.%s] = (out[it.%s] ?: 0) + %d }\n", b.fw(), b.r.IntN(400), b.fw(), b.fw(), 1+b.r.IntN(9))
			case 1:
				fmt.Fprintf(&s, "    val %s%s = items.groupBy { it.%s }.mapValues { it.value.size }\n", b.fw(), camel(b.fw()), b.fw())
			default:
				fmt.Fprintf(&s, "    check(out.size <= %d) { \"too many %s\" }\n", 100+b.r.IntN(900), b.fw())
			}
		}
		s.WriteString("    return out\n}\n")
		return s.String()
	},
	test: "./gradlew testDebugUnitTest",
	testLine: func(b *bgen, name string) string {
		return fmt.Sprintf("%s%sTest > %s() PASSED", camel(b.fw()), camel(b.fw()), strings.ReplaceAll(name, "_", ""))
	},
	testTail: func(b *bgen) string {
		return fmt.Sprintf("\nBUILD SUCCESSFUL in %dm %ds\n%d actionable tasks: %d executed, %d up-to-date", 1+b.r.IntN(3), b.r.IntN(60), 80+b.r.IntN(40), 5+b.r.IntN(30), 40+b.r.IntN(40))
	},
	lint: "./gradlew ktlintCheck",
	lintLine: func(b *bgen, p string, line int) string {
		return fmt.Sprintf("%s:%d:%d %s", p, line, 1+b.r.IntN(40), pick(b, "Unexpected blank line(s) before \"}\" (standard:no-blank-line-before-rbrace)",
			"Missing trailing comma before \")\" (standard:trailing-comma-on-call-site)", "Exceeded max line length (120) (standard:max-line-length)", "Unused import (standard:no-unused-imports)"))
	},
}

var goLang = &lang{
	comment: "//",
	header: func(b *bgen, p string) string {
		return fmt.Sprintf("// Package %s handles the %s %s.\npackage %s\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"io\"\n)\n\n", path.Base(path.Dir(p)), b.fw(), b.fw(), path.Base(path.Dir(p)))
	},
	fn: func(b *bgen, a, c, d string) string {
		var s strings.Builder
		fmt.Fprintf(&s, "// %s%s returns the %s of each %s, by %s.\nfunc %s%s(ctx context.Context, in []%s, w io.Writer) ([]int, error) {\n\tout := make([]int, 0, len(in))\n", camel(a), camel(c), c, a, d, a, camel(c), camel(a))
		for i, n := 0, 2+b.r.IntN(6); i < n; i++ {
			switch b.r.IntN(3) {
			case 0:
				fmt.Fprintf(&s, "\tfor i, %s := range in {\n\t\tif %s.%s > %d {\n\t\t\tout = append(out, i*%d)\n\t\t}\n\t}\n", a, a, camel(b.fw()), b.r.IntN(400), 1+b.r.IntN(32))
			case 1:
				fmt.Fprintf(&s, "\tif err := ctx.Err(); err != nil {\n\t\treturn nil, fmt.Errorf(\"%s %s: %%w\", err)\n\t}\n", b.fw(), b.fw())
			default:
				fmt.Fprintf(&s, "\tif _, err := fmt.Fprintf(w, \"%s %%d\\n\", len(out)); err != nil {\n\t\treturn nil, err\n\t}\n", b.fw())
			}
		}
		s.WriteString("\treturn out, nil\n}\n")
		return s.String()
	},
	test: "go test ./...",
	testLine: func(b *bgen, name string) string {
		return fmt.Sprintf("ok  \tcheckout/internal/%s\t0.%03ds", strings.ReplaceAll(name, "_", ""), b.r.IntN(999))
	},
	testTail: func(b *bgen) string { return fmt.Sprintf("ok  \tcheckout/cmd/checkoutd\t0.%03ds", b.r.IntN(999)) },
	lint:     "golangci-lint run ./...",
	lintLine: func(b *bgen, p string, line int) string {
		return fmt.Sprintf("%s:%d:%d: %s", p, line, 1+b.r.IntN(40), pick(b, "Error return value of `"+b.fw()+".Close` is not checked (errcheck)",
			"ineffectual assignment to err (ineffassign)", "should omit type int from declaration (staticcheck)", "unused parameter: ctx (unparam)"))
	},
}
