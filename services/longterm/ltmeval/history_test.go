package ltmeval

import (
	"slices"
	"testing"

	"github.com/recallhq/recall/internal/eval/sessiongen"
)

// TestHistory: a preference answered again with another value supersedes
// the earlier one, an answer said again is current again, a knowledge
// update's replaced answers are superseded, and the answers of the
// many-valued question and bare words are never counted.
func TestHistory(t *testing.T) {
	pref := func(q string, v ...string) sessiongen.Fact {
		return sessiongen.Fact{Category: sessiongen.CatExtraction, Kind: "preference", Question: q, Expect: v}
	}
	sess := func(f ...sessiongen.Fact) *sessiongen.Session { return &sessiongen.Session{Facts: f} }
	h := newHistory()
	h.learn(sess(pref("Where do fixtures go?", "testdata/a"), pref("How are branches named?", "alder"), pref(manyValued, "gen/a.pb.go")))
	h.learn(sess(pref("Where do fixtures go?", "testdata/b"), pref("How are branches named?", "basalt"), pref(manyValued, "gen/b.pb.go"),
		sessiongen.Fact{Category: sessiongen.CatKnowledgeUpdate, Question: "Which tag?", Expect: []string{"v1.1"}, Superseded: []string{"v1.0"}}))
	if got := h.supersededValues(); !slices.Equal(got, []string{"testdata/a", "v1.0"}) {
		t.Fatalf("superseded %q, want [testdata/a v1.0]", got)
	}
	if got := h.currentValues(); !slices.Equal(got, []string{"testdata/b"}) {
		t.Fatalf("current %q, want [testdata/b]", got)
	}
	h.learn(sess(pref("Where do fixtures go?", "testdata/a")))
	if got := h.supersededValues(); !slices.Equal(got, []string{"testdata/b", "v1.0"}) {
		t.Fatalf("after testdata/a again: superseded %q, want [testdata/b v1.0]", got)
	}
}
