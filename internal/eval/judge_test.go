package eval

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/llmtest"
	"github.com/recallhq/recall/pkg/events"
)

// The judge talks to the real SDK clients against HTTP-level fakes of both
// APIs: one call per context carrying the context and every question, and
// a JSON verdict per fact back.
func TestJudgeGrade(t *testing.T) {
	facts := []sessiongen.Fact{
		{ID: "s/01-path", Category: sessiongen.CatExtraction, Question: "Which file holds ValidateQuill?", Expect: []string{"internal/importer/quill_check.go"}},
		{ID: "s/02-value", Category: sessiongen.CatKnowledgeUpdate, Question: "Which port?", Expect: []string{"9321"}, Superseded: []string{"4417"}},
		{ID: "s/03-never_said", Category: sessiongen.CatAbstention, Question: "Which database?", Invented: []string{"postgres"}},
	}
	c := &Context{Served: true, Summary: "# Files\n- internal/importer/quill_check.go", Kept: []events.Message{
		{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "Actually, use port 9321."}}},
	}}
	for _, api := range []string{llmtest.Anthropic, llmtest.OpenAI} {
		t.Run(api, func(t *testing.T) {
			answer := llmtest.Reply{Text: "Here are the verdicts:\n```json\n{\"s/01-path\": true, \"s/02-value\": false, \"s/03-never_said\": true}\n```"}
			var srv *llmtest.Server
			var p llm.Provider
			if api == llmtest.Anthropic {
				srv = llmtest.NewAnthropic(t, answer)
				p = llm.NewAnthropic(llm.ClientOptions{APIKey: "test", BaseURL: srv.BaseURL()})
			} else {
				srv = llmtest.NewOpenAI(t, answer)
				p = llm.NewOpenAI(llm.ClientOptions{APIKey: "test", BaseURL: srv.BaseURL(), Model: "judge"})
			}
			j := &Judge{Provider: p}
			got, err := j.Grade(context.Background(), facts, c)
			if err != nil {
				t.Fatal(err)
			}
			if !got["s/01-path"] || got["s/02-value"] || !got["s/03-never_said"] {
				t.Fatalf("verdicts %v", got)
			}
			if srv.Calls() != 1 {
				t.Fatalf("%d calls, want 1", srv.Calls())
			}
			body := string(srv.Requests()[0])
			for _, want := range []string{"quill_check.go", "use port 9321", "Which file holds ValidateQuill?", "4417", "must say it does not know"} {
				if !strings.Contains(body, want) {
					t.Errorf("the judge's request lacks %q", want)
				}
			}
		})
	}
}

func TestJudgeMalformedAnswer(t *testing.T) {
	srv := llmtest.NewAnthropic(t, llmtest.Reply{Text: "I think the agent knows most of it."})
	j := &Judge{Provider: llm.NewAnthropic(llm.ClientOptions{APIKey: "test", BaseURL: srv.BaseURL()})}
	_, err := j.Grade(context.Background(), []sessiongen.Fact{{ID: "x", Question: "?"}}, &Context{})
	if !errors.Is(err, ErrJudgeAnswer) {
		t.Fatalf("err = %v, want ErrJudgeAnswer", err)
	}
}

// A judge that fails on one context is recorded for that context and the
// run goes on; its scores count the contexts it judged.
func TestRunJudgeFailureIsRecorded(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.SetResponder(func(call int, body []byte) llmtest.Reply {
		if call == 0 {
			return llmtest.Reply{Text: "no verdicts today"}
		}
		return llmtest.Reply{Text: "{}"}
	})
	j := &Judge{Provider: llm.NewAnthropic(llm.ClientOptions{APIKey: "test", BaseURL: srv.BaseURL()})}
	rep, err := Run(context.Background(), Options{Seed: 2, Sessions: 1, Lengths: []int64{50000}, Judge: j})
	if err != nil {
		t.Fatal(err)
	}
	errs, judged := 0, 0
	for _, r := range rep.Results {
		errs += r.Judge.Errors
		judged += r.Judge.Overall.Total
	}
	if errs != 1 || judged != rep.Facts*(len(rep.Results)-1) {
		t.Fatalf("%d judge errors, %d facts judged; want 1 and %d", errs, judged, rep.Facts*(len(rep.Results)-1))
	}
	if rep.Sessions[0].Systems[SysTruncation].JudgeError == "" {
		t.Fatal("the failed judge call is not recorded on its context")
	}
}
