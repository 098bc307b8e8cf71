package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/recallhq/recall/internal/telemetry"
)

// logFileName is the file in the data directory that `recall up` writes
// the services' logs to unless -v.
const logFileName = "recall.log"

// upLogger returns the services' logger of `recall up`. With verbose every
// record goes to stderr, as the services log alone. Otherwise records go to
// the log file in dataDir (path; appended to) and only warnings and errors
// also to stderr, so the banner is not lost among them. closeFn closes the
// file.
func upLogger(stderr io.Writer, dataDir string, verbose bool, tc telemetry.Config) (log *slog.Logger, path string, closeFn func(), err error) {
	if verbose {
		return telemetry.NewLogger(stderr, tc), "", func() {}, nil
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, "", nil, fmt.Errorf("creating the data directory: %w", err)
	}
	path = filepath.Join(dataDir, logFileName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, "", nil, fmt.Errorf("opening the log file: %w", err)
	}
	warn := tc
	warn.LogLevel = slog.LevelWarn.String()
	h := teeHandler{telemetry.NewLogger(f, tc).Handler(), telemetry.NewLogger(stderr, warn).Handler()}
	return slog.New(h), path, func() { f.Close() }, nil
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
