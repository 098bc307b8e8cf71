package memory

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// Questions to a past session: the session is serialized into numbered
// passages under a token budget (its memory notes and earlier compaction
// summaries first, then the most recent records that fit), a model answers
// citing passages by number, and the answer names those records.

// DefaultQueryBudgetTokens caps the session text sent with a question.
const DefaultQueryBudgetTokens = 30000

// queryToolMaxChars clips a tool call's input or result in a passage.
const queryToolMaxChars = 1500

// Passage is one numbered piece of a serialized session.
type Passage struct {
	// Seq is the record's stream sequence (0 for notes and summaries).
	Seq  uint64
	ID   string
	Role string
	Text string
}

// MessagePassage renders a transcript message as a passage: its text,
// tool calls (name and clipped input) and clipped tool results; thinking is
// left out. The empty string means nothing to show.
func MessagePassage(m *events.Message) string {
	var parts []string
	for i := range m.Content {
		b := &m.Content[i]
		switch b.Type {
		case events.BlockText:
			if t := strings.TrimSpace(b.Text); t != "" {
				parts = append(parts, t)
			}
		case events.BlockToolUse:
			parts = append(parts, fmt.Sprintf("[tool call %s %s]", b.Name, clipRunes(string(b.Input), queryToolMaxChars)))
		case events.BlockToolResult:
			var t []string
			for j := range b.Content {
				if b.Content[j].Type == events.BlockText {
					t = append(t, b.Content[j].Text)
				}
			}
			parts = append(parts, "[tool result] "+clipRunes(strings.Join(t, "\n"), queryToolMaxChars))
		}
	}
	return strings.Join(parts, "\n")
}

// QueryContext is a session serialized for a question.
type QueryContext struct {
	// Text numbers every passage "[n]".
	Text     string
	Passages []Passage
	// Tokens estimates Text; Truncated counts records left out.
	Tokens    int64
	Truncated int
}

// BuildQueryContext serializes notes, summaries (oldest first) and records
// (oldest first) under budget tokens: notes and summaries first (clipped to
// half the budget), then the newest records that fit, in order.
func BuildQueryContext(notes string, summaries []string, records []Passage, budget int64) QueryContext {
	if budget <= 0 {
		budget = DefaultQueryBudgetTokens
	}
	var head []Passage
	var used int64
	if n := strings.TrimSpace(notes); n != "" {
		head = append(head, Passage{Role: "notes", Text: n})
	}
	for _, s := range summaries {
		if s = strings.TrimSpace(s); s != "" {
			head = append(head, Passage{Role: "summary", Text: s})
		}
	}
	for i := range head {
		t := EstimateText(head[i].Text)
		if used+t > budget/2 {
			head[i].Text = clipRunes(head[i].Text, int(max(budget/2-used, 0)*3))
			t = EstimateText(head[i].Text)
		}
		used += t
	}
	first := len(records)
	for first > 0 {
		t := EstimateText(records[first-1].Text) + 8
		if used+t > budget {
			break
		}
		used += t
		first--
	}
	qc := QueryContext{Passages: append(head, records[first:]...), Tokens: used, Truncated: first}
	var b strings.Builder
	for i, p := range qc.Passages {
		fmt.Fprintf(&b, "[%d] %s: %s\n\n", i+1, p.Role, p.Text)
	}
	qc.Text = b.String()
	return qc
}

// QuerySystemPrompt instructs a model answering a question about a past
// session.
const QuerySystemPrompt = `You answer a question about an earlier session between a user and an AI agent.
The session follows as numbered passages ([n] role: text): memory notes and earlier summaries first, then the most recent records.
Answer from the passages only; if they do not contain the answer, say so. Be brief and specific.
Cite the passages you used by number in square brackets, e.g. [3][7].`

var citation = regexp.MustCompile(`\[(\d{1,6})\]`)

