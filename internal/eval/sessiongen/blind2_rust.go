package sessiongen

import (
	"fmt"
	"strings"
)

// rustWork refactors a Rust log-processing CLI from hand-rolled argument
// parsing to clap's derive API, with the output behind an enum.
type rustWork struct {
	*bgen
	name    string
	pool    *fillerPool
	feature string // the feature that must keep compiling alone
	fixture string // where the user wants fixtures
	profOld string // the default profile, corrected at once
	profNew string
	compDir string // where the completions end up (corrected late)
	flag    string // temporal: the flag, then the subcommand
	subcmd  string
	rejects int
	lines   int
	clapOld string
	clapNew string
	errPair [3]string // error code, what it says, the fix
	failTst string
}

func newRustWork(b *bgen) work {
	k := &rustWork{bgen: b, name: pick(b, "logsift", "tracegrep", "kvtail", "ripjournal")}
	k.feature, k.fixture, k.profOld, k.profNew = b.word(), b.word(), b.word(), b.word()
	k.compDir = "contrib/" + b.word()
	k.flag = pick(b, "--strip-ansi", "--follow-rotated", "--utc-offset", "--null-data")
	k.subcmd = pick(b, "doctor", "explain", "sample", "bisect")
	k.rejects, k.lines = b.between(11, 97), b.between(1200000, 4800000)
	minor := b.between(20, 38)
	k.clapOld, k.clapNew = fmt.Sprintf("v4.5.%d", minor), fmt.Sprintf("v4.5.%d", minor+b.between(2, 9))
	k.errPair = pick(b,
		[3]string{"E0502", "cannot borrow `self.buf` as mutable because it is also borrowed as immutable", "split_at_mut"},
		[3]string{"E0507", "cannot move out of `self.pending` which is behind a mutable reference", "std::mem::take"},
		[3]string{"E0716", "temporary value dropped while borrowed", "let owned_line"})
	k.failTst = "fixture_" + b.word() + "_round_trips"
	k.pool = b.newPool(rustLang, "src/cli.rs", "src/main.rs", "src/parse/mod.rs", "src/parse/line.rs", "src/output.rs", "src/filter.rs", "src/legacy_fmt.rs")
	b.summary = "1. Primary request: move " + k.name + "'s argument parsing to clap's derive API and put the output code behind one type.\n" +
		"2. Work so far: the parser and output modules were read and tidied; the tests pass.\n3. Continue with the user's most recent request."
	return k
}

func (k *rustWork) project() (string, string, string) {
	return k.name, "/Users/ana/code/" + k.name, "refactor/clap-derive"
}

func (k *rustWork) filler() { k.fillerTurn(k.pool) }

func (k *rustWork) first() {
	k.w.prompt(fmt.Sprintf("I want to refactor %s's argument handling. Right now src/cli.rs is a hand-rolled getopts-style parser that has grown to about 600 lines and nobody dares to touch it; the plan is to move to clap 4 with the derive API and, while we're at it, get the output code into one place so we can add more formats later without another if-chain in main. Before you change anything read src/cli.rs and src/main.rs and tell me which flags exist today and which ones interact. One thing that applies the whole time: the `%s` feature has to keep building on its own, so whenever you touch Cargo.toml or anything behind a cfg, run `cargo check --no-default-features --features %s` along with the tests — the embedded build ships with only that feature and it breaks silently otherwise. Don't bother with CHANGELOG.md, I'll write that myself at the end.", k.name, k.feature, k.feature))
	k.todo("Read src/cli.rs and src/main.rs", "List the current flags", "Move the parser to clap derive", "Put the output code behind one type")
	k.w.read(nil, "src/cli.rs", k.pool.get(k.bgen, "src/cli.rs").src)
	k.w.read(nil, "src/main.rs", k.pool.get(k.bgen, "src/main.rs").src)
	k.w.respond(text("Today's flags: --format, --since, --until, --grep, --invert, --quiet, --color and --max-line-bytes; --quiet and --color interact (quiet disables color), and --since/--until are parsed twice, once in cli.rs and once in filter.rs. I'd start by moving the parser and keep main.rs's dispatch as it is."))
	k.fact(Fact{Category: CatExtraction, Kind: "instruction", Question: "Which command must be run whenever Cargo.toml or cfg-gated code is touched?", Expect: []string{"cargo check --no-default-features --features " + k.feature}})
}

