// Package importer turns agent transcripts into Recall session events, so
// real sessions can be replayed through the pipeline (recall replay) and
// used as test fixtures.
//
// ClaudeCode reads Claude Code's JSONL transcripts
// (~/.claude/projects/<project>/<session>.jsonl): one JSON record per line,
// linked by uuid/parentUuid. Conversation records become
// dev.recall.transcript.message events, compact_boundary records become
// dev.recall.session.compacted; everything else is skipped and counted.
package importer

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// DefaultSource is the CloudEvents source of imported events when Options
// has none.
const DefaultSource = "recall/import/claude-code"

// ErrNoSession is returned when no session id was given and the transcript
// carries no usable sessionId.
var ErrNoSession = errors.New("no session id: pass one (the transcript has no valid sessionId)")

// Options configures an import.
type Options struct {
	// Tenant, when set, is stamped as the recalltenant extension; ingest
	// rejects the events if it is not the authenticated tenant.
	Tenant string
	// Session is the Recall session id (the events' subject). Empty uses the
	// transcript's sessionId.
	Session string
	// Source is the CloudEvents source; empty uses DefaultSource.
	Source string
}

// Result is what an import produced.
type Result struct {
	// Session is the session id the events belong to.
	Session string
	// Events are valid ingest events in transcript order. Their ids are
	// derived from the session and the record uuids, so importing the same
	// file twice yields the same ids and a replay is deduplicated.
	Events []event.Event
	// Records is the number of lines read (blank lines excluded).
	Records int
	// Counts counts what was imported: records by kind ("started" for the
	// session.started event the importer adds first, "user",
	// "tool_result", "assistant", "compaction", "subagent") and content
	// blocks ("tool_use", "tool_error", "thinking", "text").
	Counts map[string]int
	// Skipped counts what was not imported, by kind: record types
	// ("summary", "file-history-snapshot", "system:<subtype>", ...), flagged
	// records ("meta", "compact_summary", "synthetic"), unknown content
	// blocks ("block:<type>"), "malformed" lines and "invalid" records.
	Skipped map[string]int
	// Warnings describe malformed or invalid lines, with line numbers.
	Warnings []string
}

// record is the part of a Claude Code JSONL record the importer reads.
type record struct {
	Type                  string          `json:"type"`
	Subtype               string          `json:"subtype"`
	UUID                  string          `json:"uuid"`
	ParentUUID            *string         `json:"parentUuid"`
	LogicalParentUUID     string          `json:"logicalParentUuid"`
	SessionID             string          `json:"sessionId"`
	CWD                   string          `json:"cwd"`
	Timestamp             string          `json:"timestamp"`
	IsSidechain           bool            `json:"isSidechain"`
	IsMeta                bool            `json:"isMeta"`
	IsCompactSummary      bool            `json:"isCompactSummary"`
	IsAPIErrorMessage     bool            `json:"isApiErrorMessage"`
	AgentID               string          `json:"agentId"`
	Message               *ccMessage      `json:"message"`
	CompactMetadata       *compactMeta    `json:"compactMetadata"`
	ToolUseResult         json.RawMessage `json:"-"`
	IsVisibleInTranscript bool            `json:"isVisibleInTranscriptOnly"`
}

type ccMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Model      string          `json:"model"`
	Content    json.RawMessage `json:"content"`
	StopReason *string         `json:"stop_reason"`
	Usage      *events.Usage   `json:"usage"`
}

type compactMeta struct {
	Trigger           string `json:"trigger"`
	PreTokens         int64  `json:"preTokens"`
	PostTokens        int64  `json:"postTokens"`
	PreservedMessages *struct {
		UUIDs []string `json:"uuids"`
	} `json:"preservedMessages"`
	PreservedSegment *struct {
		HeadUUID string `json:"headUuid"`
		TailUUID string `json:"tailUuid"`
	} `json:"preservedSegment"`
}

// ClaudeCode imports a Claude Code JSONL transcript. Malformed lines and
// records that would not pass ingest validation are skipped with a warning,
// not fatal; read errors are returned.
func ClaudeCode(r io.Reader, opt Options) (*Result, error) {
	res := &Result{Session: opt.Session, Counts: map[string]int{}, Skipped: map[string]int{}}
	if opt.Source == "" {
		opt.Source = DefaultSource
	}
	if res.Session != "" {
		if err := events.ValidateID(res.Session); err != nil {
			return nil, fmt.Errorf("session: %w", err)
		}
	}
	if opt.Tenant != "" {
		if err := events.ValidateID(opt.Tenant); err != nil {
			return nil, fmt.Errorf("tenant: %w", err)
		}
	}
	im := &claudeImport{res: res, started: &events.SessionStarted{}}
	if err := im.read(r); err != nil {
		return nil, err
	}
	if res.Session == "" {
		return nil, ErrNoSession
	}
	im.prependStarted()
	if err := im.emit(opt); err != nil {
		return nil, err
	}
	return res, nil
}

