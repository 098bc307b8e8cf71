package sessiongen

import (
	"fmt"
	"strings"
)

// tailResult runs a command whose long output states its result only in its
// last lines; the agent does not repeat it.
func (b *blind3) tailResult() {
	kinds := []func() (cmd, out, question, answer string){b.backfillRun, b.bundleRun, b.wrkRun, b.dryRun, b.releaseRun, b.trainRun}
	i := b.r.IntN(len(kinds))
	for b.used[fmt.Sprint("result:", i)] {
		i = b.r.IntN(len(kinds))
	}
	b.used[fmt.Sprint("result:", i)] = true
	cmd, out, question, answer := kinds[i]()
	b.w.prompt(fmt.Sprintf(b.pick([]string{"Run `%s` and let me know when it's through.", "Kick off `%s`, I'll look at the numbers later.", "Can you run `%s`? Just make sure it finishes."}), cmd))
	b.w.bash([]part{text("Running it.")}, cmd, "Run it", out, 0)
	b.w.respond(text(b.pick([]string{"It finished without errors.", "Done, it ran through.", "That completed; the output is above."})))
	b.fact(Fact{Category: CatExtraction, Kind: "result", Question: question, Expect: []string{answer}})
	b.probe(Probe{Kind: ProbeRecall, Question: question, Expect: []string{answer}})
}

// lines is n lines of a long output made by line(i).
func lines(n int, line func(i int) string) string {
	var s strings.Builder
	for i := 0; i < n; i++ {
		s.WriteString(line(i))
		s.WriteByte('\n')
	}
	return s.String()
}

func (b *blind3) backfillRun() (string, string, string, string) {
	n := fmt.Sprint(100000 + b.r.IntN(800000))
	w := b.bword()
	out := lines(60+b.r.IntN(80), func(i int) string {
		return fmt.Sprintf("2026-03-02T10:%02d:%02dZ INFO batch %d: %d records staged", i/60, i%60, i, 400+b.r.IntN(200))
	}) + fmt.Sprintf("2026-03-02T11:14:09Z INFO done: %s records written to out/%s.parquet\n2026-03-02T11:14:09Z INFO elapsed 41m12s", n, w)
	return "go run ./cmd/backfill --since 2025-01-01", out, "How many records did the backfill write?", n
}

func (b *blind3) bundleRun() (string, string, string, string) {
	size := fmt.Sprintf("%d.%d", 300+b.r.IntN(600), b.r.IntN(10))
	out := "vite v5.4.2 building for production...\ntransforming...\n" + lines(40+b.r.IntN(60), func(i int) string {
		return fmt.Sprintf("dist/assets/%s-%04x.js   %d.%02d kB │ gzip: %d.%02d kB", b.filler1(), b.r.IntN(65536), 1+b.r.IntN(90), b.r.IntN(100), b.r.IntN(30), b.r.IntN(100))
	}) + fmt.Sprintf("Total gzip size: %s kB\n✓ built in 7.%02ds", size, b.r.IntN(100))
	return "npm run build --workspace web", out, "What total gzip size did the web build report, in kB?", size
}

func (b *blind3) wrkRun() (string, string, string, string) {
	rps := fmt.Sprintf("%d.%02d", 2000+b.r.IntN(7000), b.r.IntN(100))
	out := "Running 30s test @ http://127.0.0.1:8080/api/report\n  4 threads and 64 connections\n" + lines(30+b.r.IntN(40), func(i int) string {
		return fmt.Sprintf("  progress: %ds elapsed, %d requests so far", i, i*(200+b.r.IntN(50)))
	}) + fmt.Sprintf("  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency    %d.%02dms    %d.%02dms  %dms   88.%d%%\nRequests/sec:  %s\nTransfer/sec:      1.%dMB", 5+b.r.IntN(20), b.r.IntN(100), 2+b.r.IntN(9), b.r.IntN(100), 80+b.r.IntN(200), b.r.IntN(10), rps, b.r.IntN(10))
	return "wrk -t4 -c64 -d30s http://127.0.0.1:8080/api/report", out, "How many requests per second did the load test reach?", rps
}

func (b *blind3) dryRun() (string, string, string, string) {
	n := fmt.Sprint(10000 + b.r.IntN(90000))
	out := lines(50+b.r.IntN(70), func(i int) string {
		return fmt.Sprintf("checking %s_%s ... ok (%d rows scanned)", b.filler1(), b.filler1(), 100+b.r.IntN(9000))
	}) + fmt.Sprintf("Dry run complete: %s rows would change, 0 errors.", n)
	return "./scripts/migrate.sh --dry-run 0042", out, "How many rows would migration 0042 change?", n
}

