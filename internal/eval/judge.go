package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
)

// Judge grades contexts with a model: one call per context, all of the
// session's questions at once. Its scores are reported next to the offline
// ones, never mixed with them.
type Judge struct {
	Provider llm.Provider
}

// ErrJudgeAnswer is wrapped when the judge's answer is not the JSON object
// it was asked for.
var ErrJudgeAnswer = errors.New("judge answer is not a JSON object of verdicts")

const judgeSystem = "You grade what a coding agent still knows after its conversation was compacted. " +
	"You see only the compacted context the agent continues with, and questions with their correct answers. " +
	"Grade strictly from the context: outside knowledge does not count."

// judgeQuestion is one question as the judge sees it.
type judgeQuestion struct {
	ID       string   `json:"id"`
	Question string   `json:"question"`
	Correct  string   `json:"correct_answer"`
	Outdated []string `json:"outdated_answers,omitempty"`
	Verbatim bool     `json:"must_be_verbatim,omitempty"`
}

// Name describes the judge's model.
func (j *Judge) Name() string { return j.Provider.Name() + "/" + j.Provider.Model() }

// Grade asks the judge which facts the context lets the agent answer
// correctly and returns a verdict per fact id (missing ids are false).
func (j *Judge) Grade(ctx context.Context, facts []sessiongen.Fact, c *Context) (map[string]bool, error) {
	qs := make([]judgeQuestion, len(facts))
	for i, f := range facts {
		q := judgeQuestion{ID: f.ID, Question: f.Question, Correct: strings.Join(f.Expect, "; "), Outdated: f.Superseded, Verbatim: f.Verbatim}
		if f.Category == sessiongen.CatAbstention {
			q.Correct = "not stated anywhere in the context: the agent must say it does not know (any specific answer is wrong)"
		}
		if f.After != "" {
			q.Correct += " (and the context must show it came after " + f.After + ")"
		}
		qs[i] = q
	}
	qj, _ := json.MarshalIndent(qs, "", "  ")
	text := c.Text()
	if !c.Served {
		text = "(empty: the compaction produced no context)"
	}
	prompt := "<context>\n" + text + "\n</context>\n\nQuestions:\n" + string(qj) +
		"\n\nFor each question decide whether an agent reading only the context above would answer it correctly: the correct answer is stated there" +
		" (for a corrected instruction, the correction is the latest word and the outdated answer is not presented as current;" +
		" verbatim answers must appear word for word). Reply with only a JSON object mapping every id to true or false."
	resp, err := j.Provider.Complete(ctx, llm.Request{
		System:     judgeSystem,
		Messages:   []events.Message{{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: prompt}}}},
		MaxTokens:  2048,
		CacheAfter: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("calling the judge: %w", err)
	}
	return parseVerdicts(resp.Text)
}

// parseVerdicts reads the JSON object in s (code fences and prose around it
// are ignored).
func parseVerdicts(s string) (map[string]bool, error) {
	i, k := strings.Index(s, "{"), strings.LastIndex(s, "}")
	if i < 0 || k < i {
		return nil, fmt.Errorf("%w: %q", ErrJudgeAnswer, clip(s, 200))
	}
	var out map[string]bool
	if err := json.Unmarshal([]byte(s[i:k+1]), &out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrJudgeAnswer, err)
	}
	return out, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
