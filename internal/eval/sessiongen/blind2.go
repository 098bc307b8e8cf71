package sessiongen

// The blind2 family (FamilyBlind2, blind2*.go): a fourth family, written
// from the Fact and probe contracts alone, without reading the offline
// provider's rules or the other families' turns. Its sessions are four
// other kinds of work — a Rust CLI refactor, a data-science notebook
// clean-up, a mobile app release and an incident investigation on a Go
// service — each a long tool loop that creates, edits, moves, copies and
// deletes files through the Write, Edit, MultiEdit and NotebookEdit tools
// and through shell commands, with facts in every category and probes of
// every kind a family writes (recall, decision, continuation).
//
// How things are said: a standing instruction inside the first request, a
// preference mid-paragraph in a message about something else, a result
// only in the last lines of a long tool output, a decision the agent
// proposes and the user confirms with a bare "yes", a value corrected in
// the same message and another corrected much later, a decision reversed
// later, errors fixed through an edit and through the shell.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// FamilyBlind2 is the fourth family (blind2*.go): a Rust CLI refactor, a
// notebook clean-up, a mobile release and an incident investigation,
// written blind to the offline rules and the other families.
const FamilyBlind2 = "blind2"

// bgen is one blind2 session being generated; a work (one kind of work)
// writes its turns through it.
type bgen struct {
	r           *rand.Rand
	spec        Spec
	w           *writer
	facts       []Fact
	probes      []Probe
	compactions int
	used        map[string]bool
	summary     string // what the platform's compaction summary says
	// beatAt is where the current fact-bearing turn began in the
	// transcript, and starts where each fact's and probe's turn did (the
	// family's test checks that no answer occurs before its turn).
	beatAt int
	starts map[string]int
}

// work is one kind of work a blind2 session does.
type work interface {
	// project is the project's name, its working directory and branch.
	project() (name, cwd, branch string)
	// first writes the first request and the agent's first reads.
	first()
	// beats are the fact-bearing turns in session order, each due at a
	// fraction of the session.
	beats() []beat
	// filler writes one ordinary turn: a tool loop with large results.
	filler()
	// latest writes the last request, the agent's start on it and the
	// session's continuation probe.
	latest()
	// abstentions are questions about things the session never says.
	abstentions() []abstention
}

type beat struct {
	at   float64
	turn func()
}

type abstention struct {
	question string
	invented []string
}

var blindWorks = []func(*bgen) work{newRustWork, newNotebookWork, newMobileWork, newIncidentWork}

func generateBlind2(spec Spec) *Session {
	s, _ := blind2(spec)
	return s
}

// blind2 generates spec's session and says where each fact's and probe's
// turn began in its transcript.
func blind2(spec Spec) (*Session, map[string]int) {
	b := &bgen{starts: map[string]int{},
		r:    rand.New(rand.NewPCG(spec.Seed^0xb1d2b1d2, uint64(spec.Index)*0x9e3779b97f4a7c15+0x2545f491)),
		spec: spec, used: map[string]bool{},
	}
	k := blindWorks[(int(spec.Seed%uint64(len(blindWorks)))+spec.Index)%len(blindWorks)](b)
	name, cwd, branch := k.project()
	id := fmt.Sprintf("blind2-%d-%d", spec.Seed, spec.Index)
	start := time.Date(2026, 2, 9, 8, 40, 0, 0, time.UTC).Add(time.Duration(spec.Index) * 26 * time.Hour)
	b.w = newWriter(id, cwd, start)
	b.w.branch = branch
	b.run(k)
	return &Session{Spec: spec, ID: id, Project: name, JSONL: b.w.buf.Bytes(), Records: b.w.records,
		Tokens: b.w.total, Compactions: b.compactions, Facts: b.facts, Probes: b.probes}, b.starts
}

func (b *bgen) run(k work) {
	k.first()
	plan := k.beats()
	for i := range plan {
		plan[i].at += (b.r.Float64() - 0.5) * 0.03
	}
	next := 0
	target := b.spec.Tokens
	span := float64(target - 12000) // the latest request and its tool calls come after
	for b.w.total < target-7000 || next < len(plan) {
		b.beatAt = b.w.buf.Len()
		switch {
		case next < len(plan) && float64(b.w.total) >= plan[next].at*span:
			plan[next].turn()
			next++
		case b.w.total < target-7000:
			k.filler()
		default:
			plan[next].turn()
			next++
		}
		b.maybeCompact()
	}
	b.beatAt = b.w.buf.Len()
	k.latest()
	for _, i := range b.r.Perm(len(k.abstentions()))[:2] {
		a := k.abstentions()[i]
		b.fact(Fact{Category: CatAbstention, Kind: "never_said", Question: a.question, Invented: a.invented})
	}
}

