package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/eval"
	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/internal/llm/llmtest"
)

// TestEvalQuick runs `recall eval --quick --json` in-process: two generated
// sessions through embedded NATS and the four services (offline provider),
// both baselines, offline scoring. Scores are not asserted (they move with
// extraction and compaction); that every system scored every fact is.
func TestEvalQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	t.Setenv("RECALL_LLM_PROVIDER", "offline") // no model system, no judge, whatever keys are set
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var buf bytes.Buffer
	if err := run(ctx, []string{"eval", "--quick", "--json", "--quiet"}, &buf); err != nil {
		t.Fatalf("eval: %v", err)
	}
	var rep eval.Report
	if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
		t.Fatalf("eval output is not one JSON object: %v\n%s", err, buf.String())
	}
	got := []string{rep.Family}
	for _, f := range rep.Families {
		got = append(got, f.Family)
	}
	if !slices.Equal(got, sessiongen.Families) {
		t.Fatalf("families %v, want %v", got, sessiongen.Families)
	}
	for _, r := range append([]*eval.Report{&rep}, rep.Families...) {
		t.Run(r.Family, func(t *testing.T) { checkQuick(t, r) })
	}
}

// checkQuick checks one family's quick report.
func checkQuick(t *testing.T, rep *eval.Report) {
	want := []string{eval.SysTruncation, eval.SysTruncationMatched, eval.SysReference, eval.SysRecallOffline}
	if len(rep.Results) != len(want) || len(rep.Sessions) != 2 || rep.Facts == 0 {
		t.Fatalf("systems %v, %d sessions, %d facts", rep.Systems, len(rep.Sessions), rep.Facts)
	}
	for i, r := range rep.Results {
		if r.System != want[i] || r.Overall.Total != rep.Facts {
			t.Errorf("result %d: system %s scored %d facts, want %s with %d", i, r.System, r.Overall.Total, want[i], rep.Facts)
		}
		t.Logf("%-18s overall %5.1f%%  context mean %d tokens  %v", r.System, r.Overall.Percent, r.ContextTokensMean, r.Outcomes)
	}
	for _, s := range rep.Sessions {
		if rc := s.Systems[eval.SysRecallOffline]; !rc.Served || rc.Tokens == 0 {
			t.Errorf("%s: Recall's compaction %s (%s), %d tokens", s.ID, rc.Outcome, rc.Reason, rc.Tokens)
		}
	}
	// The latest request is kept verbatim by Recall (a compaction invariant).
	if c := rep.Result(eval.SysRecallOffline).Categories["latest_request"]; c.Pass != c.Total {
		t.Errorf("Recall lost the latest request in %d of %d sessions", c.Total-c.Pass, c.Total)
	}
}

// TestEvalWithModel runs the model system and the LLM judge against an
// HTTP-level fake of the OpenAI API: extractions get a valid Edit of the
// Worklog, judge calls a verdict for every question they carry.
func TestEvalWithModel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline twice")
	}
	// Fact IDs start with the session ID, which starts with its family
	// (the planted family's sessions are "eval-…").
	ids := regexp.MustCompile(`(?:eval|` + strings.Join(sessiongen.Families, "|") + `)-\d+-\d+/\d+-[a-z_]+`)
	srv := llmtest.NewOpenAI(t)
	var judged atomic.Int32
	srv.SetResponder(func(call int, body []byte) llmtest.Reply {
		if !bytes.Contains(body, []byte("<context>")) {
			return llmtest.AppendWorklog(call, body)
		}
		judged.Add(1)
		verdicts := map[string]bool{}
		for _, id := range ids.FindAll(body, -1) {
			verdicts[string(id)] = true
		}
		b, _ := json.Marshal(verdicts)
		return llmtest.Reply{Text: string(b)}
	})
	t.Setenv("RECALL_LLM_PROVIDER", "openai")
	t.Setenv("RECALL_LLM_BASE_URL", srv.BaseURL())
	t.Setenv("RECALL_OPENAI_API_KEY", "test")
	t.Setenv("RECALL_LLM_MODEL", "fake-model")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var buf bytes.Buffer
	if err := run(ctx, []string{"eval", "--quick", "--sessions", "1", "--json", "--quiet"}, &buf); err != nil {
		t.Fatalf("eval: %v", err)
	}
	var rep eval.Report
	if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
		t.Fatalf("eval output is not one JSON object: %v\n%s", err, buf.String())
	}
	if len(rep.Families) != len(sessiongen.Families)-1 {
		t.Fatalf("%d more families, want %d", len(rep.Families), len(sessiongen.Families)-1)
	}
	calls := 0
	for _, r := range append([]*eval.Report{&rep}, rep.Families...) {
		checkWithModel(t, r)
		calls += len(r.Results)
	}
	if n := int(judged.Load()); n != calls {
		t.Fatalf("%d judge calls, want one per family and system (%d)", n, calls)
	}
}

// checkWithModel checks one family's report with a model and a judge.
func checkWithModel(t *testing.T, rep *eval.Report) {
	if rep.Model != "openai/fake-model" || rep.Judge != "openai/fake-model" {
		t.Fatalf("model %q, judge %q", rep.Model, rep.Judge)
	}
	r := rep.Result(eval.SysRecallModel)
	if r == nil || r.Overall.Total != rep.Facts || r.Outcomes["session_memory"] != 1 {
		t.Fatalf("recall-model: %+v", r)
	}
	for _, r := range rep.Results {
		if r.Judge == nil || r.Judge.Overall.Pass != rep.Facts {
			t.Errorf("%s: judge scores %+v, want every fact passed", r.System, r.Judge)
		}
	}
}
