package bench

import (
	"strings"
	"testing"
	"time"
)

// testLoad is one session "s" of two rounds whose records have sequences
// 10, 20, 30…
func testLoad() roundLoad {
	seqs := make([]uint64, 2*extractMessages)
	for i := range seqs {
		seqs[i] = uint64(10 * (i + 1))
	}
	return roundLoad{seqs: map[string][]uint64{"s": seqs}, rounds: 2}
}

func TestExtractionRoundLoad(t *testing.T) {
	l := testLoad()
	for round := range l.rounds {
		reqs := l.requests("s", round)
		if len(reqs) != 2 {
			t.Fatalf("round %d: %d requests, want 2", round, len(reqs))
		}
		if want := uint64(10 * (round + 1) * extractMessages); reqs[0].UpToSeq != want || reqs[1].UpToSeq != want-10 {
			t.Errorf("round %d: requests up to %d and %d, want %d and %d", round, reqs[0].UpToSeq, reqs[1].UpToSeq, want, want-10)
		}
		for i, wantLate := range []bool{false, true} {
			r, late, ok := l.roundOf("s", reqs[i].UpToSeq)
			if !ok || r != round || late != wantLate {
				t.Errorf("roundOf(%d) = %d, %v, %v; want %d, %v, true", reqs[i].UpToSeq, r, late, ok, round, wantLate)
			}
		}
	}
	for _, seq := range []uint64{10, 55, 1000} {
		if _, _, ok := l.roundOf("s", seq); ok {
			t.Errorf("roundOf(%d) is ok; no request names it", seq)
		}
	}
	if got := l.last("s"); got != uint64(10*2*extractMessages) {
		t.Errorf("last = %d, want %d", got, 10*2*extractMessages)
	}
}

func TestExtractionJudgeOutcomes(t *testing.T) {
	l := testLoad()
	r0, r1 := l.requests("s", 0), l.requests("s", 1)
	at := time.Now()
	done := func(req, covered uint64, skipped bool) completion {
		at = at.Add(time.Second)
		return completion{session: "s", upTo: req, covered: covered, skipped: skipped, worker: "w", at: at}
	}
	end0, late0, end1, late1 := r0[0].UpToSeq, r0[1].UpToSeq, r1[0].UpToSeq, r1[1].UpToSeq
	tests := []struct {
		name      string
		outs      []completion
		wantExtr  int
		wantProbs []string // substrings, one per problem
	}{
		{"in order", []completion{done(end0, end0, false), done(late0, end0, true), done(end1, end1, false), done(late1, end1, true)}, 2, nil},
		{"late first", []completion{done(late0, late0, false), done(end0, end0, false), done(end1, end1, false), done(late1, end1, true)}, 3,
			[]string{"late request up to 70 ran a model call"}},
		{"coverage back", []completion{done(end0, end0, false), done(end1, end1, false), done(late1, end0, true)}, 2,
			[]string{"coverage went back from 160 to 80"}},
		{"not covered", []completion{done(end0, end0, false), done(late0, end0, true)}, 1, []string{"covered 80, want 160"}},
		{"failed", []completion{done(end0, end0, false), {session: "s", upTo: end1, failed: "boom"}}, 1,
			[]string{"covered 80, want 160", "up to 160 failed: boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var step ExtractionStep
			_, problems := judgeOutcomes(&step, tt.outs, l, []string{"s"})
			if step.Extractions != tt.wantExtr {
				t.Errorf("extractions = %d, want %d", step.Extractions, tt.wantExtr)
			}
			if len(problems) != len(tt.wantProbs) || step.OrderingProblems != len(problems) {
				t.Fatalf("problems = %q (counted %d), want %d", problems, step.OrderingProblems, len(tt.wantProbs))
			}
			for i, want := range tt.wantProbs {
				if !strings.Contains(problems[i], want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, problems[i], want)
				}
			}
		})
	}
}
