package memory

import (
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// Keep-window defaults of the reference's session-memory compaction.
const (
	DefaultKeepMinTokens       = 10000
	DefaultKeepMinTextMessages = 5
	DefaultKeepMaxTokens       = 40000
)

// WindowConfig bounds the keep window: growth backwards stops once the kept
// messages reach MaxTokens, or MinTokens together with MinTextMessages
// messages that carry text.
type WindowConfig struct {
	MinTokens       int64
	MinTextMessages int
	MaxTokens       int64
}

// DefaultWindowConfig returns the reference's keep-window bounds
// (10,000 tokens and 5 text messages, at most 40,000 tokens).
func DefaultWindowConfig() WindowConfig {
	return WindowConfig{MinTokens: DefaultKeepMinTokens, MinTextMessages: DefaultKeepMinTextMessages, MaxTokens: DefaultKeepMaxTokens}
}

// WithDefaults replaces zero or negative bounds by the defaults.
func (c WindowConfig) WithDefaults() WindowConfig {
	d := DefaultWindowConfig()
	if c.MinTokens <= 0 {
		c.MinTokens = d.MinTokens
	}
	if c.MinTextMessages <= 0 {
		c.MinTextMessages = d.MinTextMessages
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = d.MaxTokens
	}
	return c
}

// WindowEntry is one transcript record as window selection sees it.
type WindowEntry struct {
	// Seq is the record's transcript stream sequence (informational here).
	Seq uint64
	// Message is the record's message; nil for lifecycle records.
	Message *events.Message
	// Boundary marks a compaction boundary: the platform replaced its
	// context here (a "compacted" lifecycle record).
	Boundary bool
	// PostTokens is, for a boundary, the size of the context right after
	// that compaction, when the platform reported it.
	PostTokens int64
}

// main reports whether the entry is a main-thread message: only those are
// part of the platform's context and can be kept.
func (e *WindowEntry) main() bool { return e.Message != nil && e.Message.IsMain() }

// WindowInput is what SelectWindow chooses from.
type WindowInput struct {
	// Entries is a contiguous run of the session's records, in order, ending
	// with the newest.
	Entries []WindowEntry
	// Start is the index of the first record after the last summarized one:
	// the selection keeps at least every main-thread message from Start on
	// (after the floor). A resumed session (nothing summarized at a known
	// point) passes len(Entries): the window grows back from the end.
	Start int
	// Complete reports that Entries begin at the session's first record (or
	// that nothing earlier can be read). When false, SelectWindow may ask for
	// earlier records with Window.NeedEarlier.
	Complete bool
}

// Window is the result of SelectWindow. Indexes refer to WindowInput.Entries.
type Window struct {
	// Start is the index of the first record of the kept suffix;
	// len(Entries) when nothing is kept.
	Start int
	// Kept lists the kept records: every main-thread message from Start on,
	// in order.
	Kept []int
	// Floor is the index of the last compaction boundary, -1 when Entries
	// hold none. Optional growth never passes it; records after the last
	// summarized one are kept even when they lie before it (the previous
	// compaction kept them), and so may a tool_use or a streamed sibling a
	// kept record needs.
	Floor int
	// LatestRequest is the index of the newest main-thread user request (a
	// user message with text and no tool_result); -1 when Entries hold none.
	LatestRequest int
	// Quoted lists, oldest first, the user messages the summary must carry
	// verbatim because they lie before Start: the latest request and, when
	// one follows it, the latest user message with text after it (a
	// correction made while tools ran). Empty when the request is kept.
	Quoted []int
	// RequestOutside reports that LatestRequest is not kept (it is quoted).
	RequestOutside bool
	// Dropped counts main-thread messages after the last summarized record
	// that were left out because a tool_result in them (or after them)
	// answers a tool_use that is not in the transcript at all.
	Dropped int
	// Tokens is the padded estimate (Padded of EstimateMessage summed) of
	// the kept messages; it never exceeds the maximum unless Overflow.
	// TextMessages counts the kept messages with a non-empty text block.
	Tokens       int64
	TextMessages int
	// Overflow reports that the messages after the last summarized record
	// alone, kept whole with the records they need, exceed the maximum: the
	// window cannot both keep every record the notes do not cover and stay
	// bounded. Start is then the summarized start and the caller must not
	// serve the window (OutcomeNotesBehind).
	Overflow bool
	// NeedEarlier reports that the answer may change with earlier records:
	// growth reached Entries[0] without meeting its stop condition or a
	// floor, a tool_use a kept tool_result answers was not found, no user
	// request was found, or the kept suffix starts at Entries[0]. Never set
	// when Complete.
	NeedEarlier bool
}

// SelectWindow chooses the messages a compaction keeps verbatim, by the
// reference's rules with Recall's fixes:
//
//  1. Keep every main-thread message from in.Start on: the notes do not
//     cover them. This holds before the floor too (the last compaction
//     boundary): a previous compaction kept those records.
//  2. While the kept messages hold (padded, see Padded) fewer than
//     cfg.MaxTokens and not both cfg.MinTokens and cfg.MinTextMessages text
//     messages, grow backwards one message at a time, never past the floor
//     and never past cfg.MaxTokens.
//  3. Never separate a tool_use from its tool_result: when a kept
//     tool_result answers an earlier tool_use, grow back to include it; and
//     keep every record of a streamed response (records sharing a
//     message_id) together. When that would pass cfg.MaxTokens, start later
//     instead (never after in.Start).
//  4. The latest user request is not a reason to grow: when it lies before
//     the window it is listed in Quoted, for the summary to carry verbatim.
//     When it is the first message the notes do not cover and alone too
//     large to keep, the window starts after it and it is quoted (the quote
//     is bounded and names its record): the session is still served.
//  5. A tool_result whose tool_use is nowhere in a complete transcript
//     cannot be kept: the suffix then starts after it (Dropped).
//
// Subagent records and lifecycle records are never kept and never counted.
// The function is pure and deterministic.
func SelectWindow(in WindowInput, cfg WindowConfig) Window {
	cfg = cfg.WithDefaults()
	es := in.Entries
	n := len(es)
	w := Window{Floor: -1, LatestRequest: -1}
	for i := n - 1; i >= 0; i-- {
		if es[i].Boundary {
			w.Floor = i
			break
		}
	}
	w.LatestRequest = latestRequest(es)
	if w.LatestRequest < 0 && !in.Complete {
		w.NeedEarlier = true // the request is somewhere before Entries[0]
	}
	mandatory := min(max(in.Start, 0), n)
	start, needEarlier := grow(es, mandatory, w.Floor, cfg)
	w.NeedEarlier = w.NeedEarlier || (needEarlier && !in.Complete)

	start, missing := closeInvariants(es, start)
	if missing && !in.Complete {
		w.NeedEarlier = true
	}
	if missing && in.Complete {
		start = dropOrphans(es, start)
		mandatory = max(mandatory, start)
		for i := min(in.Start, n); i < start; i++ {
			if es[i].main() {
				w.Dropped++
			}
		}
	}
	if Padded(suffixEstimate(es, start)) > cfg.MaxTokens {
		start, w.Overflow = shrink(es, start, mandatory, cfg.MaxTokens, in.Complete)
	}
	if w.Overflow {
		if s, ok := pastRequest(es, mandatory, w.LatestRequest, cfg.MaxTokens, in.Complete); ok {
			start, w.Overflow = s, false
		}
	}
	if start == 0 && n > 0 && !in.Complete {
		w.NeedEarlier = true
	}
	w.Start = start
	var raw int64
	for i := start; i < n; i++ {
		if es[i].main() {
			w.Kept = append(w.Kept, i)
			raw += EstimateMessage(es[i].Message)
			if messageHasText(es[i].Message) {
				w.TextMessages++
			}
		}
	}
	w.Tokens = Padded(raw)
	w.Quoted, w.RequestOutside = quoted(es, w.LatestRequest, start)
	return w
}

// latestRequest returns the index of the newest main-thread user request in
// es, -1 when there is none.
func latestRequest(es []WindowEntry) int {
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].main() && IsUserRequest(es[i].Message) {
			return i
		}
	}
	return -1
}

