package memory_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/memory"
)

// FuzzApplyEdit checks the invariants of edit application on any document and
// edit: an accepted edit keeps the structure and changes exactly one
// occurrence; a rejected edit wraps one of the sentinels.
func FuzzApplyEdit(f *testing.F) {
	f.Add(memory.DefaultTemplate, "_Step by step, what was attempted, done? Very terse summary for each step_\n", "_Step by step, what was attempted, done? Very terse summary for each step_\n- x\n")
	f.Add(small, "# Log", "# Logs")
	f.Add(small, "step one", "x")
	f.Add("", "", "")
	f.Add("# A\n_d_", "_d_", "_d_\n# B")
	f.Fuzz(func(t *testing.T, doc, old, new string) {
		out, err := memory.ApplyEdit(doc, memory.Edit{OldString: old, NewString: new})
		if err != nil {
			if out != "" {
				t.Fatal("document returned with an error")
			}
			for _, s := range []error{memory.ErrInvalidEdit, memory.ErrNotFound, memory.ErrAmbiguous, memory.ErrStructure} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		if strings.Count(doc, old) != 1 || old == new {
			t.Fatalf("accepted an edit whose old_string occurs %d times", strings.Count(doc, old))
		}
		if err := memory.CheckStructure(doc, out); err != nil {
			t.Fatalf("accepted an edit that changes the structure: %v", err)
		}
		i := strings.Index(doc, old)
		if out != doc[:i]+new+doc[i+len(old):] {
			t.Fatal("edit result is not the single replacement")
		}
	})
}

// FuzzParse checks that Parse is lossless and that every section it returns
// has a header line.
func FuzzParse(f *testing.F) {
	f.Add(memory.DefaultTemplate)
	f.Add(small)
	f.Add("preamble\n# A")
	f.Add("# A\n_d_\n# B\n_\n")
	f.Add("#A\n# \n#  x\n_x_")
	f.Fuzz(func(t *testing.T, doc string) {
		pre, secs := memory.Parse(doc)
		var b strings.Builder
		b.WriteString(pre)
		for _, s := range secs {
			if strings.Contains(s.Header, "\n") {
				t.Fatalf("header with newline: %q", s.Header)
			}
			if s.Description != "" && !memory.IsDescriptionLine(s.Description) {
				t.Fatalf("description %q is not an italic line", s.Description)
			}
			b.WriteString(s.Text())
		}
		got := b.String()
		// A header on the last line without newline gains one in Text.
		if got != doc && got != doc+"\n" {
			t.Fatalf("Parse is not lossless:\n%q\n%q", doc, got)
		}
		if err := memory.CheckStructure(doc, doc); err != nil {
			t.Fatalf("a document differs from itself: %v", err)
		}
	})
}
