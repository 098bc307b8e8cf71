// Package watch follows Claude Code's live transcripts
// (~/.claude/projects/<project>/<session>.jsonl) and sends their records to
// Recall's HTTP edge as they are written, through internal/importer.
//
// Guarantees: a line is sent only once it is whole (ends with '\n'); a
// file's offset advances only past lines whose events Recall settled
// (stored, or rejected for good with a 4xx, which is reported and
// skipped), and the offsets survive restarts in a state file. Sending again
// is always safe within Recall's dedup window (RECALL_DEDUP_WINDOW): event
// ids are derived from the session and the record uuids. A file that is
// replaced (new inode) or shrinks is read again from 0.
//
// Not guaranteed: a file read again from 0 more than the dedup window after
// its first reading is stored twice; a change the file notifications
// miss (or all changes, where there are none) is seen at the next poll;
// only DIR/*.jsonl and DIR/*/*.jsonl are followed (subagent transcripts in
// deeper directories are not).
package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/recallhq/recall/pkg/retry"
)

// Config configures a Watcher.
type Config struct {
	// Dir holds Claude Code's project directories (~/.claude/projects) —
	// or is one of them.
	Dir string
	// StatePath is the state file (offsets), saved atomically.
	StatePath string
	// Interval is how often the files are polled (1 s when 0) — at least
	// 10 s while file notifications work; after a failure the wait grows
	// to 30 s.
	Interval time.Duration
	// PollOnly turns file notifications off.
	PollOnly bool
	// Tail reads and sends; its Progress is the Watcher's.
	Tail Tail
	// Log receives warnings (nil: discarded).
	Log *slog.Logger
}

// Stats is what a Watcher did since it started.
type Stats struct {
	// Sessions is the number of transcripts followed.
	Sessions int
	// Stored, Duplicates and Rejected count events sent.
	Stored, Duplicates, Rejected int
	// LastError is the last failure, empty when none.
	LastError string
}

// Watcher follows the transcripts under one directory. Stats and
// SetError are safe for concurrent use; Run is called once.
type Watcher struct {
	cfg     Config
	log     *slog.Logger
	state   *State
	dirty   bool
	notify  *notifier        // nil: polling only
	seen    map[string]int64 // size at which a file had no whole line left
	skipped map[string]bool  // files that are no transcripts (warned once)

	mu    sync.Mutex
	stats Stats
}

// New returns a Watcher of cfg.Dir starting from the offsets saved in
// cfg.StatePath.
func New(cfg Config) (*Watcher, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if dir, err := filepath.Abs(cfg.Dir); err == nil {
		cfg.Dir = dir
	}
	st, err := LoadState(cfg.StatePath)
	if err != nil {
		return nil, err
	}
	w := &Watcher{cfg: cfg, log: cfg.Log, state: st, seen: map[string]int64{}, skipped: map[string]bool{}}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.cfg.Tail.Progress = w.progress
	return w, nil
}

// Stats returns the counts so far.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// SetError records err as the last error (an HTTP client's OnRetry).
func (w *Watcher) SetError(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.LastError = err.Error()
}

// Run follows the directory until ctx ends, sending what Claude Code
// appends — woken by file notifications, with a full poll every
// Config.Interval (every 10 s or Interval, whichever is longer, while
// notifications work) — and saves the offsets after every round that moved
// one and when it stops. It returns nil on a clean stop (ctx done), or an
// error if the final save fails.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.cfg.PollOnly {
		w.notify = newNotifier(w.log)
		defer func() { w.notify.close(); w.notify = nil }()
	}
	poll := w.cfg.Interval
	if w.notify != nil {
		poll = max(poll, 10*time.Second)
	}
	b := retry.Policy{First: w.cfg.Interval, Max: 30 * time.Second}.Backoff()
	c := change{full: true}
	for {
		err := w.round(ctx, c)
		wait, failed := poll, err != nil && ctx.Err() == nil
		if failed {
			w.SetError(err)
			w.log.Warn("watch: sending transcripts failed; retrying", "err", err)
			wait = b.Next()
		} else if err == nil {
			b.Reset()
		}
		if serr := w.save(); serr != nil {
			w.SetError(serr)
			w.log.Warn("watch: saving offsets failed", "err", serr)
		}
		var ok bool
		if c, ok = w.notify.wait(ctx, wait, failed); !ok {
			return w.save()
		}
	}
}

// round scans everything, or follows the files that changed.
func (w *Watcher) round(ctx context.Context, c change) error {
	if c.full {
		return w.Scan(ctx)
	}
	for _, p := range c.paths {
		if _, err := SessionOf(p); err != nil || w.skipped[p] {
			continue
		}
		if err := w.follow(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// Scan sends what every transcript under the directory has past its
// offset, once. It stops at the first failure to send.
func (w *Watcher) Scan(ctx context.Context) error {
	paths, err := listTranscripts(w.cfg.Dir, w.notify.watch)
	if err != nil {
		return err
	}
	n := 0
	for _, p := range paths {
		if _, err := SessionOf(p); err != nil {
			if !w.skipped[p] {
				w.skipped[p] = true
				w.log.Warn("watch: not following a file", "err", err)
			}
			continue
		}
		paths[n], n = p, n+1
	}
	paths = paths[:n]
	w.mu.Lock()
	w.stats.Sessions = n
	w.mu.Unlock()
	for _, p := range paths {
		if err := w.follow(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// follow sends one file's new lines, unless it has not changed since it
// had none.
func (w *Watcher) follow(ctx context.Context, path string) error {
	st := w.state.Files[path]
	ino, size, err := statFile(path)
	if err != nil || (ino == st.Inode && (size == st.Offset || size == w.seen[path])) {
		return nil // gone since listed, or nothing new
	}
	nst, _, err := w.cfg.Tail.CatchUp(ctx, path, st)
	if nst != st {
		w.state.Files[path], w.dirty = nst, true
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	w.seen[path] = size
	return nil
}

// progress counts a settled chunk and keeps its file's state.
func (w *Watcher) progress(path string, st FileState, o Outcome) {
	w.state.Files[path], w.dirty = st, true
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Stored += o.Stored
	w.stats.Duplicates += o.Duplicates
	w.stats.Rejected += len(o.Rejected)
	for _, r := range o.Rejected {
		w.stats.LastError = fmt.Sprintf("%s: event %s rejected: %d %s %s", filepath.Base(path), r.ID, r.Status, r.Field, r.Error)
		w.log.Warn("watch: Recall rejected an event; skipped", "file", path, "id", r.ID, "status", r.Status, "field", r.Field, "error", r.Error)
	}
}

// save writes the state when it changed.
func (w *Watcher) save() error {
	if !w.dirty {
		return nil
	}
	if err := w.state.Save(w.cfg.StatePath); err != nil {
		return err
	}
	w.dirty = false
	return nil
}

// listTranscripts returns dir/*.jsonl and dir/*/*.jsonl, calling onDir
// with each directory before listing it; a missing dir has none (Claude
// Code creates it on its first session).
func listTranscripts(dir string, onDir func(string)) ([]string, error) {
	onDir(dir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing transcripts: %w", err)
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			onDir(p)
			sub, err := os.ReadDir(p)
			if err != nil {
				continue // removed since, or unreadable
			}
			for _, s := range sub {
				if s.Type().IsRegular() && strings.HasSuffix(s.Name(), ".jsonl") {
					out = append(out, filepath.Join(p, s.Name()))
				}
			}
		case e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".jsonl"):
			out = append(out, p)
		}
	}
	return out, nil
}