// grow returns where the kept suffix starts after growing backwards from
// start (rule 2), and whether growth reached Entries[0] wanting more.
func grow(es []WindowEntry, start, floor int, cfg WindowConfig) (int, bool) {
	var tokens int64
	var texts int
	for i := start; i < len(es); i++ {
		if es[i].main() {
			tokens += EstimateMessage(es[i].Message)
			if messageHasText(es[i].Message) {
				texts++
			}
		}
	}
	enough := func() bool {
		p := Padded(tokens)
		return p >= cfg.MaxTokens || (p >= cfg.MinTokens && texts >= cfg.MinTextMessages)
	}
	for i := start - 1; i > floor && !enough(); i-- {
		if !es[i].main() {
			start = i
			continue
		}
		est := EstimateMessage(es[i].Message)
		if Padded(tokens+est) > cfg.MaxTokens {
			return start, false // the next message does not fit: the window is full
		}
		start, tokens = i, tokens+est
		if messageHasText(es[i].Message) {
			texts++
		}
	}
	return start, start == 0 && floor < 0 && !enough()
}

// shrink moves start forward, never past mandatory, to the first start
// whose closed suffix fits max (rule 3). When even the suffix from mandatory
// does not fit, it returns mandatory's closure and overflow. In a partial
// transcript a suffix whose tool_use lies before Entries is taken as it is:
// the selection then asks for earlier records anyway (NeedEarlier).
func shrink(es []WindowEntry, start, mandatory int, max int64, complete bool) (int, bool) {
	for s := start + 1; s <= mandatory; s++ {
		if s < mandatory && !es[s].main() {
			continue
		}
		c, missing := closeInvariants(es, s)
		if (!missing || !complete) && Padded(suffixEstimate(es, c)) <= max {
			return c, false
		}
	}
	c, _ := closeInvariants(es, mandatory)
	return c, true
}

