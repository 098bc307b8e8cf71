package watch

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// notifier wakes the Watcher when a transcript is written or a file or
// directory appears, so that polling is only the fallback. A nil notifier
// (notifications unavailable or off) never wakes it. It is used by the
// Watcher's goroutine only.
type notifier struct {
	fw      *fsnotify.Watcher
	watched map[string]bool
	log     *slog.Logger
}

// newNotifier returns a notifier, or nil when the system has none to give.
func newNotifier(log *slog.Logger) *notifier {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		log.Warn("watch: no file notifications; polling only", "err", err)
		return nil
	}
	return &notifier{fw: fw, watched: map[string]bool{}, log: log}
}

// watch adds dir to the watched directories (once).
func (n *notifier) watch(dir string) {
	if n == nil || n.watched[dir] {
		return
	}
	if err := n.fw.Add(dir); err != nil {
		n.log.Debug("watch: cannot be notified of a directory; it is polled", "dir", dir, "err", err)
		return
	}
	n.watched[dir] = true
}

func (n *notifier) close() {
	if n != nil {
		n.fw.Close()
	}
}

// change is what woke the Watcher: a full scan, or some files to follow.
type change struct {
	full  bool
	paths []string
}

// wait returns after d, or as soon as a notification arrives (unless
// quiet: after a failure only the wait counts), with what changed; ok is
// false once ctx is done. A timeout asks for a full scan.
func (n *notifier) wait(ctx context.Context, d time.Duration, quiet bool) (c change, ok bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	var evs <-chan fsnotify.Event
	var errs <-chan error
	if n != nil {
		evs, errs = n.fw.Events, n.fw.Errors
	}
	for {
		select {
		case <-ctx.Done():
			return c, false
		case <-t.C:
			return change{full: true}, true
		case err := <-errs:
			n.log.Debug("watch: file notifications", "err", err) // an overflow: scan all
			c.full = true
		case ev := <-evs:
			n.add(&c, ev)
		}
		if !quiet && (c.full || len(c.paths) > 0) {
			n.drain(&c)
			return c, true
		}
		c = change{}
	}
}

// drain adds the notifications already queued.
func (n *notifier) drain(c *change) {
	for {
		select {
		case ev := <-n.fw.Events:
			n.add(c, ev)
		case <-n.fw.Errors:
			c.full = true
		default:
			return
		}
	}
}

// add notes one notification: a transcript written is followed alone;
// anything created, renamed or removed asks for a full scan.
func (n *notifier) add(c *change, ev fsnotify.Event) {
	switch {
	case ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
		c.full = true
	case ev.Has(fsnotify.Write) && strings.HasSuffix(ev.Name, ".jsonl"):
		p := filepath.Clean(ev.Name)
		for _, q := range c.paths {
			if q == p {
				return
			}
		}
		c.paths = append(c.paths, p)
	}
}
