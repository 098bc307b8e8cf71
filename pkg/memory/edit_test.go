package memory_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/memory"
)

const small = "# Title\n_the title_\nold title\n\n# State\n_what now_\nstep one\nstep one\n\n# Log\n_steps_\n"

func TestApplyEdit(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     string // document after, when no error
		err      error
	}{
		{"replace body", "old title", "new title", strings.Replace(small, "old title", "new title", 1), nil},
		{"fill empty section", "_steps_\n", "_steps_\n- did it\n", small + "- did it\n", nil},
		{"header kept in context", "# Title\n_the title_\nold title", "# Title\n_the title_\nbetter", strings.Replace(small, "old title", "better", 1), nil},
		{"subheader allowed", "old title\n", "old title\n## detail\n", strings.Replace(small, "old title\n", "old title\n## detail\n", 1), nil},
		{"not found", "missing", "x", "", memory.ErrNotFound},
		{"whitespace matters", "old  title", "x", "", memory.ErrNotFound},
		{"ambiguous", "step one", "x", "", memory.ErrAmbiguous},
		{"identical", "old title", "old title", "", memory.ErrInvalidEdit},
		{"empty old", "", "x", "", memory.ErrInvalidEdit},
		{"header changed", "# State", "# Status", "", memory.ErrStructure},
		{"header removed", "# State\n", "", "", memory.ErrStructure},
		{"header demoted", "# Log", "## Log", "", memory.ErrStructure},
		{"description changed", "_what now_", "_what is next_", "", memory.ErrStructure},
		{"description removed", "_what now_\n", "", "", memory.ErrStructure},
		{"description made plain", "_steps_", "steps", "", memory.ErrStructure},
		{"section added", "step one\n\n#", "step one\n\n# Extra\n_more_\n\n#", "", memory.ErrStructure},
		{"section added at end", "_steps_\n", "_steps_\n# Extra\n", "", memory.ErrStructure},
		{"sections swapped", "# Title\n_the title_\nold title\n\n# State\n_what now_\n", "# State\n_what now_\nold title\n\n# Title\n_the title_\n", "", memory.ErrStructure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := memory.ApplyEdit(small, memory.Edit{OldString: tt.old, NewString: tt.new})
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				if got != "" {
					t.Errorf("document returned on error: %q", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestApplyToolCall(t *testing.T) {
	const path = "recall://t/s/memory.md"
	deny := "only Edit on recall://t/s/memory.md is allowed"
	tests := []struct {
		name, tool, input string
		result            string // exact tool result text, when set
		err               error
		changed           bool
	}{
		{"ok", "Edit", `{"file_path":"` + path + `","old_string":"old title","new_string":"t2"}`, "The file " + path + " has been updated successfully.", nil, true},
		{"other tool", "Bash", `{"command":"rm -rf /"}`, deny, memory.ErrToolDenied, false},
		{"other tool, malformed input", "Write", `not json`, deny, memory.ErrToolDenied, false},
		{"other path", "Edit", `{"file_path":"/etc/passwd","old_string":"old title","new_string":"t2"}`, deny, memory.ErrToolDenied, false},
		{"other path, missing field", "Edit", `{"file_path":"/etc/passwd","old_string":"x"}`, deny, memory.ErrToolDenied, false},
		{"lowercase tool name", "edit", `{"file_path":"` + path + `","old_string":"old title","new_string":"t2"}`, deny, memory.ErrToolDenied, false},
		{"malformed json", "Edit", `{"file_path":`, "", memory.ErrMalformedInput, false},
		{"missing new_string", "Edit", `{"file_path":"` + path + `","old_string":"old title"}`, "", memory.ErrMalformedInput, false},
		{"number field", "Edit", `{"file_path":"` + path + `","old_string":1,"new_string":"x"}`, "", memory.ErrMalformedInput, false},
		{"header edit", "Edit", `{"file_path":"` + path + `","old_string":"# Log","new_string":"# Logs"}`, "", memory.ErrStructure, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, res, err := memory.ApplyToolCall(small, path, tt.tool, []byte(tt.input))
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if tt.result != "" && res != tt.result {
				t.Errorf("result = %q, want %q", res, tt.result)
			}
			if err != nil && res != err.Error() {
				t.Errorf("result %q is not the error text %q", res, err.Error())
			}
			if (out != small) != tt.changed {
				t.Errorf("document changed = %v, want %v", out != small, tt.changed)
			}
			if errors.Is(tt.err, memory.ErrMalformedInput) && !errors.Is(err, memory.ErrInvalidEdit) {
				t.Error("ErrMalformedInput does not match ErrInvalidEdit")
			}
		})
	}
}

func TestCheckStructureTemplateIdentity(t *testing.T) {
	if err := memory.CheckStructure(memory.DefaultTemplate, memory.DefaultTemplate+"- note\n"); err != nil {
		t.Fatalf("appending body text: %v", err)
	}
}