func (k *rustWork) beats() []beat {
	return []beat{
		{0.05, k.passingPreference}, {0.11, k.profile}, {0.18, k.outputDecision}, {0.27, k.bigCorpus},
		{0.36, k.borrowError}, {0.45, k.timestamps}, {0.52, k.restructure}, {0.60, k.temporal},
		{0.68, k.clapVersion}, {0.76, k.exitCode}, {0.84, k.moveCompletions}, {0.90, k.reverseTimestamps},
	}
}

func (k *rustWork) passingPreference() {
	k.w.prompt(fmt.Sprintf("The parse errors are the next mess. Some go through eprintln! and exit(1), some panic on bad UTF-8, and src/parse/line.rs returns String errors that main.rs then string-matches to pick an exit code, which is how we ended up exiting 1 for a usage error. What I want is one error enum per module with thiserror and main.rs mapping them to exit codes in one match. When you add tests for this, the fixtures go under tests/fixtures/%s/ as real files, not inline raw strings, I can't review those. Anyway, first list every place that panics or exits on bad input so we know how big this is.", k.fixture))
	var out strings.Builder
	for i := 0; i < 30+k.r.IntN(30); i++ {
		f := k.pool.files[k.r.IntN(len(k.pool.files))]
		fmt.Fprintf(&out, "%s:%d:        let %s = %s.%s().unwrap();\n", f.path, 10+k.r.IntN(500), k.fw(), k.fw(), pick(k.bgen, "parse", "next", "get", "to_str"))
	}
	k.w.grep(nil, `unwrap\(\)|expect\(|process::exit|panic!`, out.String())
	k.w.respond(text("There are about forty: most are unwrap() on parse results in src/parse/line.rs, four process::exit calls in src/main.rs and two panic! on invalid UTF-8 in src/filter.rs. I'll start with the parser module."))
	k.fact(Fact{Category: CatExtraction, Kind: "preference", Question: "Where does the user want test fixtures to live?", Expect: []string{"tests/fixtures/" + k.fixture}})
}

func (k *rustWork) profile() {
	k.w.prompt(fmt.Sprintf("Add a --profile option that picks a named section of the config file; default profile is `%s` — no wait, make the default `%s`, the ops wrapper script already sets one of the old names and I don't want a clash.", k.profOld, k.profNew))
	f := k.pool.get(k.bgen, "src/cli.rs")
	k.w.edit([]part{text("Adding it to the Args struct.")}, "src/cli.rs", firstLine(f.src, 4), firstLine(f.src, 4)+fmt.Sprintf("\n\n    /// Named section of the config file.\n    #[arg(long, default_value = %q)]\n    pub profile: String,", k.profNew))
	k.w.respond(text(fmt.Sprintf("--profile is in, defaulting to %s.", k.profNew)))
	k.fact(Fact{Category: CatKnowledgeUpdate, Kind: "value", Question: "What is the default --profile?", Expect: []string{k.profNew}, Superseded: []string{k.profOld}})
}

func (k *rustWork) outputDecision() {
	k.w.prompt("ok parser looks fine. how do you want to do the output side?")
	k.w.read(nil, "src/output.rs", k.pool.get(k.bgen, "src/output.rs").src)
	k.w.respond(thinking("Three formats today, maybe four later. Trait objects cost a vtable call per line in the hot loop; an enum matches once per record and clap derives ValueEnum from it."),
		text("Two options: a `Sink` trait with `Box<dyn Sink>` picked at startup, or an `enum OutputFormat { Text, Json, Ndjson }` with one match per record. I'd go with the enum: there are only three formats, it keeps the per-line loop monomorphic instead of paying a vtable call per line, and clap's ValueEnum derives straight from it so --format stays in sync. Shall I?"))
	k.w.prompt("yes")
	k.w.edit(nil, "src/output.rs", firstLine(k.pool.get(k.bgen, "src/output.rs").src, 2), "#[derive(Clone, Copy, Debug, clap::ValueEnum)]\npub enum OutputFormat {\n    Text,\n    Json,\n    Ndjson,\n}")
	k.w.respond(text("Done; --format now parses into OutputFormat."))
	k.fact(Fact{Category: CatExtraction, Kind: "decision", Question: "How are the output formats represented?", Expect: []string{"enum OutputFormat"}})
	k.probe(Probe{Kind: ProbeDecision, Question: "What did the agent choose for the output formats, and why?", Expect: []string{"enum OutputFormat"}, Why: []string{"vtable", "monomorphic", "ValueEnum"}})
}

