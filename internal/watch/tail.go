package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// Publisher stores events in Recall and returns each one's result, in
// order, once all are settled or its retries ended (pkg/client's HTTP, or
// its NATS Client).
type Publisher interface {
	PublishBatch(ctx context.Context, evs []event.Event) ([]client.Result, error)
}

// Outcome sums how the events of a chunk were settled.
type Outcome struct {
	Stored, Duplicates int
	// Rejected are the events Recall refused for good (invalid, too
	// large…): reported, not retried.
	Rejected []events.EventResult
}

// send publishes evs and sums their outcome. An event refused for good
// is Rejected; any other failure (retries ended, no answer) is the error.
func send(ctx context.Context, p Publisher, evs []event.Event) (Outcome, error) {
	var o Outcome
	res, err := p.PublishBatch(ctx, evs)
	if len(res) != len(evs) {
		return o, err
	}
	for i, r := range res {
		var ee *client.EventError
		switch {
		case r.Err == nil && r.Duplicate:
			o.Duplicates++
		case r.Err == nil:
			o.Stored++
		case errors.As(r.Err, &ee) && !client.Retryable(r.Err):
			o.Rejected = append(o.Rejected, ee.Result)
		default:
			return o, fmt.Errorf("sending event %s: %w", evs[i].ID(), r.Err)
		}
	}
	return o, nil
}

// Tail reads the new whole lines of Claude Code transcripts and sends
// their events. It holds no state of its own: the caller keeps each file's
// FileState. It is safe for concurrent use on different files.
type Tail struct {
	// Sender stores the events.
	Sender Publisher
	// Tenant, when set, is stamped on the events (importer.Options).
	Tenant string
	// Source is the events' CloudEvents source (importer.DefaultSource
	// when empty).
	Source string
	// User, when set, is the user_id of the session.started events: the
	// user whose long-term memory the sessions feed (and own).
	User string
	// MaxChunk bounds the bytes of lines imported and sent together
	// (1 MiB when 0); a chunk's offset advances once all its events are
	// settled.
	MaxChunk int
	// Progress, when set, is called after every settled chunk with the
	// file's new state and the chunk's outcome.
	Progress func(path string, st FileState, o Outcome)
	// Log receives the importer's warnings at debug level (nil: none).
	Log *slog.Logger
}

// SessionOf returns the session id of a transcript: its file name without
// ".jsonl", which Claude Code names after the session.
func SessionOf(path string) (string, error) {
	name := filepath.Base(path)
	if !strings.HasSuffix(name, ".jsonl") {
		return "", fmt.Errorf("%s: not a .jsonl transcript", path)
	}
	id := strings.TrimSuffix(name, ".jsonl")
	if err := events.ValidateID(id); err != nil {
		return "", fmt.Errorf("%s: file name is no session id: %w", path, err)
	}
	return id, nil
}

// CatchUp sends the whole lines of the transcript at path past st.Offset
// and returns the new state. A file whose inode differs from st.Inode, or
// that is shorter than st.Offset (rotated, replaced or truncated), is read
// again from 0 — its events' ids make that safe. A last line without its
// newline is left for a later call. On an error (the file, or Send: ctx
// ended, or Recall refused the requests) the returned state has advanced
// past the chunks already settled, never further.
func (t *Tail) CatchUp(ctx context.Context, path string, st FileState) (FileState, Outcome, error) {
	var total Outcome
	session, err := SessionOf(path)
	if err != nil {
		return st, total, err
	}
	f, err := os.Open(path)
	if err != nil {
		return st, total, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return st, total, err
	}
	ino, size := inodeOf(fi), fi.Size()
	if (st.Inode != 0 && ino != 0 && st.Inode != ino) || size < st.Offset {
		st = FileState{}
	}
	st.Inode = ino
	for st.Offset < size {
		chunk, err := readLines(f, st.Offset, size, t.maxChunk())
		if err != nil || len(chunk) == 0 {
			return st, total, err
		}
		evs, started, err := t.events(session, chunk, st.Started)
		if err != nil {
			return st, total, err
		}
		o, err := send(ctx, t.Sender, evs)
		total.add(o)
		if err != nil {
			return st, total, err
		}
		st.Offset += int64(len(chunk))
		st.Started = st.Started || started
		if t.Progress != nil {
			t.Progress(path, st, o)
		}
	}
	return st, total, nil
}

func (t *Tail) maxChunk() int {
	if t.MaxChunk > 0 {
		return t.MaxChunk
	}
	return 1 << 20
}

// events imports a chunk of whole lines. The importer puts a
// session.started event first in every import; it is kept only while the
// file's has not been settled (started reports that it is in evs).
func (t *Tail) events(session string, chunk []byte, startedSent bool) (evs []event.Event, started bool, err error) {
	res, err := importer.ClaudeCode(bytes.NewReader(chunk), importer.Options{Tenant: t.Tenant, Session: session, Source: t.Source})
	if err != nil {
		return nil, false, fmt.Errorf("importing %s: %w", session, err)
	}
	if t.Log != nil {
		for _, w := range res.Warnings {
			t.Log.Debug("skipped a transcript line", "session", session, "warning", w)
		}
	}
	evs = res.Events[:0]
	for _, e := range res.Events {
		if e.Type() == events.TypeSessionStarted {
			if startedSent {
				continue
			}
			started = true
			if err := t.stampUser(&e); err != nil {
				return nil, false, err
			}
		}
		evs = append(evs, e)
	}
	return evs, started, nil
}

// stampUser sets t.User as the user_id of a session.started event.
func (t *Tail) stampUser(e *event.Event) error {
	if t.User == "" {
		return nil
	}
	var st events.SessionStarted
	if err := e.DataAs(&st); err != nil {
		return fmt.Errorf("reading session.started: %w", err)
	}
	st.UserID = t.User
	if err := e.SetData(event.ApplicationJSON, st); err != nil {
		return fmt.Errorf("encoding session.started: %w", err)
	}
	return nil
}

// add sums o into total.
func (total *Outcome) add(o Outcome) {
	total.Stored += o.Stored
	total.Duplicates += o.Duplicates
	total.Rejected = append(total.Rejected, o.Rejected...)
}
