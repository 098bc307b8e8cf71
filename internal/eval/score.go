package eval

import (
	"strings"

	"github.com/recallhq/recall/internal/eval/sessiongen"
)

// Verdict is the offline scorer's judgement of one fact against one
// context.
type Verdict struct {
	Pass bool   `json:"pass"`
	Why  string `json:"why,omitempty"` // why it failed
}

// Normalize lower-cases s and turns every run of characters that are not
// letters or digits into one space, with a space at each end, so that
// "`internal/x.go`" matches "internal/x.go" and matches are whole words
// (sessiongen.Normalize, the rule the generated facts are written to).
func Normalize(s string) string { return sessiongen.Normalize(s) }

// scoredText is a context prepared for matching.
type scoredText struct {
	norm      string // Normalize(text)
	collapsed string // text with whitespace runs collapsed (verbatim matches)
}

func prepareText(text string) scoredText {
	return scoredText{norm: Normalize(text), collapsed: strings.Join(strings.Fields(text), " ")}
}

// find returns the first and last index of the normalized answer, or -1.
func (t scoredText) find(answer string) (first, last int) {
	n := Normalize(answer)
	if strings.TrimSpace(n) == "" {
		return -1, -1
	}
	return strings.Index(t.norm, n), strings.LastIndex(t.norm, n)
}

// Check judges fact against a context's text by normalized match:
//
//   - every expected part must occur (latest_request: verbatim, whitespace
//     collapsed, case kept);
//   - knowledge_update: a superseded answer may occur only before the last
//     occurrence of the expected one (the newest mention wins);
//   - temporal: the anchor (After) must occur before the last occurrence of
//     the expected answer;
//   - abstention: no invented answer may occur.
func Check(f *sessiongen.Fact, text string) Verdict {
	return scoreText(f, prepareText(text))
}

func scoreText(f *sessiongen.Fact, t scoredText) Verdict {
	for _, inv := range f.Invented {
		if first, _ := t.find(inv); first >= 0 {
			return Verdict{Why: "states an answer never given: " + inv}
		}
	}
	last := -1
	for i, e := range f.Expect {
		if f.Verbatim {
			if !strings.Contains(t.collapsed, strings.Join(strings.Fields(e), " ")) {
				return Verdict{Why: "the request is not there verbatim"}
			}
			continue
		}
		_, l := t.find(e)
		if l < 0 {
			return Verdict{Why: "missing: " + e}
		}
		if i == 0 {
			last = l
		}
	}
	for _, s := range f.Superseded {
		if _, l := t.find(s); l > last {
			return Verdict{Why: "the superseded answer is the latest mention: " + s}
		}
	}
	if f.After != "" {
		first, _ := t.find(f.After)
		if first < 0 {
			return Verdict{Why: "missing the earlier event: " + f.After}
		}
		if first > last {
			return Verdict{Why: "the order is lost: " + f.After + " is not before the answer"}
		}
	}
	return Verdict{Pass: true}
}
