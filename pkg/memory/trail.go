package memory

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// Bounds of a trail: what the record keeps and what a summary shows.
const (
	// TrailMaxFiles is the most files a stored trail keeps (the oldest
	// changes fold into DroppedFiles).
	TrailMaxFiles = 400
	// TrailShowFiles is the most files a summary lists, newest first; the
	// rest are counted.
	TrailShowFiles = 25
	// TrailMaxCommands and TrailMaxErrors bound the commands and the
	// errors kept and shown, newest last.
	TrailMaxCommands = 10
	TrailMaxErrors   = 6
	// trailLine bounds a command or an error's text.
	trailLine = 110
)

// FoldTrail returns t with the changes, commands and errors of msgs
// folded in, in order (t itself is not modified; nil starts a new trail).
// seqs[i] is the transcript sequence of msgs[i]; a message at or below
// t.Seq was folded before and is skipped, so folding overlapping reads of
// the transcript counts each record once. With seqs nil, messages are
// numbered after t.Seq. A tool call whose result is an error changed
// nothing; one whose result msgs do not hold is taken as done. Messages
// of every thread count (a subagent's edits change files too).
func FoldTrail(t *events.Trail, msgs []*events.Message, seqs []uint64) *events.Trail {
	tr := newTrailer(t)
	results := resultsOf(msgs)
	base := tr.t.Seq
	for i, m := range msgs {
		seq := base + uint64(i) + 1
		if seqs != nil {
			seq = seqs[i]
		}
		if m == nil || seq <= tr.t.Seq && seqs != nil {
			continue
		}
		tr.t.Seq = max(tr.t.Seq, seq)
		if m.Role != events.RoleAssistant {
			continue
		}
		for j := range m.Content {
			if b := &m.Content[j]; b.Type == events.BlockToolUse {
				tr.call(b, results[b.ID], m.UUID, seq)
			}
		}
	}
	tr.bound()
	return tr.t
}

// ArtifactsOf is the files a transcript's tool calls changed, oldest
// change first: FoldTrail over msgs from nothing. The eval scores
// artifact probes against it.
func ArtifactsOf(msgs []*events.Message) []events.TrailFile {
	return FoldTrail(nil, msgs, nil).Files
}

// resultsOf maps tool_use ids to their results in msgs.
func resultsOf(msgs []*events.Message) map[string]*events.Block {
	out := map[string]*events.Block{}
	for _, m := range msgs {
		if m == nil {
			continue
		}
		for j := range m.Content {
			if b := &m.Content[j]; b.Type == events.BlockToolResult {
				out[b.ToolUseID] = b
			}
		}
	}
	return out
}

// trailer folds changes into a copy of a trail.
type trailer struct {
	t *events.Trail
}

func newTrailer(t *events.Trail) *trailer {
	c := &events.Trail{}
	if t != nil {
		*c = *t
		c.Files = append([]events.TrailFile(nil), t.Files...)
		c.Commands = append([]events.TrailCommand(nil), t.Commands...)
		c.Errors = append([]events.TrailError(nil), t.Errors...)
	}
	return &trailer{t: c}
}

// call folds one tool call and its result (nil: not seen).
func (tr *trailer) call(b *events.Block, res *events.Block, record string, seq uint64) {
	name, arg, _ := ToolCallArg(b)
	command := shellCommand(b)
	label := name + " " + arg
	if command != "" {
		label = command
	}
	label = clipUnits(strings.Join(strings.Fields(label), " "), trailLine)
	failed := res != nil && res.IsError
	if command != "" {
		tr.command(label, res, seq)
	}
	if failed {
		tr.failure(label, res, seq)
		return
	}
	tr.passed(label)
	for _, op := range toolOps(b, command, res) {
		tr.apply(op, record, seq)
	}
}

// shellCommand is the command line of a shell tool call, or "".
func shellCommand(b *events.Block) string {
	var in map[string]any
	if json.Unmarshal(b.Input, &in) != nil {
		return ""
	}
	switch c := in["command"].(type) {
	case string:
		n := strings.ToLower(b.Name)
		if n == "bash" || strings.Contains(n, "shell") || strings.Contains(n, "exec") || strings.Contains(n, "terminal") || strings.Contains(n, "run") {
			return c
		}
	case []any: // ["bash", "-lc", "…"]
		if len(c) > 0 {
			if s, ok := c[len(c)-1].(string); ok {
				return s
			}
		}
	}
	return ""
}

// key is how a path is compared: cleaned, without a leading ./.
func key(p string) string { return path.Clean(strings.TrimPrefix(p, "./")) }

// find returns the index of the file at p: the same path, or one that
// ends with the other at a separator (an absolute path and the same file
// relative to the working directory); -1 when none.
func (tr *trailer) find(p string) int {
	k := key(p)
	for i := len(tr.t.Files) - 1; i >= 0; i-- {
		if f := key(tr.t.Files[i].Path); f == k {
			return i
		}
	}
	for i := len(tr.t.Files) - 1; i >= 0; i-- {
		f := key(tr.t.Files[i].Path)
		if strings.HasSuffix(f, "/"+k) || strings.HasSuffix(k, "/"+f) {
			return i
		}
	}
	return -1
}

