package memory

import (
	"fmt"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// Headings of a rendered trail.
const (
	TrailFilesHeading    = "# Files changed (exact, from the tool calls)"
	TrailCommandsHeading = "# Commands run"
	TrailErrorsHeading   = "# Errors and fixes"
)

// RenderTrail renders a trail for a summary: the files changed, the
// TrailShowFiles changed most recently with the rest counted and a pointer
// to Recall's session query, listed in the order of their last change so
// that the last line is the newest (a summary is read top to bottom, and a
// later mention is a newer one: a file changed before a correction must
// not state its old value after the corrected one); the newest commands with their outcomes; the
// newest errors with what fixed them. Each file says what happened to it
// (created, edited N times, deleted, moved from), its last change in a
// phrase and the record it happened in. "" for an empty or nil trail. The
// text is bounded: about 4,000 tokens at most, whatever the session.
func RenderTrail(t *events.Trail) string {
	if t == nil || len(t.Files)+len(t.Commands)+len(t.Errors) == 0 {
		return ""
	}
	var b strings.Builder
	if len(t.Files) > 0 {
		b.WriteString(TrailFilesHeading + "\n")
		first := max(0, len(t.Files)-TrailShowFiles)
		if rest := first + t.DroppedFiles; rest > 0 {
			fmt.Fprintf(&b, "- … %d %s changed earlier %s not listed here: Recall's session query lists them (ask which files changed).\n", rest, plural(rest, "file", "files"), plural(rest, "is", "are"))
		}
		for _, f := range t.Files[first:] {
			fmt.Fprintf(&b, "- `%s` — %s; last: %s (%s)\n", clipUnits(f.Path, 160), describe(f), clipUnits(f.Last, trailLine), recordRef(f.Record, f.Seq))
		}
	}
	if len(t.Commands) > 0 {
		fmt.Fprintf(&b, "\n%s (the last %d of %d)\n", TrailCommandsHeading, len(t.Commands), t.TotalCommands)
		for _, c := range t.Commands {
			fmt.Fprintf(&b, "- `%s` → %s\n", c.Command, c.Outcome)
		}
	}
	if len(t.Errors) > 0 {
		fmt.Fprintf(&b, "\n%s (the last %d of %d)\n", TrailErrorsHeading, len(t.Errors), t.TotalErrors)
		for _, e := range t.Errors {
			fix := "not fixed yet"
			if e.Fix != "" {
				fix = "fixed by " + e.Fix
			}
			if e.Passed {
				fix += "; it passed afterwards"
			}
			fmt.Fprintf(&b, "- `%s` failed: %s → %s\n", e.Call, e.Error, fix)
		}
	}
	return b.String()
}

func recordRef(record string, seq uint64) string {
	if seq == 0 {
		return "record " + record
	}
	return fmt.Sprintf("seq %d", seq)
}

// WithTrail is the trail's rendering followed by notes: the exact files,
// commands and errors under their own headings, then the notes as written
// (by a model or the offline provider). The trail comes first because it
// is history — a file's last change may hold a value a later correction
// replaced — and the notes state what is current, so a reader who takes
// the later mention as the newer one reads the notes' value. Sections of the
// notes under those headings (a copy a model made from an earlier summary)
// are replaced, so the trail appears once; nothing else in the notes is
// changed, and a file the notes never name is listed all the same.
func WithTrail(notes string, t *events.Trail) string {
	r := RenderTrail(t)
	if r == "" {
		return notes
	}
	return r + "\n" + strings.TrimLeft(withoutTrailSections(notes), "\n")
}

// withoutTrailSections drops the sections of notes whose heading starts
// like one of the trail's.
func withoutTrailSections(notes string) string {
	if !strings.Contains(notes, "# Files changed (exact") && !strings.Contains(notes, TrailCommandsHeading) && !strings.Contains(notes, TrailErrorsHeading) {
		return notes
	}
	var out []string
	skip := false
	for _, l := range strings.Split(notes, "\n") {
		if strings.HasPrefix(l, "# ") {
			skip = strings.HasPrefix(l, "# Files changed (exact") || strings.HasPrefix(l, TrailCommandsHeading) || strings.HasPrefix(l, TrailErrorsHeading)
		}
		if !skip {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