func (k *rustWork) bigCorpus() {
	k.w.prompt("Before we go further, get me a baseline: run the release build over the big corpus with --stats.")
	out := k.longLog(120+k.r.IntN(80), func(i int) string {
		return fmt.Sprintf("[WARN  %s::parse] line %d: %s field %q truncated at %d bytes", k.name, 1000+i*k.between(40, 900), k.fw(), k.fw(), 4096+k.r.IntN(60000))
	}, "", fmt.Sprintf("stats: %d lines, %d rejected, 0 panics", k.lines, k.rejects), fmt.Sprintf("elapsed: %d.%02ds", k.between(3, 12), k.r.IntN(99)))
	k.w.bash(nil, "cargo build --release && ./target/release/"+k.name+" --stats testdata/corpus/big.log > /dev/null", "Baseline run over the big corpus", out, 0)
	k.w.respond(text("That's the baseline; the warnings are all truncations of oversized fields, which is expected with the current default. I'll compare against it after the refactor."))
	k.fact(Fact{Category: CatExtraction, Kind: "result", Question: "How many lines did the baseline run over the big corpus reject?", Expect: []string{fmt.Sprintf("%d rejected", k.rejects)}})
	k.probe(Probe{Kind: ProbeRecall, Question: "How many lines does the big corpus have?", Expect: []string{fmt.Sprintf("%d lines", k.lines)}})
}

func (k *rustWork) borrowError() {
	k.w.prompt("ok, now move the line parser over to the new error type.")
	f := k.pool.get(k.bgen, "src/parse/line.rs")
	k.editLine([]part{text("Switching the return types to ParseError.")}, f.path, f.src, "pub fn", func(s string) string { return strings.Replace(s, "io::Result", "Result", 1) + " // ParseError" })
	line := k.between(40, 300)
	k.w.bash(nil, "cargo build", "Build", fmt.Sprintf("   Compiling %s v0.9.0 (%s)\nerror[%s]: %s\n   --> src/parse/line.rs:%d:13\n    |\n%d |             self.buf.extend_from_slice(&rest);\n    |             ^^^^^^^^ mutable borrow occurs here\n\nFor more information about this error, try `rustc --explain %s`.\nerror: could not compile `%s` (lib) due to 1 previous error",
		k.name, k.w.cwd, k.errPair[0], k.errPair[1], line, line, k.errPair[0], k.name), 101)
	k.w.edit([]part{text("The slice still borrows the buffer while it is extended.")}, "src/parse/line.rs", "        self.buf.extend_from_slice(&rest);", fmt.Sprintf("        // %s: no borrow of self.buf outlives the extend\n        self.buf.extend_from_slice(&rest);", k.errPair[2]))
	k.w.bash(nil, "cargo build", "Build", fmt.Sprintf("   Compiling %s v0.9.0 (%s)\n    Finished `dev` profile [unoptimized + debuginfo] target(s) in 4.%02ds", k.name, k.w.cwd, k.r.IntN(99)), 0)
	k.w.respond(text("Builds again."))
	k.fact(Fact{Category: CatErrorsFixes, Kind: "build_error", Question: "Which compile error did moving the line parser cause, and how was it fixed?", Expect: []string{k.errPair[0], k.errPair[2]}})
}

