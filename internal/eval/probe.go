package eval

import (
	"fmt"

	"github.com/recallhq/recall/internal/eval/sessiongen"
)

// CheckProbe judges a recall, decision or continuation probe against a
// context's text by normalized match, as the probe contract says
// (sessiongen.Probe): every Expect part, then for a decision at least one
// Why, for a continuation every Next part, and no Superseded answer after
// the last mention of Expect[0]. An artifact probe is scored by
// CheckArtifacts instead; CheckProbe reports it as failed with a reason.
func CheckProbe(p *sessiongen.Probe, text string) Verdict {
	return checkProbe(p, prepareText(text))
}

func checkProbe(p *sessiongen.Probe, t scoredText) Verdict {
	switch p.Kind {
	case sessiongen.ProbeRecall, sessiongen.ProbeDecision, sessiongen.ProbeContinuation:
	case sessiongen.ProbeArtifact:
		return Verdict{Why: "artifact probes are scored against the transcript's tool calls (CheckArtifacts)"}
	default:
		return Verdict{Why: fmt.Sprintf("unknown probe kind %q", p.Kind)}
	}
	if len(p.Expect) == 0 {
		return Verdict{Why: "the probe expects nothing"}
	}
	last := -1
	for i, e := range p.Expect {
		_, l := t.find(e)
		if l < 0 {
			return Verdict{Why: "missing: " + e}
		}
		if i == 0 {
			last = l
		}
	}
	for _, n := range p.Next {
		if _, l := t.find(n); l < 0 {
			return Verdict{Why: "missing the next step: " + n}
		}
	}
	if len(p.Why) > 0 && !anyFound(t, p.Why) {
		return Verdict{Why: "missing every reason: " + p.Why[0]}
	}
	for _, s := range p.Superseded {
		if _, l := t.find(s); l > last {
			return Verdict{Why: "the replaced answer is the latest mention: " + s}
		}
	}
	return Verdict{Pass: true}
}

func anyFound(t scoredText, answers []string) bool {
	for _, a := range answers {
		if first, _ := t.find(a); first >= 0 {
			return true
		}
	}
	return false
}
