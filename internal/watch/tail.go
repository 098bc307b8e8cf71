package watch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/pkg/events"
)

// Sender sends events to Recall and says how they were settled; *Client is
// one.
type Sender interface {
	Send(ctx context.Context, evs []event.Event) (Outcome, error)
}

// Tail reads the new whole lines of Claude Code transcripts and sends
// their events. It holds no state of its own: the caller keeps each file's
// FileState. It is safe for concurrent use on different files.
type Tail struct {
	Sender Sender
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
		o, err := t.Sender.Send(ctx, evs)
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