func (k *rustWork) timestamps() {
	k.w.prompt("--since and --until: which crate do we parse those with? right now it's a regex.")
	k.w.bash(nil, "cargo tree --depth 1", "List direct dependencies", fmt.Sprintf("%s v0.9.0 (%s)\n├── chrono v0.4.38\n├── clap v4.5.4\n├── regex v1.10.4\n├── serde v1.0.200\n├── serde_json v1.0.116\n└── thiserror v1.0.59", k.name, k.w.cwd), 0)
	k.w.respond(text("chrono is already a direct dependency, so I'll parse --since/--until with chrono's DateTime::parse_from_rfc3339 and drop the regex; no new crate needed."))
	k.w.edit(nil, "src/filter.rs", firstLine(k.pool.get(k.bgen, "src/filter.rs").src, 2), "use chrono::DateTime;")
}

func (k *rustWork) restructure() {
	k.w.prompt("Let's split output.rs into a module now, one file per format, and get rid of legacy_fmt.rs — nothing uses it since the json writer landed. Also generate the bash completions into completions/ so packagers can pick them up.")
	k.w.bash(nil, "mkdir -p src/output && git mv src/output.rs src/output/mod.rs", "Turn output.rs into a module", "", 0)
	k.pool.rename("src/output.rs", "src/output/mod.rs")
	mod := k.pool.get(k.bgen, "src/output/mod.rs").src
	k.multiEdit([]part{text("Declaring the new submodule and dropping the json writer's old path.")}, "src/output/mod.rs",
		firstLine(mod, 1), firstLine(mod, 1)+"\npub mod ndjson;", firstLine(mod, 3), firstLine(mod, 3)+" // see ndjson.rs for line output")
	k.w.create(nil, "src/output/ndjson.rs", "//! Newline-delimited JSON output: one record per line.\nuse std::io::{self, Write};\n\npub fn write_ndjson(out: &mut impl Write, rec: &serde_json::Value) -> io::Result<()> {\n    serde_json::to_writer(&mut *out, rec)?;\n    out.write_all(b\"\\n\")\n}\n")
	k.w.bash(nil, "git grep -n legacy_fmt -- src/ || true", "Check nothing uses legacy_fmt", "src/main.rs:4:mod legacy_fmt;", 0)
	k.w.edit(nil, "src/main.rs", "mod legacy_fmt;\n", "")
	k.w.bash(nil, "git rm -q src/legacy_fmt.rs", "Delete legacy_fmt.rs", "", 0)
	k.pool.remove("src/legacy_fmt.rs")
	k.w.bash(nil, fmt.Sprintf("mkdir -p completions && cargo run -q -- completions bash > completions/%s.bash && wc -l completions/%s.bash", k.name, k.name), "Generate bash completions", fmt.Sprintf("%d completions/%s.bash", k.between(180, 400), k.name), 0)
	k.w.bash(nil, "cargo test && cargo check --no-default-features --features "+k.feature, "Tests and the feature-only build", k.testOutput(rustLang), 0)
	k.w.respond(text(fmt.Sprintf("output.rs is now src/output/mod.rs with src/output/ndjson.rs next to it, legacy_fmt.rs is gone, and the completions are in completions/%s.bash.", k.name)))
	k.probe(Probe{Kind: ProbeRecall, Question: "Where did src/output.rs move to?", Expect: []string{"src/output/mod.rs"}})
}

func (k *rustWork) temporal() {
	k.w.prompt(fmt.Sprintf("add a %s flag to the tail subcommand", k.flag))
	k.w.edit(nil, "src/cli.rs", "    pub profile: String,", fmt.Sprintf("    pub profile: String,\n\n    #[arg(long = %q)]\n    pub %s: bool,", strings.TrimPrefix(k.flag, "--"), strings.ReplaceAll(strings.TrimPrefix(k.flag, "--"), "-", "_")))
	k.w.respond(text("Added."))
	k.w.prompt(fmt.Sprintf("and then a `%s %s` subcommand that prints the effective config and exits", k.name, k.subcmd))
	k.w.edit(nil, "src/cli.rs", "pub enum Command {", fmt.Sprintf("pub enum Command {\n    /// Print the effective configuration and exit.\n    %s,", camel(k.subcmd)))
	k.w.edit(nil, "src/main.rs", "match args.command {", fmt.Sprintf("match args.command {\n        Command::%s => return print_config(&cfg),", camel(k.subcmd)))
	k.w.respond(text(fmt.Sprintf("`%s %s` prints the merged config (file, profile, flags) and exits 0.", k.name, k.subcmd)))
	k.fact(Fact{Category: CatTemporal, Kind: "order", Question: fmt.Sprintf("What did the user ask for right after the %s flag?", k.flag), Expect: []string{k.name + " " + k.subcmd}, After: k.flag})
}

