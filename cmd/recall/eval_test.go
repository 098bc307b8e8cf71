package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/eval"
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
