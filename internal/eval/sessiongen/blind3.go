package sessiongen

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// FamilyBlind3 is the fifth family (blind3*.go), written for issue 45,
// point 2 from the description of what the notes lose — a
// preference or standing instruction said in passing inside a longer
// message, a result only in the last lines of a long tool output, a
// decision the user confirms with a bare "yes", the text of an error — each
// said in several phrasings, and committed before any rule was measured on
// it. Its filler is the planted family's (a Go repository's tool loops).
const FamilyBlind3 = "blind3"

// b3Words are blind3's answers: no other vocabulary of this package holds
// them, so an answer never occurs by chance.
var b3Words = []string{
	"lichen", "pumice", "sorrel", "trellis", "umber", "vesper", "wicker", "zither", "alder", "cairn",
	"dapple", "egret", "fennel", "gorse", "heron", "ibis", "kestrel", "lupin", "mallow", "newt",
	"osprey", "plover", "quince", "rook", "sedge", "tansy", "vetch", "wren", "basalt", "cobble",
}

// b3Abstentions are asked of blind3 sessions; nothing in them says any of
// the invented answers.
var b3Abstentions = []struct {
	question string
	invented []string
}{
	{"Which feature-flag service does the team use?", []string{"launchdarkly", "unleash", "flagsmith", "split.io"}},
	{"Which error tracker did the user pick?", []string{"sentry", "rollbar", "bugsnag", "honeybadger"}},
	{"Which message broker do the services publish to?", []string{"kafka", "rabbitmq", "pulsar", "kinesis"}},
	{"Which container registry hosts the images?", []string{"ecr", "gcr", "quay", "ghcr", "artifactory"}},
}

// blind3 is one blind3 session being generated, on top of the planted
// family's generator (its writer, files, filler and compactions).
type blind3 struct {
	*gen
	words map[string]bool
}

func generateBlind3(spec Spec) *Session {
	r := rand.New(rand.NewPCG(spec.Seed^0xb3b3b3, uint64(spec.Index)*7919+0x2545f4914f6cdd1d))
	p := projects[r.IntN(len(projects))]
	id := fmt.Sprintf("blind3-%d-%d", spec.Seed, spec.Index)
	start := time.Date(2026, 3, 2, 8, 30, 0, 0, time.UTC).Add(time.Duration(spec.Index) * 26 * time.Hour)
	g := &gen{r: r, p: p, spec: spec, w: newWriter(id, "/home/dev/src/"+p.name, start), used: map[string]bool{}}
	g.files = g.fillerFiles()
	b := &blind3{gen: g, words: map[string]bool{}}
	b.run()
	return &Session{Spec: spec, ID: id, Project: p.name, JSONL: g.w.buf.Bytes(), Records: g.w.records, Tokens: g.w.total, Compactions: g.compactions, Facts: g.facts, Probes: g.probes}
}

// bword returns a blind3 word not used yet in the session.
func (b *blind3) bword() string {
	for {
		w := b3Words[b.r.IntN(len(b3Words))]
		if !b.words[w] {
			b.words[w] = true
			return w
		}
	}
}

func (b *blind3) pick(s []string) string { return s[b.r.IntN(len(s))] }

// run writes the session: a first request, ten turns at seeded fractions of
// its length (three preferences said in passing, three end-of-output
// results, two confirmed proposals, two errors), filler between them, the
// latest request and two abstention questions.
func (b *blind3) run() {
	turns := []func(){b.passing, b.tailResult, b.confirmed, b.failure, b.passing, b.tailResult, b.confirmed, b.failure, b.passing, b.tailResult}
	b.r.Shuffle(len(turns)-1, func(i, j int) { turns[i+1], turns[j+1] = turns[j+1], turns[i+1] })
	b.w.prompt(fmt.Sprintf("I'm picking %s (example.com/%s) back up after a few weeks. Read internal/report/report.go and tell me what state the report command is in.", b.p.name, b.p.name))
	b.w.read(nil, "internal/report/report.go", b.files[0].src)
	b.w.respond(text("The report command parses its flags, sums the totals and prints them in cents. Nothing is half-finished in it."))
	span := float64(b.spec.Tokens - 12000)
	next := 0
	for b.w.total < b.spec.Tokens-9000 || next < len(turns) {
		at := (0.04 + 0.9*float64(next)/float64(len(turns))) * span
		if next < len(turns) && (float64(b.w.total) >= at || b.w.total >= b.spec.Tokens-9000) {
			turns[next]()
			next++
		} else {
			b.filler()
		}
		b.maybeCompact()
	}
	b.latest()
	for _, i := range b.r.Perm(len(b3Abstentions))[:2] {
		a := b3Abstentions[i]
		b.fact(Fact{Category: CatAbstention, Kind: "never_said", Question: a.question, Invented: a.invented})
	}
}