func (k *rustWork) clapVersion() {
	k.w.prompt("cargo update clap, there's a fix for the derive help output we want")
	var out strings.Builder
	out.WriteString("    Updating crates.io index\n     Locking 6 packages to latest compatible versions\n")
	fmt.Fprintf(&out, "    Updating anstream v0.6.13 -> v0.6.14\n    Updating clap %s -> %s\n    Updating clap_builder %s -> %s\n    Updating clap_derive %s -> %s\n    Updating clap_lex v0.7.0 -> v0.7.1\n    Updating proc-macro2 v1.0.81 -> v1.0.82\n", k.clapOld, k.clapNew, k.clapOld, k.clapNew, k.clapOld, k.clapNew)
	k.w.bash(nil, "cargo update -p clap", "Update clap", out.String(), 0)
	k.w.bash(nil, "cargo test", "Run the tests", k.testOutput(rustLang), 0)
	k.w.respond(text("Updated; help output now wraps correctly and the tests pass."))
	k.probe(Probe{Kind: ProbeRecall, Question: "Which clap version is the project on after the update?", Expect: []string{k.clapNew}})
}

func (k *rustWork) exitCode() {
	k.w.prompt("the usage-error exit code should be 64 like sysexits, add a fixture test for it")
	k.w.bash(nil, fmt.Sprintf("mkdir -p tests/fixtures/%s && printf 'not a log line\\n' > tests/fixtures/%s/bad_usage.txt", k.fixture, k.fixture), "Add the fixture", "", 0)
	k.w.create(nil, "tests/exit_codes.rs", fmt.Sprintf("use assert_cmd::Command;\n\n#[test]\nfn %s() {\n    Command::cargo_bin(%q).unwrap()\n        .args([\"--bogus\", \"tests/fixtures/%s/bad_usage.txt\"])\n        .assert()\n        .code(64);\n}\n", k.failTst, k.name, k.fixture))
	k.w.bash(nil, "cargo test --test exit_codes", "Run the new test", fmt.Sprintf("running 1 test\ntest %s ... FAILED\n\nfailures:\n\n---- %s stdout ----\nUnexpected returned code, failed var == 64\n├── var: 2\n└── command: %q \"--bogus\"\n\ntest result: FAILED. 0 passed; 1 failed", k.failTst, k.failTst, k.name), 101)
	k.w.bash(nil, "sed -i 's/ExitCode::from(2)/ExitCode::from(64)/' src/main.rs && cargo test --test exit_codes", "Use 64 for usage errors", "running 1 test\ntest "+k.failTst+" ... ok\n\ntest result: ok. 1 passed; 0 failed", 0)
	k.w.respond(text("Fixed in main.rs; usage errors exit 64 now."))
	k.fact(Fact{Category: CatErrorsFixes, Kind: "test_failure", Question: "Which test failed on the usage-error exit code, and what fixed it?", Expect: []string{k.failTst, "ExitCode::from(64)"}})
}

func (k *rustWork) moveCompletions() {
	k.w.prompt(fmt.Sprintf("packagers told me they look in %s/ for shell completions, not completions/. move them there and point build.rs at it", k.compDir))
	k.w.bash(nil, fmt.Sprintf("mkdir -p %s && git mv completions/%s.bash %s/%s.bash && rmdir completions", k.compDir, k.name, k.compDir, k.name), "Move the completions", "", 0)
	k.w.edit(nil, "build.rs", "let dir = \"completions\";", fmt.Sprintf("let dir = %q;", k.compDir))
	k.w.respond(text(fmt.Sprintf("Moved to %s/%s.bash and build.rs writes there now.", k.compDir, k.name)))
	k.fact(Fact{Category: CatKnowledgeUpdate, Kind: "path", Question: "Where do the bash completions go?", Expect: []string{k.compDir + "/" + k.name + ".bash"}, Superseded: []string{"completions/" + k.name + ".bash"}})
}

