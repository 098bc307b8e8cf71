package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/recallhq/recall/internal/telemetry"
)

// logFileName is the file in the data directory that `recall up` writes
// the services' logs to unless -v.
const logFileName = "recall.log"

// upLogger returns the services' logger of `recall up`. With verbose every
// record goes to stderr, as the services log alone. Otherwise records go to
// the log file in dataDir (path; appended to) and only warnings and errors
// also to stderr, so the banner is not lost among them; quiet stops those
// (a stop's expected warnings, such as disconnects, then go to the file
// only). closeFn closes the file.
func upLogger(stderr io.Writer, dataDir string, verbose bool, tc telemetry.Config) (log *slog.Logger, path string, quiet, closeFn func(), err error) {
	if verbose {
		return telemetry.NewLogger(stderr, tc), "", func() {}, func() {}, nil
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, "", nil, nil, fmt.Errorf("creating the data directory: %w", err)
	}
	path = filepath.Join(dataDir, logFileName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, "", nil, nil, fmt.Errorf("opening the log file: %w", err)
	}
	warn := tc
	warn.LogLevel = slog.LevelWarn.String()
	off := new(atomic.Bool)
	h := teeHandler{telemetry.NewLogger(f, tc).Handler(), gatedHandler{telemetry.NewLogger(stderr, warn).Handler(), off}}
	return slog.New(h), path, func() { off.Store(true) }, func() { f.Close() }, nil
}

// gatedHandler passes records on until off is set.
type gatedHandler struct {
	slog.Handler
	off *atomic.Bool
}

func (g gatedHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !g.off.Load() && g.Handler.Enabled(ctx, l)
}

func (g gatedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return gatedHandler{g.Handler.WithAttrs(as), g.off}
}

func (g gatedHandler) WithGroup(name string) slog.Handler {
	return gatedHandler{g.Handler.WithGroup(name), g.off}
}

// teeHandler sends each record to every handler that is enabled for it.
type teeHandler []slog.Handler

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range t {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	for _, h := range t {
		if h.Enabled(ctx, r.Level) {
			errs = append(errs, h.Handle(ctx, r.Clone()))
		}
	}
	return errors.Join(errs...)
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make(teeHandler, len(t))
	for i, h := range t {
		out[i] = h.WithAttrs(as)
	}
	return out
}

func (t teeHandler) WithGroup(name string) slog.Handler {
	out := make(teeHandler, len(t))
	for i, h := range t {
		out[i] = h.WithGroup(name)
	}
	return out
}