func (b *bgen) maybeCompact() {
	if b.w.ctxTokens < CompactAt {
		return
	}
	b.compactions++
	b.w.compact("This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n\n" + b.summary +
		"\n\nPlease continue the conversation from where we left it off without asking the user any further questions.")
}

// fact records a fact at the current position.
func (b *bgen) fact(f Fact) {
	f.ID = fmt.Sprintf("%s/%02d-%s", b.w.session, len(b.facts)+1, f.Kind)
	f.At, f.Compactions = b.w.total, b.compactions
	b.facts = append(b.facts, f)
	b.starts[f.ID] = b.beatAt
}

// probe records a probe at the current position.
func (b *bgen) probe(p Probe) {
	p.ID = fmt.Sprintf("%s/p%02d-%s", b.w.session, len(b.probes)+1, p.Kind)
	p.At, p.Compactions = b.w.total, b.compactions
	b.probes = append(b.probes, p)
	b.starts[p.ID] = b.beatAt
}

// word draws a fact word not used yet in this session.
func (b *bgen) word() string {
	for {
		w := blindFactWords[b.r.IntN(len(blindFactWords))]
		if !b.used[w] {
			b.used[w] = true
			return w
		}
	}
}

// fw is a filler word; filler never draws from blindFactWords.
func (b *bgen) fw() string { return blindFillerWords[b.r.IntN(len(blindFillerWords))] }

// between is a number in [lo, hi).
func (b *bgen) between(lo, hi int) int { return lo + b.r.IntN(hi-lo) }

// pick is one of the choices.
func pick[T any](b *bgen, choices ...T) T { return choices[b.r.IntN(len(choices))] }

// multiEdit calls MultiEdit on path with pairs of old and new strings.
func (b *bgen) multiEdit(before []part, path string, pairs ...string) {
	var edits []any
	for i := 0; i+1 < len(pairs); i += 2 {
		edits = append(edits, map[string]any{"old_string": pairs[i], "new_string": pairs[i+1]})
	}
	full := b.w.cwd + "/" + path
	ids := b.w.respond(append(before, b.w.tool("MultiEdit", map[string]any{"file_path": full, "edits": edits}))...)
	b.w.result(ids[len(ids)-1], fmt.Sprintf("Applied %d edits to %s:\n%s", len(edits), full, numbered(pairs[len(pairs)-1])), false,
		map[string]any{"filePath": full, "edits": edits, "userModified": false})
}

// notebookEdit replaces one cell of a notebook with NotebookEdit.
func (b *bgen) notebookEdit(before []part, path, cell, source string) {
	full := b.w.cwd + "/" + path
	ids := b.w.respond(append(before, b.w.tool("NotebookEdit", map[string]any{"notebook_path": full, "cell_id": cell, "new_source": source, "edit_mode": "replace"}))...)
	b.w.result(ids[len(ids)-1], fmt.Sprintf("Updated cell %s with %s", cell, source), false,
		map[string]any{"new_source": source, "cell_id": cell, "cell_type": "code", "language": "python", "edit_mode": "replace", "notebook_path": full})
}

// todo writes a TodoWrite call, as agents do when they plan a long task.
func (b *bgen) todo(items ...string) {
	var todos []any
	for i, it := range items {
		status := "pending"
		if i == 0 {
			status = "in_progress"
		}
		todos = append(todos, map[string]any{"content": it, "status": status, "activeForm": it})
	}
	ids := b.w.respond(b.w.tool("TodoWrite", map[string]any{"todos": todos}))
	b.w.result(ids[0], "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress. Please proceed with the current tasks if applicable", false,
		map[string]any{"oldTodos": []any{}, "newTodos": todos})
}

// longLog is n lines of tool output from line, then the tail lines: a
// result that is only at the end of a long output.
func (b *bgen) longLog(n int, line func(i int) string, tail ...string) string {
	var s strings.Builder
	for i := 0; i < n; i++ {
		s.WriteString(line(i))
		s.WriteByte('\n')
	}
	for _, t := range tail {
		s.WriteString(t)
		s.WriteByte('\n')
	}
	return s.String()
}

// editLine edits one line of src that contains needle (or the first
// non-empty line) into repl(line), as an agent's small edit.
func (b *bgen) editLine(before []part, path, src, needle string, repl func(string) string) {
	lines := strings.Split(src, "\n")
	old := ""
	for _, l := range lines {
		if strings.TrimSpace(l) != "" && (needle == "" || strings.Contains(l, needle)) {
			old = l
			if b.r.IntN(3) == 0 {
				break
			}
		}
	}
	if old == "" {
		old = lines[0]
	}
	b.w.edit(before, path, old, repl(old))
}
