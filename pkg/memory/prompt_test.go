package memory_test

import (
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/memory"
)

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"currentNotes": "NOTES {{notesPath}}", "notesPath": "recall://t/s/memory.md"}
	tests := []struct {
		name, in, want string
	}{
		{"both", "a {{currentNotes}} b {{notesPath}}", "a NOTES {{notesPath}} b recall://t/s/memory.md"},
		{"unknown left", "{{other}} {{ notesPath }} {{notesPath}}", "{{other}} {{ notesPath }} recall://t/s/memory.md"},
		{"repeated", "{{notesPath}}{{notesPath}}", "recall://t/s/memory.mdrecall://t/s/memory.md"},
		{"none", "plain text {not} {{", "plain text {not} {{"},
		{"adjacent braces", "{{{notesPath}}}", "{recall://t/s/memory.md}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memory.Substitute(tt.in, vars); got != tt.want {
				t.Errorf("Substitute(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestBuildPromptDefault(t *testing.T) {
	notes := memory.DefaultTemplate
	path := memory.NotesPath("acme", "s1")
	p := memory.BuildPrompt("", notes, path)
	if !strings.Contains(p, notes) {
		t.Error("prompt does not carry the notes")
	}
	if strings.Contains(p, "{{") {
		t.Errorf("prompt has unsubstituted variables:\n%s", p)
	}
	for _, want := range []string{
		"not part of the conversation", "Edit tool on " + path, "in parallel", "stop",
		"never change", "never add a new section", "No info yet", "Key results", "Current State",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("default prompt lacks %q", want)
		}
	}
	if strings.Contains(p, "CRITICAL") {
		t.Error("reminder on a document within budget")
	}
}

func TestBuildPromptCustom(t *testing.T) {
	custom := "Update {{notesPath}} from:\n{{currentNotes}}\nkeep {{unknown}}"
	notes := "# A\n_d_\nbody with {{notesPath}}\n"
	got := memory.BuildPrompt(custom, notes, "P")
	want := "Update P from:\n# A\n_d_\nbody with {{notesPath}}\n\nkeep {{unknown}}"
	if got != want {
		t.Errorf("BuildPrompt = %q, want %q", got, want)
	}
}

func TestNotesPath(t *testing.T) {
	if got := memory.NotesPath("acme", "sess-1"); got != "recall://acme/sess-1/memory.md" {
		t.Errorf("NotesPath = %q", got)
	}
}

// doc builds a document from the default template with the given section
// bodies.
func doc(bodies map[string]string) string {
	_, secs := memory.Parse(memory.DefaultTemplate)
	var b strings.Builder
	for _, s := range secs {
		if body, ok := bodies[s.Header]; ok {
			s.Body = body + "\n\n"
		}
		b.WriteString(s.Text())
	}
	return b.String()
}

func TestSizeReminders(t *testing.T) {
	big := func(tokens int) string { return strings.Repeat("word ", tokens*4/5) }
	tests := []struct {
		name     string
		notes    string
		critical bool
		sections []string // in the order listed
	}{
		{"template", memory.DefaultTemplate, false, nil},
		{"one big section", doc(map[string]string{"Worklog": big(2500)}), false, []string{"Worklog"}},
		{"just under section limit", doc(map[string]string{"Worklog": big(1900)}), false, nil},
		{"largest first", doc(map[string]string{"Worklog": big(2100), "Learnings": big(3000), "Workflow": big(2500)}),
			false, []string{"Learnings", "Workflow", "Worklog"}},
		{"over total", doc(map[string]string{
			"Worklog": big(1900), "Learnings": big(1900), "Workflow": big(1900), "Current State": big(1900),
			"Task specification": big(1900), "Key results": big(1900), "Files and Functions": big(2200),
		}), true, []string{"Files and Functions"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := memory.SizeReminders(tt.notes)
			if got := strings.Contains(r, "CRITICAL"); got != tt.critical {
				t.Errorf("CRITICAL = %v, want %v (total %d tokens)\n%s", got, tt.critical, memory.DocumentTokens(tt.notes), r)
			}
			if tt.critical {
				for _, keep := range []string{`"Current State"`, `"Errors & Corrections"`} {
					if !strings.Contains(r, keep) {
						t.Errorf("CRITICAL reminder does not say to keep %s", keep)
					}
				}
			}
			var listed []string
			for _, line := range strings.Split(r, "\n") {
				if h, ok := strings.CutPrefix(line, "- \""); ok {
					listed = append(listed, h[:strings.Index(h, "\"")])
				}
			}
			if strings.Join(listed, "|") != strings.Join(tt.sections, "|") {
				t.Errorf("oversized sections listed %q, want %q", listed, tt.sections)
			}
			if tt.sections == nil && !tt.critical && r != "" {
				t.Errorf("reminder for a document within budget: %q", r)
			}
			if p := memory.BuildPrompt("", tt.notes, "P"); !strings.HasSuffix(p, r) {
				t.Error("BuildPrompt does not end with the reminders")
			}
		})
	}
}

// The reference tells the fork to leave out the system prompt, instruction
// files and earlier summaries, and not to duplicate instruction files; the
// prompt also says how to report that nothing changed.
func TestDefaultPromptLeavesOutGivenContext(t *testing.T) {
	for _, want := range []string{"system prompt", "CLAUDE.md", "earlier summaries", "Do not copy instruction files", "make no Edit call"} {
		if !strings.Contains(memory.DefaultPrompt, want) {
			t.Errorf("DefaultPrompt lacks %q", want)
		}
	}
}
