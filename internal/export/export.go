// Package export gives a session's records, notes and index entry, and a
// user's long-term memory, back to the platform that owns them.
//
// A session's records are written as Claude Code JSONL (the format
// internal/importer reads), so an export round-trips through `recall
// replay`: conversation messages become "user"/"assistant" records linked
// by uuid/parentUuid, compactions become "system" compact_boundary
// records; the session's start (its working directory and model) is
// carried on every record, as Claude Code writes it. Lifecycle records
// the format has no place for (session.ended, compaction requests) are
// left out and counted. Claim-checked records are exported whole.
package export

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// ErrNotFound means there is nothing to export: no record, no notes, no
// memory.
var ErrNotFound = errors.New("nothing stored")

// ccRecord is one Claude Code JSONL record as the importer reads it.
type ccRecord struct {
	Type            string     `json:"type"`
	Subtype         string     `json:"subtype,omitempty"`
	UUID            string     `json:"uuid"`
	ParentUUID      *string    `json:"parentUuid"`
	SessionID       string     `json:"sessionId"`
	CWD             string     `json:"cwd,omitempty"`
	Timestamp       string     `json:"timestamp,omitempty"`
	IsSidechain     bool       `json:"isSidechain"`
	AgentID         string     `json:"agentId,omitempty"`
	Message         *ccMessage `json:"message,omitempty"`
	CompactMetadata *ccCompact `json:"compactMetadata,omitempty"`
}

type ccMessage struct {
	ID         string         `json:"id,omitempty"`
	Role       string         `json:"role"`
	Model      string         `json:"model,omitempty"`
	Content    events.Content `json:"content"`
	StopReason *string        `json:"stop_reason,omitempty"`
	Usage      *events.Usage  `json:"usage,omitempty"`
}

type ccCompact struct {
	Trigger          string `json:"trigger,omitempty"`
	PreTokens        int64  `json:"preTokens"`
	PostTokens       int64  `json:"postTokens"`
	PreservedSegment *struct {
		HeadUUID string `json:"headUuid"`
		TailUUID string `json:"tailUuid"`
	} `json:"preservedSegment,omitempty"`
}

// Stats counts what an export wrote and left out, by kind.
type Stats struct {
	Records int            `json:"records"`
	Skipped map[string]int `json:"skipped,omitempty"`
}

// SessionJSONL writes the session's records to w as Claude Code JSONL,
// reading the transcript stored in layout's shards over nc in bounded
// batches. start, when not nil, runs once before the first line is written
// (an HTTP handler sets its headers there); a session without records is
// ErrNotFound and writes nothing.
func SessionJSONL(ctx context.Context, nc *nats.Conn, layout events.Layout, tenant, session string, w io.Writer, start func()) (Stats, error) {
	st := Stats{Skipped: map[string]int{}}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	var cwd, model string
	var werr error
	err := transcript.NewReader(nc, layout).WithBatch(64).Scan(ctx, tenant, session, 0, 0, func(rec transcript.Record) bool {
		if rec.Started != nil {
			cwd, model = rec.Started.CWD, rec.Started.Model
		}
		out, ok := convert(&rec, session, cwd, model)
		if !ok {
			st.Skipped[rec.Type()]++
			return true
		}
		if st.Records == 0 && start != nil {
			start()
		}
		st.Records++
		werr = enc.Encode(out)
		return werr == nil
	})
	if err == nil {
		err = werr
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return st, fmt.Errorf("exporting the transcript: %w", err)
	}
	if st.Records == 0 {
		return st, ErrNotFound
	}
	return st, nil
}

// convert maps a record to Claude Code's form; ok is false for records the
// format has no place for.
func convert(rec *transcript.Record, session, cwd, model string) (ccRecord, bool) {
	out := ccRecord{SessionID: session, CWD: cwd, UUID: rec.Event.ID()}
	if !rec.Event.Time().IsZero() {
		out.Timestamp = rec.Event.Time().UTC().Format(time.RFC3339Nano)
	}
	switch {
	case rec.Message != nil:
		m := rec.Message
		out.Type, out.UUID = m.Role, m.UUID
		if m.ParentUUID != "" {
			out.ParentUUID = &m.ParentUUID
		}
		out.IsSidechain = m.QuerySource == events.QuerySubagent
		out.AgentID = m.AgentID
		cm := &ccMessage{ID: m.MessageID, Role: m.Role, Model: m.Model, Content: m.Content, Usage: m.Usage}
		if cm.Model == "" && m.Role == events.RoleAssistant {
			cm.Model = model
		}
		if m.StopReason != "" {
			cm.StopReason = &m.StopReason
		}
		out.Message = cm
		return out, true
	case rec.Compacted != nil:
		c := rec.Compacted
		out.Type, out.Subtype = "system", "compact_boundary"
		out.CompactMetadata = &ccCompact{Trigger: c.Trigger, PreTokens: c.PreTokens, PostTokens: c.PostTokens}
		if c.FirstKeptUUID != "" && c.LastKeptUUID != "" {
			out.CompactMetadata.PreservedSegment = &struct {
				HeadUUID string `json:"headUuid"`
				TailUUID string `json:"tailUuid"`
			}{c.FirstKeptUUID, c.LastKeptUUID}
		}
		return out, true
	}
	return out, false
}

// Notes is a session's notes part: its memory record and index entry
// (nil when it has none).
type Notes struct {
	Tenant         string               `json:"tenant"`
	Session        string               `json:"session"`
	Memory         *events.MemoryRecord `json:"memory,omitempty"`
	MemoryRevision uint64               `json:"memory_revision,omitempty"`
	Index          *events.SessionIndex `json:"index,omitempty"`
}

// SessionNotes reads the session's memory record and index entry; a
// session with neither is ErrNotFound.
func SessionNotes(ctx context.Context, js jetstream.JetStream, tenant, session string) (Notes, error) {
	n := Notes{Tenant: tenant, Session: session}
	mkv, err := js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		return n, fmt.Errorf("opening %s: %w", events.BucketMemory, err)
	}
	rec, rev, err := store.NewMemory(mkv).Get(ctx, tenant, session)
	if err != nil {
		return n, err
	}
	if rev > 0 {
		n.Memory, n.MemoryRevision = &rec, rev
	}
	ikv, err := js.KeyValue(ctx, events.BucketIndex)
	if err != nil {
		return n, fmt.Errorf("opening %s: %w", events.BucketIndex, err)
	}
	e, err := ikv.Get(ctx, events.MemoryKey(tenant, session))
	switch {
	case err == nil:
		var idx events.SessionIndex
		if err := json.Unmarshal(e.Value(), &idx); err != nil {
			return n, fmt.Errorf("decoding the index entry: %w", err)
		}
		n.Index = &idx
	case !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted):
		return n, fmt.Errorf("reading the index entry: %w", err)
	}
	if n.Memory == nil && n.Index == nil {
		return n, ErrNotFound
	}
	return n, nil
}
