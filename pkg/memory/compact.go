package memory

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/recallhq/recall/pkg/events"
)

// Outcomes of a compaction request, each reported by name.
const (
	// OutcomeSessionMemory: served from the session memory; the kept
	// messages start after lastSummarizedId.
	OutcomeSessionMemory = "session_memory"
	// OutcomeResumedSession: served from the session memory, but no
	// lastSummarizedId is known, so the window grew back from the end.
	OutcomeResumedSession = "resumed_session"
	// OutcomeFullCompact: served by summarizing the conversation with an
	// LLM (the fallback).
	OutcomeFullCompact = "full_compact"

	// OutcomeNoSessionMemory: the session has no memory yet.
	OutcomeNoSessionMemory = "no_session_memory"
	// OutcomeEmptyTemplate: the memory is still the unfilled template.
	OutcomeEmptyTemplate = "empty_template"
	// OutcomeSummarizedIDNotFound: lastSummarizedId names a record the
	// transcript no longer holds.
	OutcomeSummarizedIDNotFound = "summarized_id_not_found"
	// OutcomeNotesBehind: the messages the notes do not cover yet are, on
	// their own, more than the keep window's maximum; keeping them all would
	// break the bound and dropping any would lose records.
	OutcomeNotesBehind = "notes_behind"
	// OutcomeNoReduction: the compacted context would not be smaller than
	// the current one.
	OutcomeNoReduction = "no_reduction"
	// OutcomeThresholdExceeded: the compacted context would still be at or
	// over the auto-compact threshold.
	OutcomeThresholdExceeded = "threshold_exceeded"
	// OutcomeDisabled: the tenant's sm_compact gate is off.
	OutcomeDisabled = "disabled"
	// OutcomeError: reading memory or transcript failed.
	OutcomeError = "error"
)

// Served reports whether outcome carries a compaction the caller can use.
func Served(outcome string) bool {
	switch outcome {
	case OutcomeSessionMemory, OutcomeResumedSession, OutcomeFullCompact:
		return true
	}
	return false
}

// Auto-compact threshold parameters of the reference.
const (
	DefaultContextWindow = 200000
	// DefaultMaxOutputTokens is the output reserve assumed when the caller
	// does not say; the reference caps the reserve at this value anyway.
	DefaultMaxOutputTokens  = 20000
	maxOutputReserve        = 20000
	autoCompactBufferTokens = 13000
)

// AutoCompactThreshold is the reference's auto-compact threshold:
// contextWindow − min(maxOutputTokens, 20,000) − 13,000. A 200K window gives
// 167,000. Non-positive arguments take the defaults.
func AutoCompactThreshold(contextWindow, maxOutputTokens int64) int64 {
	if contextWindow <= 0 {
		contextWindow = DefaultContextWindow
	}
	if maxOutputTokens <= 0 {
		maxOutputTokens = DefaultMaxOutputTokens
	}
	return contextWindow - min(maxOutputTokens, maxOutputReserve) - autoCompactBufferTokens
}

// CompactInput is everything a session-memory compaction is computed from.
type CompactInput struct {
	// HasMemory reports that a memory record exists; Notes is its document.
	HasMemory bool
	Notes     string
	// Template is the tenant's template ("" = DefaultTemplate), for the
	// empty-template check.
	Template string
	// LastSummarizedID is the memory's lastSummarizedId ("" = resumed
	// session). SummarizedIndex is the index in Entries of the record it
	// names, -1 when the transcript does not hold it.
	LastSummarizedID string
	SummarizedIndex  int
	// Entries and Complete are as in WindowInput.
	Entries  []WindowEntry
	Complete bool
	Window   WindowConfig
	// Threshold is the auto-compact threshold (0 = AutoCompactThreshold
	// of the defaults).
	Threshold int64
	// SectionMaxChars bounds section bodies in the summary
	// (0 = DefaultSectionMaxChars).
	SectionMaxChars int
	// ContextTokens is the platform's own count of its context, when it
	// sent one; 0 estimates it from the transcript (ContextEstimate).
	ContextTokens int64
	// NotesRef and TranscriptRef tell the model where the full notes and
	// the full transcript can be fetched; empty omits the hint.
	NotesRef      string
	TranscriptRef string
	// Trail is the session's exact trail of files, commands and errors
	// (MemoryRecord.Trail; nil: none), rendered after the notes in the
	// summary (WithTrail).
	Trail *events.Trail
}

