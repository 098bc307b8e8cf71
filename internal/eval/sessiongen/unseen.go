package sessiongen

// The unseen family (FamilyUnseen) works on four kinds of project that are
// not one Go repository: a Python data pipeline (unseen_pipeline.go), a
// Terraform and Kubernetes change (unseen_infra.go), a TypeScript frontend
// bug hunt (unseen_web.go) and a Postgres schema migration (unseen_db.go).
// Each session plants nine facts, each in one of two or three wordings
// picked by the seed and at a position picked by the seed — early, in the
// middle, late, just before a compaction or just after one:
//
//   - a preference said in passing in the middle of a longer request;
//   - a value that appears only in a tool result (a query table, a log
//     line, a command's JSON output, a bisect), which the agent's reply
//     does not repeat;
//   - a decision the agent reasons its way to and proposes, confirmed by
//     the user with a short "yes, do that";
//   - the path of a file the agent creates;
//   - an instruction corrected later ("scratch that, …", "no — X, not Y");
//   - two requests in a known order, filler between them;
//   - an error met in a tool result and fixed over several tool calls;
//   - something discussed and left undecided, whose answer a summary
//     could invent (abstention);
//   - a latest request of several sentences with a code block, which the
//     agent has just started on when the session ends.
//
// The family was written without reading the offline provider's rules or
// the turns of the other two families.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// uscenario is a kind of work the unseen family writes sessions about.
type uscenario struct {
	projects []string
	branches []string
	users    []string
	// words are the filler's identifiers; no planted answer uses one.
	words []string
	// files makes the repository's files, read again and again by filler.
	files func(g *ugen) []ufile
	tools utooling
	// plants returns the planted events (facts recorded as they are
	// written) and latest the final request.
	plants func(g *ugen) []*uevent
	latest func(g *ugen)
	// work says in a few words what the session is about, for summaries.
	work string
}

// ufile is a file of the session's repository.
type ufile struct{ path, src string }

// uevent is a planted turn, or a few, and where in the session it goes.
type uevent struct {
	run func(g *ugen)
	// dep, when set, must be written before this event.
	dep *uevent
	place
}

// place is where an event goes: at a session size (tokens), or relative
// to a compaction of the platform.
type place struct {
	est    int64 // estimated session size when written, for ordering
	at     int64 // absolute size; before: margin to CompactAt; after: offset past the compaction
	before int   // write when the context nears compaction number before
	after  int   // write past compaction number after
}

// ugen is one unseen session being generated.
type ugen struct {
	r           *rand.Rand
	w           *writer
	sc          *uscenario
	spec        Spec
	id          string
	project     string
	files       []ufile
	facts       []Fact
	compactions int
	compactedAt []int64  // session size at each compaction
	recent      []string // the latest filler requests, for summaries
	spans       [][2]int // JSONL byte ranges written by filler and summaries
}

var unseenScenarios = []*uscenario{&pipelineScenario, &infraScenario, &webScenario, &dbScenario}

// generateUnseen writes the session of spec in the unseen family.
func generateUnseen(spec Spec) *Session {
	s, _ := generateUnseenSpans(spec)
	return s
}

// generateUnseenSpans is generateUnseen that also returns the byte ranges
// of the JSONL written by filler turns and compaction summaries, where no
// planted answer may occur.
func generateUnseenSpans(spec Spec) (*Session, [][2]int) {
	r := rand.New(rand.NewPCG(spec.Seed^0x756e7365656e, uint64(spec.Index)*0x9e3779b97f4a7c15+17))
	sc := unseenScenarios[(spec.Index+int(spec.Seed%uint64(len(unseenScenarios))))%len(unseenScenarios)]
	g := &ugen{r: r, sc: sc, spec: spec, id: fmt.Sprintf("unseen-%d-%d", spec.Seed, spec.Index)}
	g.project = g.pick(sc.projects...)
	start := time.Date(2025, 10, 6, 8, 30, 0, 0, time.UTC).Add(time.Duration(spec.Index)*26*time.Hour + time.Duration(r.IntN(90))*time.Minute)
	g.w = newWriter(g.id, "/home/"+g.pick(sc.users...)+"/code/"+g.project, start)
	g.w.branch = g.pick(sc.branches...)
	g.files = sc.files(g)
	g.run()
	s := &Session{Spec: spec, ID: g.id, Project: g.project, JSONL: g.w.buf.Bytes(), Records: g.w.records, Tokens: g.w.total, Compactions: g.compactions, Facts: g.facts}
	return s, g.spans
}