// suffixEstimate sums EstimateMessage over the main-thread messages from
// start on.
func suffixEstimate(es []WindowEntry, start int) int64 {
	var n int64
	for i := start; i < len(es); i++ {
		if es[i].main() {
			n += EstimateMessage(es[i].Message)
		}
	}
	return n
}

// dropOrphans moves start forward past every message holding a tool_result
// whose tool_use is nowhere in es, re-closing each time (the cut only moves
// forward), and returns the new start.
func dropOrphans(es []WindowEntry, start int) int {
	prevCut := -1
	for missing := true; missing; {
		cut := max(lastOrphan(es, start), prevCut+1)
		prevCut = cut
		start, missing = closeInvariants(es, cut+1)
	}
	return start
}

// pastRequest returns where the window starts when the latest request is
// the first message the notes do not cover and is itself what overflows the
// window (a pasted log): just after it, so the summary quotes it (bounded,
// naming its record, see QuoteMaxTokens) and every message after it is
// kept. ok is false when messages before the request are uncovered too or
// the messages after it do not fit either.
func pastRequest(es []WindowEntry, mandatory, request int, max int64, complete bool) (int, bool) {
	if request < mandatory || hasToolResult(es[request].Message.Content) {
		return 0, false // a quote carries text only: results must be kept
	}
	for i := mandatory; i < request; i++ {
		if es[i].main() {
			return 0, false
		}
	}
	c, missing := closeInvariants(es, request+1)
	if c <= request || (missing && complete) || Padded(suffixEstimate(es, c)) > max {
		return 0, false
	}
	return c, true
}

// quoted returns the user messages before start that the summary must
// quote (see Window.Quoted) and whether the latest request is among them.
func quoted(es []WindowEntry, request, start int) ([]int, bool) {
	if request < 0 || request >= start {
		return nil, false
	}
	q := []int{request}
	for i := start - 1; i > request; i-- {
		if m := es[i].Message; es[i].main() && m.Role == events.RoleUser && messageHasText(m) {
			q = append(q, i)
			break
		}
	}
	return q, true
}

// closeInvariants moves start back until every tool_result in the kept
// suffix has its tool_use kept and every streamed response is kept whole.
// missing reports a tool_use that is not in es at all.
func closeInvariants(es []WindowEntry, start int) (int, bool) {
	for {
		uses := map[string]bool{}
		results := map[string]bool{}
		msgIDs := map[string]bool{}
		for i := start; i < len(es); i++ {
			if !es[i].main() {
				continue
			}
			m := es[i].Message
			if m.MessageID != "" {
				msgIDs[m.MessageID] = true
			}
			for j := range m.Content {
				b := &m.Content[j]
				switch b.Type {
				case events.BlockToolUse:
					uses[b.ID] = true
				case events.BlockToolResult:
					results[b.ToolUseID] = true
				}
			}
		}
		need := 0
		for id := range results {
			if !uses[id] {
				need++
			}
		}
		newStart := start
		for i := start - 1; i >= 0; i-- {
			if !es[i].main() {
				continue
			}
			m := es[i].Message
			if m.MessageID != "" && msgIDs[m.MessageID] {
				newStart = i
			}
			for j := range m.Content {
				b := &m.Content[j]
				if b.Type == events.BlockToolUse && results[b.ID] && !uses[b.ID] {
					uses[b.ID] = true
					need--
					newStart = i
				}
			}
		}
		if newStart == start {
			return start, need > 0
		}
		start = newStart
	}
}

// lastOrphan returns the index of the last main-thread message from start
// on holding a tool_result whose tool_use is nowhere in es.
func lastOrphan(es []WindowEntry, start int) int {
	uses := map[string]bool{}
	for i := range es {
		if es[i].main() {
			for _, b := range es[i].Message.Content {
				if b.Type == events.BlockToolUse {
					uses[b.ID] = true
				}
			}
		}
	}
	last := start - 1
	for i := start; i < len(es); i++ {
		if !es[i].main() {
			continue
		}
		for _, b := range es[i].Message.Content {
			if b.Type == events.BlockToolResult && !uses[b.ToolUseID] {
				last = i
			}
		}
	}
	return last
}

// messageHasText reports whether m has a non-empty text block (string content is a
// text block after decoding).
func messageHasText(m *events.Message) bool {
	for i := range m.Content {
		if m.Content[i].Type == events.BlockText && m.Content[i].Text != "" {
			return true
		}
	}
	return false
}

// IsUserRequest reports whether m is a user request as compaction defines
// it: a user message with a non-blank text block. A message that also
// carries tool results counts (a platform that sends the user's next words
// in the same turn as the results of the last calls), so no later thing the
// user said is passed over for an earlier request.
func IsUserRequest(m *events.Message) bool {
	if m.Role != events.RoleUser {
		return false
	}
	for i := range m.Content {
		if b := &m.Content[i]; b.Type == events.BlockText && strings.TrimSpace(b.Text) != "" {
			return true
		}
	}
	return false
}