// CompactPlan is the pure result of a compaction.
type CompactPlan struct {
	Outcome string
	// Reason explains an outcome that is not served, in one sentence.
	Reason string
	// NeedEarlier asks the caller to prepend earlier records and plan
	// again (see Window.NeedEarlier).
	NeedEarlier bool
	Window      Window
	// Summary is the text of the summary message; Truncated reports that
	// note sections were cut to fit.
	Summary   string
	Truncated bool
	// TokensBefore estimates the context before compaction; TokensAfter the
	// summary message plus the kept messages.
	TokensBefore int64
	TokensAfter  int64
	Threshold    int64
}

// PlanCompaction decides the outcome of a session-memory compaction and, when
// it is served, the kept window, the summary message and the token
// estimates. It never calls anything: the summary is the stored notes.
func PlanCompaction(in CompactInput) CompactPlan {
	p := CompactPlan{Threshold: in.Threshold}
	if p.Threshold <= 0 {
		p.Threshold = AutoCompactThreshold(0, 0)
	}
	tmpl := in.Template
	if tmpl == "" {
		tmpl = DefaultTemplate
	}
	switch {
	case !in.HasMemory || strings.TrimSpace(in.Notes) == "":
		p.Outcome, p.Reason = OutcomeNoSessionMemory, "the session has no memory yet: no extraction has completed"
		return p
	case IsEmptyTemplate(in.Notes, tmpl):
		p.Outcome, p.Reason = OutcomeEmptyTemplate, "the session memory is still the empty template"
		return p
	}
	start := len(in.Entries)
	p.Outcome = OutcomeResumedSession
	if in.LastSummarizedID != "" {
		if in.SummarizedIndex < 0 || in.SummarizedIndex >= len(in.Entries) {
			p.Outcome = OutcomeSummarizedIDNotFound
			p.Reason = fmt.Sprintf("the transcript no longer holds the last summarized record %q", in.LastSummarizedID)
			return p
		}
		start = in.SummarizedIndex + 1
		p.Outcome = OutcomeSessionMemory
	}
	cfg := in.Window.WithDefaults()
	p.Window = SelectWindow(WindowInput{Entries: in.Entries, Start: start, Complete: in.Complete}, cfg)
	p.NeedEarlier = p.Window.NeedEarlier
	if p.Window.Overflow {
		p.Outcome = OutcomeNotesBehind
		p.Reason = fmt.Sprintf("the notes cover the conversation up to %q; the messages after it hold about %d tokens, more than the keep window's maximum of %d, so they cannot all be kept and none may be dropped",
			in.LastSummarizedID, p.Window.Tokens, cfg.MaxTokens)
		return p
	}
	p.Summary, p.Truncated = summaryFor(in, p.Window)
	p.TokensAfter = Padded(EstimateText(p.Summary)) + p.Window.Tokens
	p.TokensBefore = in.ContextTokens
	anchored := true
	if p.TokensBefore <= 0 {
		p.TokensBefore, anchored = contextEstimate(in.Entries, p.Window.Floor)
	}
	if p.TokensAfter >= p.TokensBefore {
		if !anchored && !in.Complete {
			// The estimate only counts what was read: read more first.
			p.NeedEarlier = true
			return p
		}
		if !p.reduce(in, start, cfg) {
			return p
		}
	}
	if p.TokensAfter >= p.Threshold {
		p.Reason = fmt.Sprintf("the compacted context would hold about %d tokens, at or over the auto-compact threshold of %d", p.TokensAfter, p.Threshold)
		p.Outcome = OutcomeThresholdExceeded
	}
	return p
}

// reduce narrows the keep window so the compacted context ends smaller than
// it started; when even the messages the notes do not cover leave no room,
// it sets OutcomeNoReduction and returns false.
func (p *CompactPlan) reduce(in CompactInput, start int, cfg WindowConfig) bool {
	room := p.TokensBefore - (p.TokensAfter - p.Window.Tokens) - 1
	if room > 0 {
		cfg.MaxTokens = min(cfg.MaxTokens, room)
		cfg.MinTokens = min(cfg.MinTokens, cfg.MaxTokens)
		w := SelectWindow(WindowInput{Entries: in.Entries, Start: start, Complete: in.Complete}, cfg)
		if !w.Overflow {
			summary, truncated := summaryFor(in, w)
			if after := Padded(EstimateText(summary)) + w.Tokens; after < p.TokensBefore {
				p.Window, p.Summary, p.Truncated, p.TokensAfter = w, summary, truncated, after
				return true
			}
		}
	}
	p.Outcome = OutcomeNoReduction
	p.Reason = fmt.Sprintf("the compacted context would hold about %d tokens, no fewer than the %d it holds now: the notes do not cover enough of it yet", p.TokensAfter, p.TokensBefore)
	return false
}