// run writes filler until the session nears its size, with the planted
// events at their places, compacting when the context is full, and ends
// with the latest request.
func (g *ugen) run() {
	events := g.schedule(g.sc.plants(g))
	const tail = 4000 // the latest request and the start of its work
	for g.w.total < g.spec.Tokens-tail {
		if g.w.ctxTokens >= CompactAt {
			g.compact()
			continue
		}
		if i := g.firstDue(events); i >= 0 {
			for _, e := range events[:i+1] {
				e.run(g)
			}
			events = events[i+1:]
			continue
		}
		g.fillerTurn()
	}
	for _, e := range events {
		e.run(g)
	}
	if g.w.ctxTokens >= CompactAt {
		g.compact()
	}
	g.sc.latest(g)
}

// firstDue returns the index of the first event due to be written, or -1.
func (g *ugen) firstDue(events []*uevent) int {
	for i, e := range events {
		if g.due(e.place) {
			return i
		}
	}
	return -1
}

func (g *ugen) due(p place) bool {
	switch {
	case p.after > 0:
		return g.compactions >= p.after && g.w.total >= g.compactedAt[p.after-1]+p.at
	case p.before > 0:
		return g.compactions >= p.before || (g.compactions == p.before-1 && g.w.ctxTokens >= CompactAt-p.at)
	default:
		return g.w.total >= p.at
	}
}

// Where an event may go.
const (
	placeEarly = iota
	placeMiddle
	placeLate
	placeBeforeCompaction
	placeAfterCompaction
)

// predictedCompaction is the session size at compaction k (from 1): the
// context grows with the session and restarts from the system prompt and
// a summary after each compaction.
func predictedCompaction(k int) int64 { return CompactAt + int64(k-1)*(CompactAt-16600) }

// placement picks a place of kind for a session of size total.
func (g *ugen) placement(kind int, total int64) place {
	n := 0
	for predictedCompaction(n+1) < total-20000 {
		n++
	}
	frac := func(lo, hi float64) place {
		at := int64(float64(total) * (lo + (hi-lo)*g.r.Float64()))
		return place{est: at, at: at}
	}
	switch {
	case kind == placeBeforeCompaction && n > 0:
		k := 1 + g.r.IntN(n)
		margin := int64(5000 + g.r.IntN(9000))
		return place{est: predictedCompaction(k) - margin, at: margin, before: k}
	case kind == placeAfterCompaction && n > 0:
		k := 1 + g.r.IntN(n)
		off := int64(500 + g.r.IntN(9000))
		return place{est: predictedCompaction(k) + off, at: off, after: k}
	case kind == placeEarly:
		return frac(0.02, 0.15)
	case kind == placeMiddle || kind == placeAfterCompaction:
		return frac(0.3, 0.6)
	default:
		return frac(0.65, 0.9)
	}
}

// schedule places the events — each kind of place at least once when
// there are enough of them — keeps every event after its dependency, and
// returns them in the order they are written.
func (g *ugen) schedule(events []*uevent) []*uevent {
	kinds := []int{placeEarly, placeMiddle, placeLate, placeBeforeCompaction, placeAfterCompaction}
	for len(kinds) < len(events) {
		kinds = append(kinds, g.r.IntN(5))
	}
	g.r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for i, e := range events {
		e.place = g.placement(kinds[i], g.spec.Tokens)
	}
	for _, e := range events {
		if e.dep != nil && e.dep.est > e.est {
			e.place, e.dep.place = e.dep.place, e.place
		}
	}
	out := slices.Clone(events)
	slices.SortStableFunc(out, func(a, b *uevent) int {
		if a.est < b.est {
			return -1
		}
		if a.est > b.est {
			return 1
		}
		return 0
	})
	return out
}

// compact writes the platform's compaction with a summary in Claude Code's
// shape that names the recent filler work and none of the planted facts.
func (g *ugen) compact() {
	start := g.w.buf.Len()
	var b strings.Builder
	b.WriteString("This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n")
	fmt.Fprintf(&b, "Analysis:\nThe conversation is about %s in the %s repository. I went through the requests in order and the files they touched.\n\n", g.sc.work, g.project)
	fmt.Fprintf(&b, "Summary:\n1. Primary Request and Intent:\n   The user is working on %s on the branch %s. Recent requests:\n", g.sc.work, g.w.branch)
	for _, r := range g.recent {
		fmt.Fprintf(&b, "   - %s\n", r)
	}
	b.WriteString("2. Key Technical Concepts:\n")
	for i := 0; i < 4; i++ {
		fmt.Fprintf(&b, "   - %s %s handling\n", g.word(), g.word())
	}
	b.WriteString("3. Files and Code Sections:\n")
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&b, "   - %s: read and discussed\n", g.files[g.r.IntN(len(g.files))].path)
	}
	b.WriteString("4. Pending Tasks:\n   - Continue with the user's next request.\n5. Current Work:\n   The last request was answered; the tests were passing.\n")
	b.WriteString("Please continue the conversation from where we left it off without asking the user any further questions. Continue with the last task that you were asked to work on.")
	g.w.compact(b.String())
	g.compactions++
	g.compactedAt = append(g.compactedAt, g.w.total)
	g.spans = append(g.spans, [2]int{start, g.w.buf.Len()})
}

