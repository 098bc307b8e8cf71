package ltmeval

import (
	"sort"
	"strings"

	"github.com/recallhq/recall/internal/eval/sessiongen"
)

// history is what the measure knows of one user's sessions so far: the
// generator's facts, not what the memory made of them.
type history struct {
	corpus     map[string]bool     // every word of every message (eval.Normalize'd)
	current    map[string][]string // a preference's question → its latest answer
	superseded map[string]string   // answers a later session replaced → their question
}

func newHistory() *history {
	return &history{corpus: map[string]bool{}, current: map[string][]string{}, superseded: map[string]string{}}
}

// learn records a session's facts: a preference answered again with
// another value supersedes the earlier answer, and a knowledge update's
// superseded answers are superseded; a value said again later is current
// again.
func (h *history) learn(s *sessiongen.Session) {
	for _, fa := range s.Facts {
		switch {
		case fa.Category == sessiongen.CatKnowledgeUpdate:
			for _, v := range fa.Superseded {
				h.superseded[v] = fa.Question
			}
		case fa.Kind == "preference" && fa.Question != manyValued:
			for _, old := range h.current[fa.Question] {
				if !containsFold(fa.Expect, old) && distinctive(old) {
					h.superseded[old] = fa.Question
				}
			}
			h.current[fa.Question] = fa.Expect
		}
	}
	for _, vs := range h.current {
		for _, v := range vs {
			delete(h.superseded, v) // said again later: current
		}
	}
}

// supersededValues are the superseded values, sorted.
func (h *history) supersededValues() []string {
	out := make([]string, 0, len(h.superseded))
	for v := range h.superseded {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// currentValues are the preferences' latest distinctive values, sorted.
func (h *history) currentValues() []string {
	var out []string
	for _, vs := range h.current {
		for _, v := range vs {
			if distinctive(v) {
				out = append(out, v)
			}
		}
	}
	sort.Strings(out)
	return out
}

// manyValued is the one preference question of the families whose
// answers add up instead of replacing each other: every generated file is
// never to be edited by hand.
const manyValued = "Which file must never be edited by hand?"

// distinctive reports whether a value is more than a word (a path, a
// handle, a prefix, a number): a bare word such as a branch prefix also
// occurs inside other values (internal/gen/heron.pb.go), so it cannot be
// told stated or not.
func distinctive(v string) bool { return strings.ContainsAny(v, "/@_.0123456789") }

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