func (b *blind3) releaseRun() (string, string, string, string) {
	sum := fmt.Sprintf("%08x%08x", b.r.Uint32(), b.r.Uint32())
	out := lines(40+b.r.IntN(60), func(i int) string {
		return fmt.Sprintf("  adding: %s/%s_%d.go (deflated %d%%)", b.filler1(), b.filler1(), i, 40+b.r.IntN(50))
	}) + fmt.Sprintf("archive: dist/%s-release.tar.gz\nsha256: %s", b.p.name, sum)
	return "make release", out, "What sha256 did the release build print?", sum
}

func (b *blind3) trainRun() (string, string, string, string) {
	auc := fmt.Sprintf("0.%04d", 8000+b.r.IntN(1999))
	out := lines(40+b.r.IntN(60), func(i int) string {
		return fmt.Sprintf("epoch %d/%d  loss=0.%04d  lr=3e-4", i+1, 100, 1000+b.r.IntN(8000))
	}) + fmt.Sprintf("saved checkpoint to models/%s.pt\nfinal validation AUC: %s", b.bword(), auc)
	return "python train.py --config configs/churn.yaml", out, "What final validation AUC did training print?", auc
}

// proposal is an agent's proposal: its text, the choice's parts and the
// reasons it gives.
type proposal struct {
	text   string
	expect []string
	why    []string
}

func (b *blind3) proposals() []proposal {
	w, ttl, ms, tries := b.bword(), fmt.Sprint(17+b.r.IntN(70)), fmt.Sprint(150+b.r.IntN(700)), fmt.Sprint(4+b.r.IntN(6))
	ver := fmt.Sprintf("v1.%d.%d", 2+b.r.IntN(20), b.r.IntN(10))
	rows := fmt.Sprint(1000 + b.r.IntN(9000))
	return []proposal{
		{fmt.Sprintf("There are two ways to stop the duplicate %s jobs: a lock row in the database, or a lease with a %s-second TTL. I'd take the lease: a lock row leaks when a worker dies mid-job, while the lease expires on its own. Want me to go that way?", w, ttl),
			[]string{"lease", ttl}, []string{"expires", "leaks"}},
		{fmt.Sprintf("For the %s client I'm thinking exponential backoff starting at %s ms, capped at %s attempts, because the upstream rate-limits bursts and a fixed delay just hammers it. Shall I?", w, ms, tries),
			[]string{"exponential", ms, tries}, []string{"rate limits", "hammers"}},
		{fmt.Sprintf("Option A keeps the %s cache in process; option B moves it into a sidecar. B costs a network hop but survives restarts, which is the point of the ticket. I'd go with B. OK?", w),
			[]string{"sidecar"}, []string{"restarts"}},
		{fmt.Sprintf("I could vendor the %s library or pin it at %s in go.mod. Pinning is a one-line change and upstream has been stable for a year, so I suggest pinning. Proceed?", w, ver),
			[]string{"pin", ver}, []string{"stable", "one line"}},
		{fmt.Sprintf("Proposal: split the %s store into a reader and a writer, so the writer can batch %s rows per flush without the reader blocking on it. Good?", w, rows),
			[]string{"reader", "writer", rows}, []string{"blocking"}},
	}
}

// confirmed: the agent proposes, the user answers with a bare yes, the
// agent carries it out without restating it.
func (b *blind3) confirmed() {
	ps := b.proposals()
	i := b.r.IntN(len(ps))
	for b.used[fmt.Sprint("proposal:", i)] {
		i = b.r.IntN(len(ps))
	}
	b.used[fmt.Sprint("proposal:", i)] = true
	p := ps[i]
	f := b.files[b.r.IntN(len(b.files))]
	b.w.prompt(fmt.Sprintf(b.pick([]string{"The %s package keeps falling over under load. What would you do?", "We need a fix for the %s flakiness before Friday. Ideas?", "Think about how to make %s more robust and suggest something."}), f.pkg))
	b.w.read(nil, f.path, f.src)
	b.w.respond(text(p.text))
	b.w.prompt(b.pick([]string{"yes", "Yes.", "yep", "sure", "go ahead", "sounds good", "ok", "Yes please.", "do it", "👍", "yes — go", "Sure, go for it."}))
	b.w.edit([]part{text("Doing it.")}, f.path, "\treturn out, nil\n", "\treturn out, nil // see the change above\n")
	b.w.respond(text("Done; the tests still pass."))
	b.fact(Fact{Category: CatExtraction, Kind: "decision", Question: "What did the user agree to for " + f.pkg + "?", Expect: p.expect})
	b.probe(Probe{Kind: ProbeDecision, Question: "What was decided for " + f.pkg + ", and why?", Expect: p.expect, Why: p.why})
}