// summaryFor is the summary message of a session-memory compaction keeping
// w, and whether note sections were cut.
func summaryFor(in CompactInput, w Window) (string, bool) {
	notes, truncated := TruncateForCompact(in.Notes, in.SectionMaxChars)
	notes = WithTrail(notes, in.Trail)
	return SummaryText(notes, truncated, in.NotesRef, in.TranscriptRef, QuotesOf(in.Entries, w.Quoted)), truncated
}

// Quote is a user message a summary carries verbatim, with the transcript
// sequence of its record (0 when unknown).
type Quote struct {
	Message *events.Message
	Seq     uint64
}

// QuotesOf returns the quotes of es at the indexes idx (Window.Quoted).
func QuotesOf(es []WindowEntry, idx []int) []Quote {
	q := make([]Quote, 0, len(idx))
	for _, i := range idx {
		q = append(q, Quote{Message: es[i].Message, Seq: es[i].Seq})
	}
	return q
}

// quotesOfMessages wraps messages whose sequences are not known.
func quotesOfMessages(msgs []*events.Message) []Quote {
	q := make([]Quote, len(msgs))
	for i, m := range msgs {
		q[i].Message = m
	}
	return q
}

// SummaryText is the summary message a session-memory compaction puts in
// front of the kept messages: a preface, the (possibly truncated) notes, and
// notes about truncation and where the full record is. The user messages in
// quoted (the latest request, and a later correction, when they could not be
// kept) follow verbatim in a marked block (QuoteBlock).
func SummaryText(notes string, truncated bool, notesRef, transcriptRef string, quoted []Quote) string {
	var b strings.Builder
	b.WriteString(compactionPreface + " to free context. The session notes below were kept current in the background while the conversation ran; they cover everything before the messages that follow this one, and those messages are kept exactly as they were. Continue the work from where it stands without repeating finished steps.\n\n")
	b.WriteString(strings.TrimRight(notes, "\n"))
	b.WriteString("\n")
	if truncated {
		b.WriteString("\nSome sections of these notes were too long and were shortened for this summary (marked where cut).")
		if notesRef != "" {
			b.WriteString(" The full notes are available from Recall as " + notesRef + ".")
		}
		b.WriteString("\n")
	}
	if transcriptRef != "" {
		b.WriteString("\nIf a detail from before this point is needed and is not in the notes, the full transcript is available from Recall as " + transcriptRef + ".\n")
	}
	b.WriteString(quoteBlock(quoted))
	return b.String()
}

// FullCompactText is the summary message of an LLM full compaction: the
// model's summary, and the user messages in quoted verbatim (QuoteBlock).
func FullCompactText(summary, transcriptRef string, quoted []*events.Message) string {
	var b strings.Builder
	b.WriteString(compactionPreface + " to free context. The summary below was written from the conversation so far; the messages that follow it, if any, are kept exactly as they were.\n\n")
	b.WriteString(strings.TrimSpace(summary))
	b.WriteString("\n")
	if transcriptRef != "" {
		b.WriteString("\nIf a detail from before this point is needed and is not in the summary, the full transcript is available from Recall as " + transcriptRef + ".\n")
	}
	b.WriteString(QuoteBlock(quoted))
	return b.String()
}

// Markers of the block that quotes user messages verbatim in a summary.
const (
	QuoteBegin = "<recall:user-messages verbatim>"
	QuoteEnd   = "</recall:user-messages>"
)

// QuoteMaxTokens bounds each quoted message: a longer one (a pasted log as
// the latest request) is quoted by its first two thirds and last third of
// the bound, around a line that names the record it comes from, so the
// platform can fetch it whole. 6,000 tokens keep a summary with the latest
// request and a correction under 12,000 tokens of quotes, well inside the
// 40,000-token keep window.
const QuoteMaxTokens = 6000