// add records a planted fact stated now.
func (g *ugen) add(f Fact) {
	f.ID = fmt.Sprintf("%s/%d-%s", g.id, len(g.facts)+1, f.Kind)
	f.At = g.w.total
	f.Compactions = g.compactions
	g.facts = append(g.facts, f)
}

func (g *ugen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *ugen) word() string { return g.sc.words[g.r.IntN(len(g.sc.words))] }

func (g *ugen) file() ufile { return g.files[g.r.IntN(len(g.files))] }

// fileWith returns the first file whose path has the prefix, or any file.
func (g *ugen) fileWith(prefix string) ufile {
	for _, f := range g.files {
		if strings.HasPrefix(f.path, prefix) {
			return f
		}
	}
	return g.file()
}

// confirm is the user's short yes to a proposal.
func (g *ugen) confirm() string {
	return g.pick("yes, do that", "Yes, do that.", "yep — do that", "yes do that, thanks", "Yes, do that. Keep the diff small.")
}

// ordered returns two events, the second written after the first (the two
// requests of a temporal fact, an instruction and its correction).
func (g *ugen) ordered(first, second func(g *ugen)) (*uevent, *uevent) {
	a := &uevent{run: first}
	return a, &uevent{run: second, dep: a}
}

// Steps of an instruction and its correction.
const (
	corrInstruction = iota // the instruction, carried out
	corrNow                // the correction, right after it
	corrLater              // the correction, later in the session
)

// correction returns the events of an instruction and its correction:
// one event in which the user corrects the agent at once, or two with the
// correction later in the session. write writes one step and records the
// fact at a correction.
func (g *ugen) correction(write func(g *ugen, step int)) []*uevent {
	if g.r.IntN(3) == 0 {
		return []*uevent{{run: func(g *ugen) { write(g, corrInstruction); write(g, corrNow) }}}
	}
	a, b := g.ordered(func(g *ugen) { write(g, corrInstruction) }, func(g *ugen) { write(g, corrLater) })
	return []*uevent{a, b}
}

// ureq is a request of a temporal fact.
type ureq struct {
	key    string // the words naming it, which the scorer looks for
	prompt string
	work   func(g *ugen) // the agent's work on it
}

// requestPair returns two of reqs as events in a random order, the second
// recording the temporal fact.
func (g *ugen) requestPair(reqs []ureq) []*uevent {
	i := g.r.IntN(len(reqs))
	j := (i + 1 + g.r.IntN(len(reqs)-1)) % len(reqs)
	a, b := reqs[i], reqs[j]
	e1, e2 := g.ordered(func(g *ugen) {
		g.w.prompt(a.prompt)
		a.work(g)
	}, func(g *ugen) {
		g.w.prompt(g.pick("", "Next: ", "Another one. ", "OK, different thing. ") + b.prompt)
		g.add(Fact{Category: CatTemporal, Kind: "order", Question: "What did the user ask for after the " + a.key + "?", Expect: []string{b.key}, After: a.key})
		b.work(g)
	})
	return []*uevent{e1, e2}
}

// latestRequest writes the final request and the start of the agent's
// work on it: a thought and a read of f.
func (g *ugen) latestRequest(prompt string, f ufile, thought string) {
	g.w.prompt(prompt)
	g.add(Fact{Category: CatLatestRequest, Kind: "request", Question: "What is the user's latest request, word for word?", Expect: []string{prompt}, Verbatim: true})
	g.w.read([]part{thinking(thought), text("Starting with " + f.path + ".")}, f.path, f.src)
}

// abstain records an abstention fact: the question's subject was
// discussed, never settled, and a summary must not invent an answer.
func (g *ugen) abstain(question string, invented ...string) {
	g.add(Fact{Category: CatAbstention, Kind: "undecided", Question: question, Invented: invented})
}
