package llm_test

import (
	"fmt"
	"strings"
	"testing"
)

// The examples below are written by hand from how people and tools say
// things, not taken from any eval family.

// A standing instruction said in passing — the second half of a sentence
// about something else, a clause after a dash, a preference inside a long
// first request — reaches the Task specification; questions and plain
// narration do not.
func TestOfflineKeepsInstructionsSaidInPassing(t *testing.T) {
	pad := strings.Repeat("The parser reads the header row first and then streams the body in chunks of lines. ", 8)
	first := "Port the log shipper from the bash script to a small Go binary. " + pad +
		"Whatever you do, never push to the shared staging branch directly. " + pad
	mid := "The retry loop in uploader.go looks odd to me. " + pad +
		"It backs off linearly, which is probably fine for now, and by the way always use tabs in the Makefile. " + pad +
		"Could you also check whether the queue is ever drained? " +
		"The docs live in the wiki — I'd rather you kept design notes in docs/adr instead."
	s := new(session).user(first).say("Looking at the script.").user(mid).say("I'll look at the retry loop.")
	spec := section(notesOf(t, s), "Task specification")
	for _, want := range []string{
		"- Standing: always use tabs in the Makefile",
		"- Standing: I'd rather you kept design notes in docs/adr instead",
		"- Standing: Whatever you do, never push to the shared staging branch directly",
	} {
		if !strings.Contains(spec, want) {
			t.Errorf("task specification lacks %q:\n%s", want, spec)
		}
	}
	for _, not := range []string{"drained", "backs off linearly", "streams the body"} {
		if strings.Contains(spec[strings.Index(spec, "- Standing"):], not) {
			t.Errorf("task specification lists %q as an instruction:\n%s", not, spec)
		}
	}
}

// A proposal the user accepts with a bare affirmative is noted as
// confirmed, with its reason; a refusal and a question are not.
func TestOfflineKeepsConfirmedProposals(t *testing.T) {
	proposal := "Two ways to stop the double sends: dedupe in the consumer, or give every message an idempotency key. " +
		"I suggest the idempotency key, stored for 24 hours, because the consumer restarts and would forget what it saw. Shall I go ahead?"
	for _, tt := range []struct {
		reply string
		want  bool
	}{
		{"yes", true},
		{"Yep, go ahead.", true},
		{"sounds good 👍", true},
		{"ok, but keep it for 48 hours", true},
		{"no, dedupe in the consumer", false},
		{"Wait, what does the consumer do on restart?", false},
	} {
		t.Run(tt.reply, func(t *testing.T) {
			s := new(session).user("Customers get every email twice since Monday.").say(proposal).user(tt.reply).say("On it.")
			spec := section(notesOf(t, s), "Task specification")
			got := strings.Contains(spec, "- Confirmed: ") && strings.Contains(spec, "idempotency key, stored for 24 hours, because the consumer restarts")
			if got != tt.want {
				t.Errorf("confirmed = %v, want %v:\n%s", got, tt.want, spec)
			}
		})
	}
}

// A failure's line holds the line that says what failed, wherever the tool
// prints it: a traceback's last line, a compiler diagnostic after progress
// lines, npm's ERR! lines, pytest's summary.
func TestOfflineErrorTextFromCommonTools(t *testing.T) {
	progress := strings.Repeat("> Task :app:processDebugResources UP-TO-DATE\n", 30)
	for _, tt := range []struct{ name, cmd, out, want string }{
		{"python traceback", "python etl.py", "Exit code 1\nTraceback (most recent call last):\n  File \"etl.py\", line 88, in <module>\n    main()\n  File \"etl.py\", line 41, in main\n    row[\"customer_id\"]\n" + strings.Repeat("    frame detail line that goes on\n", 12) + "KeyError: 'customer_id'", "KeyError: 'customer_id'"},
		{"kotlin", "./gradlew assembleDebug", "Exit code 1\n" + progress + "e: file:///src/app/src/main/java/com/ex/Main.kt:12:5 Unresolved reference: bindView\n\nFAILURE: Build failed with an exception.", "Unresolved reference: bindView"},
		{"go", "go build ./...", "Exit code 1\n# example.com/shipper/internal/upload\n" + strings.Repeat("# progress\n", 20) + "internal/upload/retry.go:31:2: declared and not used: attempt", "retry.go:31:2: declared and not used: attempt"},
		{"npm", "npm ci", "Exit code 1\n" + strings.Repeat("npm http fetch GET 200 https://registry/x 12ms\n", 25) + "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree", "ERESOLVE unable to resolve dependency tree"},
		{"pytest", "pytest -q", "Exit code 1\n" + strings.Repeat(".", 60) + "F\n" + strings.Repeat("noise line of captured output here\n", 20) + "FAILED tests/test_join.py::test_left_join - AssertionError: assert 41 == 42\n1 failed, 60 passed in 3.20s", "FAILED tests/test_join.py::test_left_join - AssertionError: assert 41 == 42"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := new(session).user("Build it.").bash(tt.cmd, tt.out, true).say("Looking.")
			if errs := section(notesOf(t, s), "Errors & Corrections"); !strings.Contains(errs, tt.want) {
				t.Errorf("errors lack %q:\n%s", tt.want, errs)
			}
		})
	}
}

// A result that only a long output's last lines state — a summary among
// other summary lines, behind dot leaders — is a key result; a short
// output's is left to the Workflow.
func TestOfflineKeepsEndOfOutputResults(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&b, "running (0m%02ds), 10/10 VUs, %d complete and 0 interrupted iterations\n", i, i*7)
	}
	b.WriteString("     checks.........................: 100.00% ✓ 1200 ✗ 0\n")
	b.WriteString("     http_req_duration..............: avg=88ms min=12ms med=80ms max=610ms p(90)=150ms p(95)=212ms\n")
	b.WriteString("     http_req_failed................: 0.00%  ✓ 0 ✗ 1200\n")
	b.WriteString("     http_reqs......................: 1200   39.8/s\n")
	b.WriteString("     iterations.....................: 1200   39.8/s\n")
	b.WriteString("     vus............................: 10     min=10 max=10\n")
	s := new(session).user("Run the load test.").bash("k6 run load/checkout.js", b.String(), false).say("Done.").
		bash("wc -l data.csv", "1204 data.csv", false).say("Counted.")
	notes := notesOf(t, s)
	if res := section(notes, "Key results"); !strings.Contains(res, "p(95)=212ms") || strings.Contains(res, "wc -l") {
		t.Errorf("key results:\n%s", res)
	}
}