// QuoteBlock renders quoted user messages (oldest first; the first is the
// latest request) between QuoteBegin and QuoteEnd, each under a line saying
// what it is, verbatim up to QuoteMaxTokens each; "" when quoted is empty.
func QuoteBlock(quoted []*events.Message) string { return quoteBlock(quotesOfMessages(quoted)) }

func quoteBlock(quoted []Quote) string {
	if len(quoted) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nThe user's latest request is not among the kept messages, so it is quoted here exactly as written; it still applies")
	if len(quoted) > 1 {
		b.WriteString(", as does the later message that follows it")
	}
	b.WriteString(".\n\n" + QuoteBegin + "\n")
	for i, q := range quoted {
		if i == 0 {
			b.WriteString("[latest request]\n")
		} else {
			b.WriteString("\n[later message from the user]\n")
		}
		b.WriteString(quoteText(q))
		b.WriteString("\n")
	}
	b.WriteString(QuoteEnd + "\n")
	return b.String()
}

// quoteText is q's text, cut to its beginning and end when over
// QuoteMaxTokens.
func quoteText(q Quote) string {
	text := RequestText(q.Message)
	if EstimateText(text) <= QuoteMaxTokens {
		return text
	}
	head, tail := cutRunes(text, QuoteMaxTokens*4*2/3, QuoteMaxTokens*4/3)
	where := "record " + q.Message.UUID
	if q.Seq > 0 {
		where += fmt.Sprintf(" (seq %d)", q.Seq)
	}
	return text[:head] + fmt.Sprintf("\n[… %d characters of this message are left out here: it is too long to quote whole; the whole message is transcript %s …]\n", utf8.RuneCountInString(text[head:tail]), where) + text[tail:]
}

// cutRunes returns the byte offsets that keep about the first headChars and
// last tailChars characters of s, on rune boundaries (head <= tail).
func cutRunes(s string, headChars, tailChars int) (head, tail int) {
	for n := 0; head < len(s) && n < headChars; n++ {
		_, size := utf8.DecodeRuneInString(s[head:])
		head += size
	}
	tail = len(s)
	for n := 0; tail > head && n < tailChars; n++ {
		_, size := utf8.DecodeLastRuneInString(s[:tail])
		tail -= size
	}
	return head, tail
}

// RequestText joins the text blocks of m, separated by blank lines.
func RequestText(m *events.Message) string {
	var parts []string
	for i := range m.Content {
		if m.Content[i].Type == events.BlockText && m.Content[i].Text != "" {
			parts = append(parts, m.Content[i].Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// ContextEstimate estimates the platform's context after the floor (the
// last boundary, -1 for none) the way the reference's trigger does: the real
// usage of the newest main-thread assistant record that has one (taken from
// the first record of that streamed response) plus the estimate of every
// main-thread record after that first record. Without usage it is the
// boundary's reported post-compaction size plus the estimate of every
// main-thread message after the floor. Records missing from entries (a
// partial read) are not counted.
func ContextEstimate(entries []WindowEntry, floor int) int64 {
	n, _ := contextEstimate(entries, floor)
	return n
}

// contextEstimate is ContextEstimate; anchored reports that it rests on a
// real usage or a boundary, so records before entries do not change it.
func contextEstimate(entries []WindowEntry, floor int) (int64, bool) {
	last := -1
	for i := len(entries) - 1; i > floor; i-- {
		if m := entries[i].Message; entries[i].main() && RealUsage(m) {
			last = i
			break
		}
	}
	if last >= 0 {
		first := last
		if id := entries[last].Message.MessageID; id != "" {
			for i := last - 1; i > floor; i-- {
				if entries[i].main() && entries[i].Message.MessageID == id {
					first = i
				}
			}
		}
		usage := entries[last].Message.Usage.Total()
		if m := entries[first].Message; RealUsage(m) {
			usage = m.Usage.Total()
		}
		for i := first + 1; i < len(entries); i++ {
			if entries[i].main() {
				usage += EstimateMessage(entries[i].Message)
			}
		}
		return usage, true
	}
	var n int64
	if floor >= 0 {
		n = entries[floor].PostTokens
	}
	for i := floor + 1; i < len(entries); i++ {
		if entries[i].main() {
			n += EstimateMessage(entries[i].Message)
		}
	}
	return n, floor >= 0
}
