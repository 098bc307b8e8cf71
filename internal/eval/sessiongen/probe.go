package sessiongen

// The probe contract: what a session family provides besides its facts.
//
// A probe is a question an agent must be able to answer from the context it
// continues with after a compaction, of one of four kinds (after Factory's
// probe-based evaluation of compaction on real agent sessions). A family
// writes its probes into Session.Probes while it writes the turns, the way
// it records facts: at the point where the answer has been said or done,
// so At and Compactions say where. Every answer a probe expects must occur
// in the transcript the family wrote (the family's test runs CheckProbes
// on its sessions); none may be text only the probe knows.
//
// How each kind is asked and scored (eval.CheckProbe; all matches are
// Normalize's: case-insensitive, punctuation-blind, whole words):
//
//   - ProbeRecall — a specific detail said once: a value, a name, an error
//     message, a number in a tool's output. Question asks for it; Expect
//     holds its parts, every one of which must occur in the context.
//     Superseded, when set, are earlier answers a correction replaced: each
//     may occur only before the last occurrence of Expect[0] (the newest
//     mention wins).
//
//   - ProbeDecision — something chosen, and why. Expect holds the choice's
//     parts (all must occur: "LRU", "4096"); Why holds the reasons the
//     session gave, of which at least one must occur ("unbounded",
//     "memory"). A decision the session later reversed has the final
//     choice in Expect and the reversed one in Superseded, scored as for
//     recall (the newest mention wins); options merely considered and
//     turned down are not checked ("X over Y" names both).
//
//   - ProbeContinuation — what the agent was doing when the session was
//     compacted and what comes next. Expect holds words that identify the
//     task in progress (all must occur); Next holds words that identify
//     the next step the session made explicit — the user's remaining
//     request, the agent's announced plan, a failing check still to fix —
//     and all of them must occur too. Write one continuation probe per
//     session, about its end (probes about earlier points are recall
//     probes).
//
//   - ProbeArtifact — which files the session changed and how. A family
//     does NOT write these: the eval asks one of every session whose
//     transcript changes a file, and scores it exactly against the
//     transcript's own tool calls (memory.ArtifactsOf: Write, Edit,
//     MultiEdit, NotebookEdit and file-changing shell commands such as mv,
//     rm, cp, touch, sed -i, tee, > redirects, git mv, git rm, patch). So a
//     family that wants its artifacts measured only has to make real
//     file-changing tool calls — w.create, w.edit, w.bash("git mv a b", …),
//     or w.respond(w.tool("MultiEdit", input)) followed by its w.result —
//     with paths as an agent would write them. Each changed file is one
//     point: it passes when its path (as the agent wrote it, or relative
//     to the session's working directory) occurs within eight words of a
//     word saying what happened to it (created or written, edited or
//     modified, deleted or removed, moved or renamed; a moved file's old
//     path must occur too). The probe passes when every file does.
//
// A family also writes facts (Fact): facts are scored per category,
// probes per kind. A new family is a Family constant and its case in
// Generate (sessiongen.go) and a generator in files of its own.
//
// Probes are scored per kind, for Recall and every baseline on the same
// contexts, and never mixed with the fact categories. A probe whose
// answer no context could hold (said only in a compaction summary the
// platform wrote, say) is a defect of the family.

import (
	"fmt"
	"slices"
	"strings"
)

// Probe kinds, in report order.
const (
	ProbeRecall       = "recall"
	ProbeArtifact     = "artifact"
	ProbeContinuation = "continuation"
	ProbeDecision     = "decision"
)

// ProbeKinds lists the probe kinds in report order.
var ProbeKinds = []string{ProbeRecall, ProbeArtifact, ProbeContinuation, ProbeDecision}

// Probe is a question of one kind and how to check that a context can
// answer it (see the probe contract above).
type Probe struct {
	// ID is unique in the session; the family sets it (session id, a
	// number and the kind, like a Fact's).
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Question string `json:"question"`
	// Expect are the parts of the answer (recall), the choice (decision)
	// or the task in progress (continuation): every one must occur.
	Expect []string `json:"expect,omitempty"`
	// Why (decision) are the reasons given: at least one must occur.
	Why []string `json:"why,omitempty"`
	// Next (continuation) identify the next step: every one must occur.
	Next []string `json:"next,omitempty"`
	// Superseded (recall, decision) are answers a correction or a
	// reversal replaced: each may occur only before the last occurrence
	// of Expect[0].
	Superseded []string `json:"superseded,omitempty"`
	// At is the session's size in tokens when the answer was complete,
	// and Compactions the compactions before it.
	At          int64 `json:"at_tokens"`
	Compactions int   `json:"compactions_before"`
}

// CheckProbes is the test a family runs on each session it generates: every
// probe has a known kind other than artifact, an ID unique in the session,
// a question, and answers (Expect, Why, Next, Superseded) that occur in
// the session's transcript by Normalize's match. It returns the first
// violation.
func CheckProbes(s *Session) error {
	transcript := Normalize(string(s.JSONL))
	seen := map[string]bool{}
	for i := range s.Probes {
		p := &s.Probes[i]
		switch {
		case p.Kind == ProbeArtifact:
			return fmt.Errorf("probe %s: artifact probes are the eval's, not a family's", p.ID)
		case p.Kind != ProbeRecall && p.Kind != ProbeDecision && p.Kind != ProbeContinuation:
			return fmt.Errorf("probe %s: unknown kind %q", p.ID, p.Kind)
		case p.ID == "" || seen[p.ID]:
			return fmt.Errorf("probe %d: missing or repeated id %q", i, p.ID)
		case p.Question == "" || len(p.Expect) == 0:
			return fmt.Errorf("probe %s: no question or no expected answer", p.ID)
		case p.Kind == ProbeDecision && len(p.Why) == 0:
			return fmt.Errorf("probe %s: a decision probe needs a reason (Why)", p.ID)
		case p.Kind == ProbeContinuation && len(p.Next) == 0:
			return fmt.Errorf("probe %s: a continuation probe needs a next step (Next)", p.ID)
		}
		seen[p.ID] = true
		for _, a := range slices.Concat(p.Expect, p.Why, p.Next, p.Superseded) {
			if n := Normalize(a); strings.TrimSpace(n) == "" || !strings.Contains(transcript, n) {
				return fmt.Errorf("probe %s: answer %q is not in the transcript", p.ID, a)
			}
		}
	}
	return nil
}
