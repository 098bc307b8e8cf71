package memory

import (
	"slices"

	"github.com/google/uuid"

	"github.com/recallhq/recall/pkg/events"
)

// InterruptedResult is the text of the synthetic tool_result RepairContext
// gives a tool_use that was never answered (the agent stopped mid-call).
const InterruptedResult = "[This tool call was interrupted: no result was recorded. Do not assume it ran; run it again if it is still needed.]"

// syntheticNamespace derives the uuids of synthetic records from the tool_use
// ids they answer, so a repeated compaction gives the same records.
var syntheticNamespace = uuid.MustParse("0c8d7f3a-41b2-4f6e-9a0d-5e2b7c1f9d34")

// ServedMessage is one message of a repaired context: the message, the
// index in RepairContext's input it comes from (-1 for a synthetic message)
// and whether it differs from that input.
type ServedMessage struct {
	Message *events.Message
	From    int
	Changed bool
}

// Repair says what RepairContext changed, by rule and record uuid.
type Repair struct {
	Rule string
	UUID string
}

// RepairContext makes msgs (a context as Recall serves it, the summary
// first) pass ValidateContext, changing as little as it can and never
// modifying msgs itself (changed messages are copies):
//
//   - blocks the APIs reject are left out: blank text, thinking without text
//     or signature, redacted_thinking without data, blocks in a role that
//     cannot carry them, tool_use blocks without id, name or object input
//     or with an id already used; a message left empty is left out;
//   - a tool_result that answers no tool_use of the immediately preceding
//     assistant turn (or answers one twice) is left out;
//   - a tool_use that nothing answers in the next user turn — an agent that
//     stopped mid-call — gets a synthetic user message right after its turn
//     holding an error tool_result (InterruptedResult), the way the
//     extractor's conversation builder repairs it. The final turn's calls
//     are the platform's own, still running: they are left as they are;
//   - in a user turn, the messages with tool results move before the others
//     and tool_result blocks before other blocks; when two messages of the
//     turn each hold results and other blocks, the turn becomes one message
//     (the first one's uuid) with the results first.
//
// A context that starts with an assistant turn is not repaired (Recall's
// contexts start with the summary); ValidateContext still reports it.
func RepairContext(msgs []*events.Message) ([]ServedMessage, []Repair) {
	r := &repairer{}
	out := make([]ServedMessage, 0, len(msgs))
	seen := map[string]bool{}
	for i, m := range msgs {
		if s, ok := r.cleanBlocks(i, m, seen); ok {
			out = append(out, s)
		}
	}
	out = r.dropOrphanResults(out)
	out = r.answerUnanswered(out)
	out = r.resultsFirst(out)
	return out, r.done
}

type repairer struct{ done []Repair }

func (r *repairer) note(rule string, m *events.Message) {
	r.done = append(r.done, Repair{Rule: rule, UUID: m.UUID})
}

// edited returns s with its message replaced by a copy whose content is c.
func edited(s ServedMessage, c events.Content) ServedMessage {
	m := *s.Message
	m.Content = c
	return ServedMessage{Message: &m, From: s.From, Changed: true}
}

// cleanBlocks applies the per-block rules to message i; ok is false when
// the message is left out.
func (r *repairer) cleanBlocks(i int, m *events.Message, seen map[string]bool) (ServedMessage, bool) {
	s := ServedMessage{Message: m, From: i}
	if m.Role != events.RoleUser && m.Role != events.RoleAssistant {
		r.note(RuleRole, m)
		return s, false
	}
	var kept events.Content
	changed := false
	for j := range m.Content {
		b := m.Content[j]
		rule := blockRule(m.Role, &b, seen)
		if rule == "" && b.Type == events.BlockToolResult {
			if c, dropped := nonBlank(b.Content); dropped {
				b.Content, changed = c, true
				r.note(RuleEmptyBlock, m)
			}
		}
		if rule != "" {
			r.note(rule, m)
			changed = true
			continue
		}
		if b.Type == events.BlockToolUse {
			seen[b.ID] = true
		}
		kept = append(kept, b)
	}
	if len(kept) == 0 {
		r.note(RuleEmptyMessage, m)
		return s, false
	}
	if changed {
		s = edited(s, kept)
	}
	return s, true
}

// blockRule returns the rule b breaks on its own ("" for none).
func blockRule(role string, b *events.Block, seen map[string]bool) string {
	if blank, _ := blankBlock(b); blank && b.Type != events.BlockToolResult {
		return RuleEmptyBlock
	}
	if !placedRight(role, b.Type) {
		return RuleBlockPlace
	}
	switch b.Type {
	case events.BlockToolUse:
		if b.ID == "" || b.Name == "" || !jsonObject(b.Input) || seen[b.ID] {
			return RuleToolUse
		}
	case events.BlockToolResult:
		if b.ToolUseID == "" {
			return RuleOrphanResult
		}
	}
	return ""
}

// nonBlank returns c without blank text blocks, and whether any was dropped.
func nonBlank(c events.Content) (events.Content, bool) {
	if !slices.ContainsFunc(c, isBlankText) {
		return c, false
	}
	out := make(events.Content, 0, len(c))
	for _, b := range c {
		if !isBlankText(b) {
			out = append(out, b)
		}
	}
	return out, true
}

func isBlankText(b events.Block) bool {
	blank, _ := blankBlock(&b)
	return b.Type == events.BlockText && blank
}