// background is n sentences about the work that state nothing to keep.
func (b *blind3) background(n int) string {
	forms := []string{
		"The %s package grew by accretion and nobody has a full picture of it.",
		"Last week the %s numbers looked off, but that turned out to be a timezone thing.",
		"I spent the morning in meetings about the %s roadmap, which went nowhere in particular.",
		"Support forwarded two tickets about slow %s pages; I think they are the same problem.",
		"The %s helpers were copied from another service years ago.",
		"Most of the %s code paths are exercised by the nightly job anyway.",
		"We talked about rewriting the %s layer but there is no appetite for it this quarter.",
		"The on-call rotation was quiet, apart from one flaky %s check.",
		"Honestly the %s naming confuses me every time I open that directory.",
		"There is an old design doc about the %s flow, mostly out of date by now.",
	}
	var s []string
	for _, i := range b.r.Perm(len(forms))[:n] {
		s = append(s, fmt.Sprintf(forms[i], b.filler1()))
	}
	return strings.Join(s, " ")
}

// prefSlot is a preference or standing instruction: the answer, the
// question, and phrasings that embed it as the tail of a sentence about
// something else (%[1]s is the background clause, %[2]s the value).
type prefSlot struct {
	kind     string
	value    func(b *blind3) string
	question string
	forms    []string
}

var prefSlots = []prefSlot{
	{"fixtures", func(b *blind3) string { return "testdata/" + b.bword() }, "Where do new test fixtures go?", []string{
		"%[1]s, and by the way new fixtures go under %[2]s from now on.",
		"%[1]s — oh, and I'd like any fixture you add to live in %[2]s, not next to the code.",
		"%[1]s; separately, fixtures belong in %[2]s, that's the convention we agreed on.",
	}},
	{"branch", func(b *blind3) string { return b.bword() }, "How must branches be named?", []string{
		"%[1]s, and please name your branches %[2]s/<ticket> so the bot picks them up.",
		"%[1]s (side note: branch names start with %[2]s/ here, the deploy tooling keys on it).",
		"%[1]s, so anyway, %[2]s/ as the branch prefix, every time.",
	}},
	{"reviewer", func(b *blind3) string { return "@" + b.bword() }, "Who has to review schema changes?", []string{
		"%[1]s, and remember that anything touching the schema needs a review from %[2]s.",
		"%[1]s — schema changes go past %[2]s before merge, no exceptions.",
		"%[1]s; my one rule: %[2]s signs off on every migration.",
	}},
	{"timeout", func(b *blind3) string { return fmt.Sprint(1100 + b.r.IntN(3800)) }, "What is the most a request may take, in milliseconds?", []string{
		"%[1]s, and keep in mind no handler may take longer than %[2]s ms end to end.",
		"%[1]s — the budget per request is %[2]s ms, hard limit.",
		"%[1]s, but the SLO people were clear: %[2]s ms at most for any request.",
	}},
	{"envprefix", func(b *blind3) string { return strings.ToUpper(b.bword()) + "_" }, "What prefix must configuration environment variables have?", []string{
		"%[1]s, and by the way every new env var should start with %[2]s.",
		"%[1]s; config variables are prefixed %[2]s in this repo, I'd hate to see another scheme.",
		"%[1]s — I prefer %[2]s in front of any environment variable you introduce.",
	}},
	{"generated", func(b *blind3) string { return "internal/gen/" + b.bword() + ".pb.go" }, "Which file must never be edited by hand?", []string{
		"%[1]s, and never hand-edit %[2]s, it is regenerated on every build.",
		"%[1]s — %[2]s is generated, so leave it alone and change the .proto instead.",
		"%[1]s, though please don't touch %[2]s directly; the generator owns it.",
	}},
}

// passing says a preference in passing: in the middle of a long message
// about something else, as the second half of a sentence.
func (b *blind3) passing() {
	slot := prefSlots[b.r.IntN(len(prefSlots))]
	for b.used["pref:"+slot.kind] {
		slot = prefSlots[b.r.IntN(len(prefSlots))]
	}
	b.used["pref:"+slot.kind] = true
	value := slot.value(b)
	f := b.files[b.r.IntN(len(b.files))]
	clause := strings.TrimSuffix(fmt.Sprintf(b.pick([]string{
		"The %s tests have been flaky since the upgrade",
		"I looked at the %s benchmarks yesterday and they are fine",
		"Nobody has touched the %s code in months",
	}), f.pkg), ".")
	msg := b.background(4+b.r.IntN(4)) + " " + fmt.Sprintf(b.pick(slot.forms), clause, value) + " " + b.background(3+b.r.IntN(4)) +
		" " + fmt.Sprintf("Anyway, what I actually need today: have a look at %s and tell me whether its error handling is sane.", f.path)
	b.w.prompt(msg)
	b.fact(Fact{Category: CatExtraction, Kind: "preference", Question: slot.question, Expect: []string{value}})
	b.w.read(nil, f.path, f.src)
	b.w.respond(text(b.pick([]string{"Noted. The error handling is mostly fine; two returns drop context, nothing urgent.", "Got it. It is sane overall: errors are returned, a couple without context.", "Sure. It looks reasonable; I would only wrap two bare returns."})))
}