// Citations returns the distinct passage indexes (0-based, valid for n
// passages) an answer cites as "[n]", in order of appearance.
func Citations(answer string, n int) []int {
	var out []int
	seen := map[int]bool{}
	for _, m := range citation.FindAllStringSubmatch(answer, -1) {
		k, err := strconv.Atoi(m[1])
		if err != nil || k < 1 || k > n || seen[k-1] {
			continue
		}
		seen[k-1] = true
		out = append(out, k-1)
	}
	return out
}

// ExtractiveAnswer answers without a model: the passages sharing the most
// question terms (ties: the newest), up to k, quoted with their numbers. It
// returns the answer and the passage indexes it drew on.
func ExtractiveAnswer(question string, passages []Passage, k int) (string, []int) {
	terms := Terms(question)
	type scored struct{ i, score int }
	var hits []scored
	for i, p := range passages {
		text := strings.ToLower(p.Text)
		score := 0
		for _, t := range terms {
			if strings.Contains(text, t) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, scored{i, score})
		}
	}
	if len(hits) == 0 {
		return "The session does not mention that.", nil
	}
	sort.SliceStable(hits, func(a, b int) bool {
		if hits[a].score != hits[b].score {
			return hits[a].score > hits[b].score
		}
		return hits[a].i > hits[b].i
	})
	if len(hits) > k {
		hits = hits[:k]
	}
	sort.Slice(hits, func(a, b int) bool { return hits[a].i < hits[b].i })
	var b strings.Builder
	b.WriteString("From the session:\n")
	idx := make([]int, len(hits))
	for j, h := range hits {
		idx[j] = h.i
		fmt.Fprintf(&b, "- [%d] %s: %s\n", h.i+1, passages[h.i].Role, clipRunes(strings.TrimSpace(passages[h.i].Text), 400))
	}
	return strings.TrimSpace(b.String()), idx
}

// passageOverhead is what BuildQueryContext counts per record beside its
// text (its number and role).
const passageOverhead = 8

// PassageTail keeps the newest passages that fit a token budget as they
// are added oldest first, so a reader holds about the budget's worth
// however long the session is: an added passage drops the oldest kept
// ones once the budget is exceeded, and a passage larger than the whole
// budget is clipped to its end. The zero value keeps nothing; it is not
// safe for concurrent use.
type PassageTail struct {
	budget, tokens int64
	kept           []Passage
	dropped        int
}

// NewPassageTail returns a tail of budget tokens.
func NewPassageTail(budget int64) *PassageTail { return &PassageTail{budget: budget} }

// Add appends p, dropping the oldest passages that no longer fit.
func (t *PassageTail) Add(p Passage) {
	if t.budget <= 0 {
		t.dropped++
		return
	}
	if passageCost(p) > t.budget {
		p.Text = tailRunes(p.Text, int(t.budget)*2) // about half the budget
	}
	t.kept = append(t.kept, p)
	t.tokens += passageCost(p)
	n := 0
	for t.tokens > t.budget && n < len(t.kept)-1 {
		t.tokens -= passageCost(t.kept[n])
		n++
	}
	if n > 0 {
		t.dropped += n
		t.kept = append(t.kept[:0:0], t.kept[n:]...)
	}
}

// Passages returns the kept passages, oldest first.
func (t *PassageTail) Passages() []Passage { return t.kept }

// Tokens estimates the kept passages as BuildQueryContext counts them.
func (t *PassageTail) Tokens() int64 { return t.tokens }

// Dropped counts the passages left out.
func (t *PassageTail) Dropped() int { return t.dropped }

func passageCost(p Passage) int64 { return EstimateText(p.Text) + passageOverhead }

// tailRunes keeps about the last n runes of s.
func tailRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// SplitBudget divides a request's token budget among n questions, each
// getting at least floor (so a request's total stays within
// max(budget, n×floor)).
func SplitBudget(budget int64, n int, floor int64) int64 {
	if n <= 1 {
		return budget
	}
	return max(budget/int64(n), min(floor, budget))
}