func (k *rustWork) reverseTimestamps() {
	k.w.prompt("Hmm, about the timestamps: the sibling crates all moved to jiff last month and we'd end up with two date libraries in the workspace. Use jiff here too and take chrono out; jiff also handles the tz names people keep passing to --since.")
	k.w.edit(nil, "Cargo.toml", "chrono = \"0.4\"", "jiff = \"0.1\"")
	k.w.edit(nil, "src/filter.rs", "use chrono::DateTime;", "use jiff::Timestamp;")
	k.w.bash(nil, "cargo test && cargo check --no-default-features --features "+k.feature, "Tests and the feature-only build", k.testOutput(rustLang), 0)
	k.w.respond(text("Switched: --since/--until parse with jiff::Timestamp now and the dependency is gone from Cargo.toml; the feature-only build still passes."))
	k.probe(Probe{Kind: ProbeDecision, Question: "Which crate parses --since and --until, and why?", Expect: []string{"jiff"}, Why: []string{"sibling crates", "two date libraries", "tz names"}, Superseded: []string{"chrono"}})
}

func (k *rustWork) latest() {
	req := fmt.Sprintf("Now wire OutputFormat::Ndjson into `%s tail` so it streams through write_ndjson, and add a snapshot test for it with insta, fixture under tests/fixtures/%s/. Don't change the JSON field order, downstream parses it positionally.", k.name, k.fixture)
	k.w.prompt(req)
	k.fact(Fact{Category: CatLatestRequest, Kind: "verbatim", Question: "What is the user's latest request, word for word?", Expect: []string{req}, Verbatim: true})
	k.todo("Route OutputFormat::Ndjson in tail through write_ndjson", "Add the insta snapshot test", "Run clippy and the feature-only check")
	k.w.read(nil, "src/output/ndjson.rs", "//! Newline-delimited JSON output: one record per line.\nuse std::io::{self, Write};\n\npub fn write_ndjson(out: &mut impl Write, rec: &serde_json::Value) -> io::Result<()> {\n    serde_json::to_writer(&mut *out, rec)?;\n    out.write_all(b\"\\n\")\n}\n")
	k.w.edit(nil, "src/main.rs", "OutputFormat::Json => write_json(&mut out, &rec)?,", "OutputFormat::Json => write_json(&mut out, &rec)?,\n                OutputFormat::Ndjson => write_ndjson(&mut out, &rec)?,")
	k.w.bash(nil, "cargo build", "Build", fmt.Sprintf("error[E0425]: cannot find function `write_ndjson` in this scope\n   --> src/main.rs:%d:41\nerror: could not compile `%s` (bin \"%s\") due to 1 previous error", k.between(60, 200), k.name, k.name), 101)
	k.w.respond(text("The tail loop can't see write_ndjson yet: next I'll export it from src/output/mod.rs (`pub use ndjson::write_ndjson`), then write the insta snapshot test."))
	k.probe(Probe{Kind: ProbeContinuation, Question: "What was the agent doing when the session was compacted, and what is its next step?", Expect: []string{"OutputFormat::Ndjson", "tail"}, Next: []string{"pub use ndjson::write_ndjson", "insta"}})
}

func (k *rustWork) abstentions() []abstention {
	return []abstention{
		{"Which async runtime did the user choose?", []string{"tokio", "async-std", "smol"}},
		{"Which crate did the user pick for progress bars?", []string{"indicatif", "pbr", "kdam"}},
		{"Which Windows target was the CLI asked to support?", []string{"x86_64-pc-windows-msvc", "x86_64-pc-windows-gnu", "aarch64-pc-windows-msvc"}},
	}
}
