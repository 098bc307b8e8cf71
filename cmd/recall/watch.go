package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/recallhq/recall/internal/watch"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// edgeFlags are the flags of the commands that talk to Recall's HTTP edge
// for Claude Code (watch, hook).
type edgeFlags struct {
	url, token, state, user, tenant *string
}

func addEdgeFlags(fs *flag.FlagSet) edgeFlags {
	return edgeFlags{
		url:    fs.String("recall-url", envOr("RECALL_URL", client.DefaultURL), "Recall's HTTP edge (default $RECALL_URL or "+client.DefaultURL+")"),
		token:  fs.String("token", os.Getenv("RECALL_TOKEN"), "bearer token for the HTTP edge (default $RECALL_TOKEN)"),
		state:  fs.String("state", defaultWatchState(), "the watcher's offsets, shared by recall watch and recall hook"),
		user:   fs.String("user", os.Getenv("RECALL_USER"), "the user the sessions belong to: user_id of their session.started, and whose long-term memory SessionStart adds (default $RECALL_USER)"),
		tenant: fs.String("tenant", "", "assert this tenant on the events (the token decides it)"),
	}
}

// validate checks the ids given.
func (f edgeFlags) validate() error {
	if *f.user != "" {
		if err := events.ValidateID(*f.user); err != nil {
			return fmt.Errorf("%w: --user: %v", errUsage, err)
		}
	}
	if *f.tenant != "" {
		if err := events.ValidateID(*f.tenant); err != nil {
			return fmt.Errorf("%w: --tenant: %v", errUsage, err)
		}
	}
	return nil
}

// client is the edge's HTTP client: retrying until ctx ends (attempts 0)
// or at most attempts times.
func (f edgeFlags) client(attempts int, onRetry func(error)) (*client.HTTP, error) {
	c, err := client.NewHTTP(client.HTTPConfig{URL: *f.url, Token: *f.token, Attempts: attempts, Window: -1, OnRetry: onRetry})
	if err != nil {
		return nil, fmt.Errorf("%w: --recall-url: %v", errUsage, err)
	}
	return c, nil
}

// defaultWatchState is $XDG_STATE_HOME/recall/watch.json, else
// ~/.local/state/recall/watch.json.
func defaultWatchState() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "recall", "watch.json")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "recall", "watch.json")
}

func runWatch(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("watch")
	edge := addEdgeFlags(fs)
	interval := fs.Duration("interval", time.Second, "how often the transcripts are polled (at least every 10s while file notifications work)")
	pollOnly := fs.Bool("poll-only", false, "no file notifications: poll every --interval")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: recall watch [DIR] [--recall-url URL] [--token TOKEN] [--user U] [--state PATH]\n\nDIR defaults to ~/.claude/projects.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, reorderFlags(args)); err != nil {
		return err
	}
	if err := edge.validate(); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return fmt.Errorf("%w: watch takes at most one DIR", errUsage)
	}
	dir := fs.Arg(0)
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("finding ~/.claude/projects: %w (pass DIR)", err)
		}
		dir = filepath.Join(home, ".claude", "projects")
	}
	log := cliLog(slog.LevelWarn)
	var w *watch.Watcher
	c, err := edge.client(0, func(err error) { w.SetError(err) })
	if err != nil {
		return err
	}
	w, err = watch.New(watch.Config{Dir: dir, StatePath: *edge.state, Interval: *interval, PollOnly: *pollOnly, Log: log,
		Tail: watch.Tail{Sender: c, Tenant: *edge.tenant, User: *edge.user, Log: log}})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "recall watch: following %s, sending to %s, offsets in %s\n", dir, c.URL(), *edge.state)
	stop := printWatchStats(os.Stderr, w, time.Second)
	err = w.Run(ctx)
	stop()
	st := w.Stats()
	fmt.Fprintf(stdout, "Stopped: %d sessions followed, %d events stored (%d duplicates, %d rejected)\n", st.Sessions, st.Stored, st.Duplicates, st.Rejected)
	return err
}

// printWatchStats writes a status line to f whenever w's stats changed, at
// most every period, until stop is called.
func printWatchStats(f *os.File, w *watch.Watcher, period time.Duration) (stop func()) {
	fi, err := f.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(period)
		defer t.Stop()
		var last watch.Stats
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprintln(f)
				}
				return
			case <-t.C:
			}
			if st := w.Stats(); st != last {
				last = st
				writeWatchStats(f, st, tty)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func writeWatchStats(w io.Writer, st watch.Stats, tty bool) {
	lastErr := st.LastError
	if lastErr == "" {
		lastErr = "none"
	}
	line := fmt.Sprintf("recall watch: %d sessions followed, %d events sent (%d new, %d duplicates, %d rejected), last error: %s",
		st.Sessions, st.Stored+st.Duplicates+st.Rejected, st.Stored, st.Duplicates, st.Rejected, lastErr)
	if tty {
		fmt.Fprint(w, "\r"+line+"\x1b[K")
		return
	}
	fmt.Fprintln(w, line)
}