func messagesOf(ss []ServedMessage) []*events.Message {
	out := make([]*events.Message, len(ss))
	for i := range ss {
		out[i] = ss[i].Message
	}
	return out
}

// dropOrphanResults leaves out tool results that answer no tool_use of the
// previous assistant turn. Leaving out a message can join two turns, which
// only widens what a result may answer, so one pass per change suffices;
// it repeats until nothing changes.
func (r *repairer) dropOrphanResults(ss []ServedMessage) []ServedMessage {
	for {
		msgs := messagesOf(ss)
		ts := turnsOf(msgs)
		changed := false
		for k, t := range ts {
			if t.role != events.RoleUser {
				continue
			}
			open := map[string]bool{}
			if k > 0 {
				for _, id := range turnToolUses(msgs, ts[k-1]) {
					open[id] = true
				}
			}
			for i := t.first; i < t.end; i++ {
				if c, dropped := answeringOnly(msgs[i].Content, open); dropped {
					r.note(RuleOrphanResult, msgs[i])
					ss[i] = edited(ss[i], c)
					changed = true
				}
			}
		}
		if !changed {
			return slices.DeleteFunc(ss, func(s ServedMessage) bool { return len(s.Message.Content) == 0 })
		}
		ss = slices.DeleteFunc(ss, func(s ServedMessage) bool { return len(s.Message.Content) == 0 })
	}
}

// answeringOnly returns c without the tool results whose id is not open,
// closing each id it keeps, and whether any was dropped.
func answeringOnly(c events.Content, open map[string]bool) (events.Content, bool) {
	var out events.Content
	dropped := false
	for _, b := range c {
		if b.Type == events.BlockToolResult {
			if !open[b.ToolUseID] {
				dropped = true
				continue
			}
			delete(open, b.ToolUseID)
		}
		out = append(out, b)
	}
	return out, dropped
}

// answerUnanswered inserts a synthetic result message after every assistant
// turn but the last whose tool uses the next turn does not all answer.
func (r *repairer) answerUnanswered(ss []ServedMessage) []ServedMessage {
	msgs := messagesOf(ss)
	ts := turnsOf(msgs)
	out := make([]ServedMessage, 0, len(ss)+1)
	for k, t := range ts {
		out = append(out, ss[t.first:t.end]...)
		if t.role != events.RoleAssistant || k == len(ts)-1 {
			continue
		}
		answered := map[string]bool{}
		for i := ts[k+1].first; i < ts[k+1].end; i++ {
			for _, b := range msgs[i].Content {
				if b.Type == events.BlockToolResult {
					answered[b.ToolUseID] = true
				}
			}
		}
		var missing events.Content
		for _, id := range turnToolUses(msgs, t) {
			if !answered[id] {
				missing = append(missing, events.Block{Type: events.BlockToolResult, ToolUseID: id, IsError: true,
					Content: events.Content{{Type: events.BlockText, Text: InterruptedResult}}})
			}
		}
		if len(missing) > 0 {
			m := &events.Message{UUID: uuid.NewSHA1(syntheticNamespace, []byte(missing[0].ToolUseID)).String(), Role: events.RoleUser, Content: missing}
			r.note(RuleUnanswered, msgs[t.end-1])
			out = append(out, ServedMessage{Message: m, From: -1, Changed: true})
		}
	}
	return out
}

// resultsFirst orders each user turn: messages holding tool results first
// (a stable sort), and within a message its tool_result blocks first. When
// that is not enough (two messages that each hold results and text), the
// turn becomes one message: the first one's, holding every result, then
// every other block, in order.
func (r *repairer) resultsFirst(ss []ServedMessage) []ServedMessage {
	ts := turnsOf(messagesOf(ss))
	out := make([]ServedMessage, 0, len(ss))
	for _, t := range ts {
		turn := ss[t.first:t.end]
		if t.role != events.RoleUser || resultsLead(turn) {
			out = append(out, turn...)
			continue
		}
		r.note(RuleResultsFirst, turn[0].Message)
		slices.SortStableFunc(turn, byResults)
		for i := range turn {
			if c := turn[i].Message.Content; !slices.IsSortedFunc(c, byResultBlock) {
				c = slices.Clone(c)
				slices.SortStableFunc(c, byResultBlock)
				turn[i] = edited(turn[i], c)
			}
		}
		if resultsLead(turn) {
			out = append(out, turn...)
			continue
		}
		var c events.Content
		for _, s := range turn {
			c = append(c, s.Message.Content...)
		}
		slices.SortStableFunc(c, byResultBlock)
		out = append(out, edited(turn[0], c))
	}
	return out
}

// resultsLead reports whether no tool_result of the turn follows another
// kind of block.
func resultsLead(turn []ServedMessage) bool {
	other := false
	for _, s := range turn {
		for _, b := range s.Message.Content {
			if b.Type != events.BlockToolResult {
				other = true
			} else if other {
				return false
			}
		}
	}
	return true
}

func byResults(a, b ServedMessage) int {
	return resultRank(b.Message.Content) - resultRank(a.Message.Content)
}

func resultRank(c events.Content) int {
	if slices.ContainsFunc(c, func(b events.Block) bool { return b.Type == events.BlockToolResult }) {
		return 1
	}
	return 0
}

func byResultBlock(a, b events.Block) int {
	rank := func(x events.Block) int {
		if x.Type == events.BlockToolResult {
			return 0
		}
		return 1
	}
	return rank(a) - rank(b)
}
