package llm

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/recallhq/recall/pkg/memory"
)

// Bounds of the offline provider's section bodies, so its documents stay far
// below memory.MaxTotalTokens and every section below memory.MaxSectionTokens.
const (
	offlineMaxFiles    = 30
	offlineMaxCommands = 20
	offlineHeadCommand = 6 // the first commands, kept for good
	offlineMaxErrors   = 15
	offlineMaxWorklog  = 40
	offlineMaxResults  = 12
	offlineLine        = 160
	// offlineSectionChars bounds a list section's body: a quarter under
	// the section budget (memory.MaxSectionTokens at 4 characters a token).
	offlineSectionChars = memory.MaxSectionTokens * 3
)

// tallyMarker is the line, last in the Worklog section, that names the
// newest tool call the notes counted, so the next extraction counts only
// what follows it. It is an HTML comment: bookkeeping, not a note.
var tallyMarker = regexp.MustCompile(`(?m)^<!-- recall-offline: counted through tool call (\S+) -->\n?`)

func markerLine(id string) string {
	return "<!-- recall-offline: counted through tool call " + id + " -->"
}

// notesMarker is the tally marker of notes, "" for none.
func notesMarker(notes string) string {
	if m := tallyMarker.FindStringSubmatch(notes); m != nil {
		return m[1]
	}
	return ""
}

// offlineEdits compares the notes with the derived facts and returns one
// whole-section replacement per changed section.
func offlineEdits(notes string, f facts) []memory.Edit {
	_, sections := memory.Parse(notes)
	finals := finalValues(append(notesChanges(notes), f.changes...))
	var edits []memory.Edit
	for i, s := range sections {
		old := strings.TrimSpace(s.Body)
		header := strings.ToLower(strings.TrimSpace(s.Header))
		body, known := sectionBody(header, old, f)
		if known && header != "session title" && header != "current state" {
			body = annotate(body, finals)
		}
		if !known || body == old {
			continue
		}
		ns := s
		ns.Body = body + "\n"
		if i < len(sections)-1 {
			ns.Body += "\n"
		}
		if ns.Text() == s.Text() {
			continue
		}
		edits = append(edits, memory.Edit{OldString: s.Text(), NewString: ns.Text()})
	}
	return edits
}

// sectionBody is the new body of the section with header (lowercase) and
// body old; known is false for a header the offline provider leaves alone.
func sectionBody(header, old string, f facts) (body string, known bool) {
	switch header {
	case "session title":
		if old == "" && f.firstRequest != "" {
			return title(f.firstRequest), true
		}
		return old, true
	case "current state":
		var lines []string
		if f.latestRequest != "" {
			lines = append(lines, "Latest request: "+clip(f.latestRequest, offlineLatest))
		}
		if f.latestReply != "" {
			lines = append(lines, "Latest reply: "+clip(f.latestReply, 400))
		}
		if len(lines) == 0 {
			return old, true
		}
		return strings.Join(lines, "\n"), true
	case "task specification":
		return taskSpec(old, f), true
	case "files and functions":
		return mergeLines(old, f.files, fileKey, mergeFileTools, offlineMaxFiles, "files"), true
	case "workflow":
		return mergeCommands(old, f.commands), true
	case "errors & corrections":
		return mergeLines(old, f.errors, errorKey, nil, offlineMaxErrors, "errors"), true
	case "key results":
		return mergeLines(old, f.results, commandKey, nil, offlineMaxResults, "results"), true
	case "worklog":
		return mergeWorklog(old, f), true
	}
	return old, false
}

// title makes a short title from the first request: its first sentence or
// line, at most 10 words.
func title(req string) string {
	line := strings.TrimSpace(strings.SplitN(req, "\n", 2)[0])
	if loc := sentenceEnd.FindStringIndex(line); loc != nil && loc[0] > 0 {
		line = line[:loc[0]]
	}
	words := strings.Fields(line)
	if len(words) > 10 {
		words = words[:10]
	}
	return clip(strings.Join(words, " "), 100)
}

func lineKey(l string) string { return l }

// errorKey keys an error line by what failed, so the line with its fix
// replaces the one without; a change by the values it names.
func errorKey(l string) string {
	if m := changeLine.FindString(l); m != "" {
		return m
	}
	if i := strings.Index(l, " → "); i > 0 {
		return l[:i]
	}
	return l
}

// commandKey keys a workflow line by its command.
func commandKey(l string) string {
	if i := strings.Index(l, "` → "); i > 0 {
		return l[:i+1]
	}
	return l
}

