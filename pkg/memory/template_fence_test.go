package memory

import (
	"errors"
	"testing"
)

func TestParseHeadersInCodeAreBody(t *testing.T) {
	notes := "# Session Title\n_t_\nx\n\n# Workflow\n_w_\n```sh\n# build first\nmake\n```\n~~~~\n# still code\n~~~\n# not yet closed\n~~~~\n    # indented\n# Worklog\n_l_\n"
	_, secs := Parse(notes)
	if len(secs) != 3 {
		t.Fatalf("got %d sections, want 3: %+v", len(secs), secs)
	}
	if secs[2].Header != "Worklog" {
		t.Fatalf("third header %q", secs[2].Header)
	}
	for _, tc := range []struct {
		name, before, after string
		wantErr             bool
	}{
		{"shell comment in a fence", "# A\n_a_\n", "# A\n_a_\n```\n# comment\n```\n", false},
		{"tilde fence", "# A\n_a_\n", "# A\n_a_\n~~~bash\n# comment\n~~~\n", false},
		{"unclosed fence runs to the end", "# A\n_a_\n", "# A\n_a_\n```\n# comment\n", false},
		{"a header after the fence closes", "# A\n_a_\n", "# A\n_a_\n```\nx\n```\n# B\n", true},
		{"inline backticks are no fence", "# A\n_a_\n", "# A\n_a_\n```go` x\n# B\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckStructure(tc.before, tc.after)
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrStructure)) {
				t.Fatalf("CheckStructure: %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
