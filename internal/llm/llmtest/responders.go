package llmtest

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// WorklogDescription is the italic description of the default template's
// Worklog section, the anchor AppendWorklog edits after.
const WorklogDescription = "_Step by step, what was attempted, done? Very terse summary for each step_\n"

var notesPathRE = regexp.MustCompile(`recall://[A-Za-z0-9._~:@!$&'()*+,;=%-]+/[A-Za-z0-9._~:@!$&'()*+,;=%-]+/memory\.md`)

// AppendWorklog is a Responder for load tests: it answers every extraction
// request with one valid Edit that inserts "- step <call>" below the Worklog
// description of the default template, on the notes path named in the
// request. A request naming no notes path gets a text-only reply.
func AppendWorklog(call int, body []byte) Reply {
	path := notesPathRE.Find(body)
	if path == nil {
		return Reply{Text: "no notes path in the request"}
	}
	input, _ := json.Marshal(map[string]string{
		"file_path":  string(path),
		"old_string": WorklogDescription,
		"new_string": WorklogDescription + fmt.Sprintf("- step %d\n", call),
	})
	return Reply{
		ToolCalls: []ToolCall{{Name: "Edit", Input: string(input)}},
		Usage:     Usage{Input: int64(len(body) / 4), Output: int64(len(input) / 4)},
	}
}
