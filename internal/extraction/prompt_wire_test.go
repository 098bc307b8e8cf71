package extraction_test

import (
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/llm/llmtest"
)

// The extraction prompt that reaches the model, through each real SDK, tells
// it to keep what is said in passing (issue 45, point 2): preferences and
// constraints inside longer messages, decisions confirmed with a bare yes,
// exact error texts, results at the end of a tool's output.
func TestPromptOnTheWireKeepsWhatIsSaidInPassing(t *testing.T) {
	rules := []string{
		"Nothing said in passing may be lost",
		"every preference, standing instruction and constraint the user stated",
		"inside a longer message about something else",
		"a proposal the user accepted with a bare",
		"Keep the exact text of every error message",
		"results that appear only at the end of a tool",
	}
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			s, _, err := run(t, a, input(), llmtest.Reply{Text: "The notes are up to date."})
			if err != nil {
				t.Fatal(err)
			}
			body := string(s.Requests()[0])
			for _, r := range rules {
				if !strings.Contains(body, r) {
					t.Errorf("the request body lacks %q", r)
				}
			}
		})
	}
}