// pendingEvent is an event the import will emit, before it is encoded.
type pendingEvent struct {
	line      int
	id        string
	typ       string
	at        time.Time
	msg       *events.Message
	compacted *events.SessionCompacted
	started   *events.SessionStarted
	kinds     []string
}

// claudeImport is one import's progress.
type claudeImport struct {
	res            *Result
	out            []*pendingEvent
	lastCompaction *pendingEvent
	// started describes the session (dev.recall.session.started): the
	// first working directory and assistant model, and the parent session —
	// Claude Code copies a resumed or forked session's history with the
	// earlier sessionId, so the first other valid sessionId is the parent.
	started    *events.SessionStarted
	sessionIDs []string
}

// read reads every line of the file.
func (im *claudeImport) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for line := 1; ; line++ {
		raw, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading line %d: %w", line, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) > 0 {
			im.line(line, raw)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

// line converts one record, or counts why it is skipped.
func (im *claudeImport) line(line int, raw []byte) {
	res := im.res
	res.Records++
	var rec record
	if jerr := json.Unmarshal(raw, &rec); jerr != nil {
		res.Skipped["malformed"]++
		res.Warnings = append(res.Warnings, fmt.Sprintf("line %d: not a JSON record: %v", line, jerr))
		return
	}
	im.noteSession(&rec)
	at, _ := time.Parse(time.RFC3339Nano, rec.Timestamp)
	id := rec.UUID
	if id == "" {
		sum := sha256.Sum256(raw)
		id = "line-" + hex.EncodeToString(sum[:12])
	}
	switch kind := recordKind(&rec); kind {
	case "message":
		msg, kinds := convertMessage(&rec, res.Skipped)
		switch {
		case msg == nil:
			res.Skipped["empty"]++
		case rec.IsCompactSummary:
			// The summary Claude Code put in the compacted context: not
			// conversation, but it tells the context's new size.
			if im.lastCompaction != nil && im.lastCompaction.compacted.PostTokens == 0 {
				im.lastCompaction.compacted.PostTokens = memory.EstimateContent(msg.Content)
			}
			res.Skipped["compact_summary"]++
		default:
			im.out = append(im.out, &pendingEvent{line: line, id: id, typ: events.TypeMessage, at: at, msg: msg, kinds: kinds})
		}
	case "compaction":
		pe := &pendingEvent{line: line, id: id, typ: events.TypeSessionCompacted, at: at, compacted: compacted(&rec), kinds: []string{"compaction"}}
		im.out = append(im.out, pe)
		im.lastCompaction = pe
	default:
		res.Skipped[kind]++
	}
}

// noteSession records the session facts a record carries: its session id
// (the first valid one names the import's session unless given), the
// working directory and the assistant model.
func (im *claudeImport) noteSession(rec *record) {
	if im.res.Session == "" && events.ValidateID(rec.SessionID) == nil {
		im.res.Session = rec.SessionID
	}
	if events.ValidateID(rec.SessionID) == nil && (len(im.sessionIDs) == 0 || im.sessionIDs[len(im.sessionIDs)-1] != rec.SessionID) {
		im.sessionIDs = append(im.sessionIDs, rec.SessionID)
	}
	if im.started.CWD == "" {
		im.started.CWD = rec.CWD
	}
	if im.started.Model == "" && rec.Message != nil && rec.Message.Role == events.RoleAssistant && !strings.HasPrefix(rec.Message.Model, "<") {
		im.started.Model = rec.Message.Model
	}
}

// compacted is a compact boundary record as dev.recall.session.compacted.
func compacted(rec *record) *events.SessionCompacted {
	c := &events.SessionCompacted{}
	m := rec.CompactMetadata
	if m == nil {
		return c
	}
	c.Trigger, c.PreTokens, c.PostTokens = m.Trigger, m.PreTokens, m.PostTokens
	if m.PreservedMessages != nil && len(m.PreservedMessages.UUIDs) > 0 {
		c.FirstKeptUUID = m.PreservedMessages.UUIDs[0]
		c.LastKeptUUID = m.PreservedMessages.UUIDs[len(m.PreservedMessages.UUIDs)-1]
	}
	if ps := m.PreservedSegment; ps != nil && ps.HeadUUID != "" && ps.TailUUID != "" {
		c.FirstKeptUUID, c.LastKeptUUID = ps.HeadUUID, ps.TailUUID
	}
	return c
}

// prependStarted puts dev.recall.session.started first, with the parent
// session: the first session id other than the file's own (which writes
// last).
func (im *claudeImport) prependStarted() {
	if n := len(im.sessionIDs); n > 0 {
		last := im.sessionIDs[n-1]
		for _, id := range im.sessionIDs {
			if id != last {
				im.started.ParentSession = id
				break
			}
		}
	}
	if im.started.ParentSession == im.res.Session {
		im.started.ParentSession = ""
	}
	if len(im.out) > 0 {
		first := im.out[0]
		im.out = append([]*pendingEvent{{line: first.line, id: "started", typ: events.TypeSessionStarted, at: first.at, started: im.started, kinds: []string{"started"}}}, im.out...)
	}
}

// emit encodes the events, keeping those ingest would accept.
func (im *claudeImport) emit(opt Options) error {
	res := im.res
	validateAs := opt.Tenant
	if validateAs == "" {
		validateAs = "default"
	}
	res.Events = make([]event.Event, 0, len(im.out))
	for _, pe := range im.out {
		e := event.New()
		e.SetID(res.Session + "-" + pe.id)
		e.SetSource(opt.Source)
		e.SetType(pe.typ)
		e.SetSubject(res.Session)
		if !pe.at.IsZero() {
			e.SetTime(pe.at)
		}
		var data any = pe.msg
		if pe.compacted != nil {
			data = pe.compacted
		}
		if pe.started != nil {
			data = pe.started
		}
		if err := e.SetData(event.ApplicationJSON, data); err != nil {
			return fmt.Errorf("line %d: encoding data: %w", pe.line, err)
		}
		if opt.Tenant != "" {
			e.SetExtension(events.ExtTenant, opt.Tenant)
		}
		if _, err := events.ValidateIngest(e, validateAs); err != nil {
			res.Skipped["invalid"]++
			res.Warnings = append(res.Warnings, fmt.Sprintf("line %d: record would be rejected: %v", pe.line, err))
			continue
		}
		if opt.Tenant == "" {
			e.SetExtension(events.ExtTenant, nil) // ValidateIngest stamped it
		}
		for _, k := range pe.kinds {
			res.Counts[k]++
		}
		res.Events = append(res.Events, e)
	}
	return nil
}

// recordKind classifies a record: "message", "compaction", or the kind it
// is skipped as.
func recordKind(rec *record) string {
	switch rec.Type {
	case "user", "assistant":
		switch {
		case rec.Message == nil:
			return rec.Type + ":no_message"
		case rec.IsMeta:
			return "meta"
		case rec.IsAPIErrorMessage || rec.Message.Model == "<synthetic>":
			return "synthetic"
		}
		return "message"
	case "system":
		if rec.Subtype == "compact_boundary" {
			return "compaction"
		}
		if rec.Subtype == "" {
			return "system"
		}
		return "system:" + rec.Subtype
	case "":
		return "untyped"
	}
	return rec.Type
}

// convertMessage maps a user or assistant record to a Message, dropping
// content blocks Recall does not know (counted in skipped). It returns nil
// when no content is left, and the kinds to count for the record.
func convertMessage(rec *record, skipped map[string]int) (*events.Message, []string) {
	var content events.Content
	if len(rec.Message.Content) > 0 {
		if err := json.Unmarshal(rec.Message.Content, &content); err != nil {
			skipped["block:undecodable"]++
			return nil, nil
		}
	}
	content = keepKnown(content, skipped)
	if len(content) == 0 {
		return nil, nil
	}
	role := rec.Message.Role
	if role == "" {
		role = rec.Type
	}
	m := &events.Message{UUID: rec.UUID, Role: role, Content: content, MessageID: rec.Message.ID, Model: rec.Message.Model}
	if rec.ParentUUID != nil {
		m.ParentUUID = *rec.ParentUUID
	} else if rec.LogicalParentUUID != "" {
		m.ParentUUID = rec.LogicalParentUUID
	}
	if rec.Message.StopReason != nil {
		m.StopReason = *rec.Message.StopReason
	}
	if role == events.RoleAssistant && rec.Message.Usage != nil {
		u := *rec.Message.Usage
		m.Usage = &u
	}
	kinds := make([]string, 0, 4)
	if rec.IsSidechain {
		m.QuerySource, m.AgentID = events.QuerySubagent, rec.AgentID
		kinds = append(kinds, "subagent")
	}
	switch {
	case role == events.RoleAssistant:
		kinds = append(kinds, "assistant")
	case hasBlock(content, events.BlockToolResult):
		kinds = append(kinds, "tool_result")
	default:
		kinds = append(kinds, "user")
	}
	for _, b := range content {
		switch b.Type {
		case events.BlockToolUse, events.BlockThinking, events.BlockText:
			kinds = append(kinds, b.Type)
		case events.BlockToolResult:
			if b.IsError {
				kinds = append(kinds, "tool_error")
			}
		}
	}
	return m, kinds
}

func hasBlock(c events.Content, typ string) bool {
	for _, b := range c {
		if b.Type == typ {
			return true
		}
	}
	return false
}

var knownBlocks = map[string]bool{
	events.BlockText: true, events.BlockThinking: true, events.BlockRedactedThinking: true,
	events.BlockToolUse: true, events.BlockToolResult: true, events.BlockImage: true, events.BlockDocument: true,
}

// keepKnown drops blocks of unknown types, recursively in tool results.
func keepKnown(c events.Content, skipped map[string]int) events.Content {
	out := c[:0]
	for _, b := range c {
		if !knownBlocks[b.Type] {
			skipped["block:"+strings.ToLower(b.Type)]++
			continue
		}
		if b.Type == events.BlockToolResult && len(b.Content) > 0 {
			b.Content = keepKnown(b.Content, skipped)
		}
		out = append(out, b)
	}
	return out
}
