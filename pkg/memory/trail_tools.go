package memory

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// toolOps returns the file changes of a tool call that succeeded (res:
// its result, nil when not seen): shell commands by their words
// (ShellFileOps), patches by their headers, and the file tools by name
// and input — Write, Edit, MultiEdit, NotebookEdit, str_replace editors
// and any tool whose name says it edits, writes, creates or deletes a
// file it names.
func toolOps(b *events.Block, command string, res *events.Block) []fileOp {
	if command != "" {
		return ShellFileOps(command)
	}
	var in map[string]any
	_ = json.Unmarshal(b.Input, &in)
	str := func(k string) string { s, _ := in[k].(string); return s }
	name := strings.ToLower(b.Name)
	_, _, p := ToolCallArg(b)
	if strings.Contains(name, "patch") {
		for _, k := range []string{"input", "patch", "diff"} {
			if s := str(k); s != "" {
				return patchOps(s, true)
			}
		}
	}
	if p == "" {
		return nil
	}
	switch {
	case name == "multiedit":
		edits, _ := in["edits"].([]any)
		what := fmt.Sprintf("%d edits (MultiEdit)", len(edits))
		if n := len(edits); n > 0 {
			if e, ok := edits[n-1].(map[string]any); ok {
				o, _ := e["old_string"].(string)
				nw, _ := e["new_string"].(string)
				what += ", the last " + replaced(o, nw)
			}
		}
		return []fileOp{{op: opEdit, path: p, what: what}}
	case name == "notebookedit":
		mode := str("edit_mode")
		if mode == "" {
			mode = "replace"
		}
		return []fileOp{{op: opEdit, path: p, what: "notebook cell " + mode + "d (NotebookEdit)"}}
	case strings.Contains(name, "str_replace") || name == "text_editor":
		return editorOps(str("command"), p, in)
	case strings.Contains(name, "write") || strings.Contains(name, "create"):
		return []fileOp{writeOp(b.Name, p, str("content"), res)}
	case strings.Contains(name, "delete") || strings.Contains(name, "remove"):
		return []fileOp{{op: opDelete, path: p, what: "deleted (" + b.Name + ")"}}
	case strings.Contains(name, "edit") || name == "replace":
		return []fileOp{{op: opEdit, path: p, what: replaced(str("old_string"), str("new_string"))}}
	}
	return nil
}

// writeOp is a whole-file write: created, unless its result says an
// existing file was updated.
func writeOp(tool, p, content string, res *events.Block) fileOp {
	lines := strings.Count(content, "\n")
	if content != "" && !strings.HasSuffix(content, "\n") {
		lines++
	}
	if res != nil && resultSays(res, "updated", "overwr") {
		return fileOp{op: opEdit, path: p, what: fmt.Sprintf("rewritten whole, %d lines (%s)", lines, tool)}
	}
	return fileOp{op: opWrite, path: p, what: fmt.Sprintf("written, %d lines (%s)", lines, tool)}
}

func resultSays(b *events.Block, words ...string) bool {
	text := strings.ToLower(b.Text)
	for i := range b.Content {
		text += " " + strings.ToLower(b.Content[i].Text)
	}
	for _, w := range words {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

// editorOps: the str_replace editors' commands.
func editorOps(command, p string, in map[string]any) []fileOp {
	s := func(k string) string { v, _ := in[k].(string); return v }
	switch command {
	case "create":
		return []fileOp{writeOp("create", p, s("file_text"), nil)}
	case "str_replace":
		return []fileOp{{op: opEdit, path: p, what: replaced(s("old_str"), s("new_str"))}}
	case "insert":
		return []fileOp{{op: opEdit, path: p, what: "inserted " + quoteLine(s("new_str"))}}
	case "undo_edit":
		return []fileOp{{op: opEdit, path: p, what: "last edit undone"}}
	}
	return nil
}

// replaced phrases an edit by the first lines of what it replaced.
func replaced(old, new string) string {
	return "replaced " + quoteLine(old) + " with " + quoteLine(new)
}

// quoteLine is the first non-blank line of s, clipped, in backticks.
func quoteLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return "`" + strings.ReplaceAll(clipUnits(l, 40), "`", "'") + "`"
		}
	}
	return "nothing"
}