func fileKey(l string) string {
	if i := strings.Index(l, "` — "); i > 0 {
		return l[:i]
	}
	return l
}

// mergeFileTools merges a file's old line into its new one: the tools of
// both, old ones first, and what their edits put there (keepEdits).
func mergeFileTools(old, new string) string {
	i, j := strings.Index(old, "` — "), strings.Index(new, "` — ")
	if i < 0 || j < 0 {
		return new
	}
	oldParts := strings.Split(old[i+len("` — "):], " | ")
	newParts := strings.Split(new[j+len("` — "):], " | ")
	tools := strings.Split(oldParts[0], ", ")
	for _, t := range strings.Split(newParts[0], ", ") {
		if !contains(tools, t) {
			tools = append(tools, t)
		}
	}
	edits := oldParts[1:]
	for _, e := range newParts[1:] {
		if !contains(edits, e) {
			edits = append(edits, e)
		}
	}
	fu := fileUse{path: new[len("- `"):j], tools: tools, edits: keepEdits(edits)}
	return fu.line()
}

// keepEdits bounds what a file's line says its edits put there to the
// last offlineFileEdits and one edit inside a body, dropping first the
// oldest edit inside a body and keeping whole writes and declarations.
func keepEdits(edits []string) []string {
	for len(edits) > offlineFileEdits || bodyEdits(edits) > 1 {
		drop := 0
		for i, e := range edits {
			if strings.HasPrefix(e, "edit: ") {
				drop = i
				break
			}
		}
		edits = append(edits[:drop:drop], edits[drop+1:]...)
	}
	return edits
}

// foldLine matches the line that counts the entries folded out of a list.
var foldLine = regexp.MustCompile(`^- … (\d+) earlier (\S+) not listed$`)

// mergeLines merges existing body lines with new entries: an existing line
// whose key a new entry shares is replaced by it (merged with it by merge,
// when not nil), in the new entry's place; the other existing lines come
// first, in their order, then every entry. When more than max lines (or
// offlineSectionChars characters) result, the oldest are folded into a
// first line counting them ("- … N earlier <noun> not listed"), so the count
// of what the notes saw carries across extractions.
func mergeLines(body string, entries []string, key func(string) string, merge func(old, new string) string, max int, noun string) string {
	folded, lines := splitFold(body)
	byKey := map[string]string{}
	for _, l := range lines {
		byKey[key(l)] = l
	}
	newKeys := map[string]bool{}
	for i, e := range entries {
		k := key(e)
		newKeys[k] = true
		if old, ok := byKey[k]; ok && merge != nil {
			entries[i] = merge(old, e)
		}
	}
	var out []string
	for _, l := range lines {
		if !newKeys[key(l)] {
			out = append(out, l)
		}
	}
	out = append(out, entries...)
	for len(out) > 1 && (len(out) > max || joinedLen(out) > offlineSectionChars) {
		out, folded = out[1:], folded+1
	}
	if folded > 0 {
		out = append([]string{fmt.Sprintf("- … %d earlier %s not listed", folded, noun)}, out...)
	}
	return strings.Join(out, "\n")
}

// splitFold returns the count of a body's fold line and its other
// non-blank lines.
func splitFold(body string) (folded int, lines []string) {
	for _, l := range strings.Split(body, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if m := foldLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			folded += n
			continue
		}
		lines = append(lines, l)
	}
	return folded, lines
}

func joinedLen(lines []string) int {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	return n
}

func bodyEdits(edits []string) int {
	n := 0
	for _, e := range edits {
		if strings.HasPrefix(e, "edit: ") {
			n++
		}
	}
	return n
}

// mergeCommands adds the commands the workflow does not list yet (a
// command listed already takes its new result in its place). The
// first offlineHeadCommand commands stay for good; past offlineMaxCommands
// the oldest of the others are folded into a line counting them, between
// the first and the latest.
func mergeCommands(body string, commands []string) string {
	folded, lines := splitFold(body)
	for _, c := range commands {
		if i := indexKey(lines, c, commandKey); i >= 0 {
			lines[i] = c
			continue
		}
		lines = append(lines, c)
	}
	head := min(offlineHeadCommand, len(lines))
	for len(lines) > head+1 && (len(lines) > offlineMaxCommands || joinedLen(lines) > offlineSectionChars) {
		lines = append(lines[:head], lines[head+1:]...)
		folded++
	}
	if folded == 0 {
		return strings.Join(lines, "\n")
	}
	out := append(append(append([]string(nil), lines[:head]...), fmt.Sprintf("- … %d earlier commands not listed", folded)), lines[head:]...)
	return strings.Join(out, "\n")
}