// take removes the file at p from the list and returns it (a new entry
// when there is none; isNew says which).
func (tr *trailer) take(p string) (f events.TrailFile, isNew bool) {
	i := tr.find(p)
	if i < 0 {
		return events.TrailFile{Path: p}, true
	}
	f = tr.t.Files[i]
	tr.t.Files = append(tr.t.Files[:i], tr.t.Files[i+1:]...)
	return f, false
}

// apply folds one change; the file becomes the newest.
func (tr *trailer) apply(op fileOp, record string, seq uint64) {
	if op.path == "" {
		return
	}
	var f events.TrailFile
	isNew := false
	if op.op == opMove {
		f, isNew = tr.take(op.from)
		if i := tr.find(op.path); i >= 0 {
			tr.t.Files = append(tr.t.Files[:i], tr.t.Files[i+1:]...) // overwritten
		}
		switch {
		case key(f.From) == key(op.path):
			f.From = "" // moved back
		case f.From == "":
			f.From = f.Path
		}
		f.Deleted = false
	} else {
		f, isNew = tr.take(op.path)
		if op.op == opTouch && !isNew && !f.Deleted {
			tr.t.Files = append(tr.t.Files, f) // only its time changed
			return
		}
		switch op.op {
		case opWrite, opTouch:
			f.Created = f.Created || isNew || f.Deleted
			f.Deleted = false
		case opEdit:
			f.Deleted = false
		case opDelete:
			f.Deleted = true
		}
	}
	f.Path = op.path
	f.Changes++
	f.Last, f.Record, f.Seq = op.what, record, seq
	tr.t.Files = append(tr.t.Files, f)
	tr.fixed(f.Path + ": " + op.what)
}

// command records a shell command's outcome.
func (tr *trailer) command(label string, res *events.Block, seq uint64) {
	out := "no result seen"
	if res != nil {
		out = "ok"
		if res.IsError {
			out = "failed: " + clipUnits(errorLine(res), trailLine)
		}
	}
	tr.t.TotalCommands++
	tr.t.Commands = append(tr.t.Commands, events.TrailCommand{Command: label, Outcome: out, Seq: seq})
}

// failure records a failed call; a call still failing updates its entry.
func (tr *trailer) failure(label string, res *events.Block, seq uint64) {
	msg := clipUnits(errorLine(res), trailLine)
	for i := range tr.t.Errors {
		if e := &tr.t.Errors[i]; e.Call == label && !e.Passed {
			e.Error, e.Seq = msg, seq
			return
		}
	}
	tr.t.TotalErrors++
	tr.t.Errors = append(tr.t.Errors, events.TrailError{Call: label, Error: msg, Seq: seq})
}

// fixed gives open errors without a fix the change just made.
func (tr *trailer) fixed(change string) {
	for i := range tr.t.Errors {
		if e := &tr.t.Errors[i]; e.Fix == "" && !e.Passed {
			e.Fix = clipUnits(change, trailLine)
		}
	}
}

// passed marks the open errors of a call that now succeeded.
func (tr *trailer) passed(label string) {
	for i := range tr.t.Errors {
		if e := &tr.t.Errors[i]; e.Call == label {
			e.Passed = true
		}
	}
}

// errorLine is the first line of a failed result that says something: not
// a bare "Exit code N", which is kept as a prefix.
func errorLine(b *events.Block) string {
	text := b.Text
	for i := range b.Content {
		text += "\n" + b.Content[i].Text
	}
	code := ""
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
		case strings.HasPrefix(l, "Exit code ") && len(l) < 16:
			code = "exit " + strings.TrimPrefix(l, "Exit code ") + ": "
		default:
			return code + l
		}
	}
	return strings.TrimSuffix(code, ": ")
}

// bound keeps the newest entries within the trail's bounds.
func (tr *trailer) bound() {
	t := tr.t
	if n := len(t.Files) - TrailMaxFiles; n > 0 {
		t.Files, t.DroppedFiles = t.Files[n:], t.DroppedFiles+n
	}
	if n := len(t.Commands) - TrailMaxCommands; n > 0 {
		t.Commands = t.Commands[n:]
	}
	if n := len(t.Errors) - TrailMaxErrors; n > 0 {
		t.Errors = t.Errors[n:]
	}
}

// describe names what happened to f: created, edited N times, deleted,
// moved from.
func describe(f events.TrailFile) string {
	var parts []string
	edits := f.Changes
	if f.Created {
		parts = append(parts, "created")
		edits--
	}
	if f.From != "" {
		parts = append(parts, "moved from `"+f.From+"`")
		edits--
	}
	if f.Deleted {
		parts = append(parts, "deleted")
		edits--
	}
	if edits > 0 {
		parts = append(parts, fmt.Sprintf("edited %d %s", edits, plural(edits, "time", "times")))
	}
	if len(parts) == 0 {
		parts = append(parts, "edited")
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
