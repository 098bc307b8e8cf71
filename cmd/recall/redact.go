package main

import (
	"io"
	"log/slog"
	"os"

	"github.com/recallhq/recall/internal/telemetry"
)

// The CLI's one masking (issue 43, F4): every command's stdout, the error
// main prints, and the loggers of the commands go through telemetry's
// Redact, so a password in a URL (RECALL_URL=http://user:pass@host,
// nats://user:pass@host) or a token reaches no terminal or log.

// redactingWriter masks secrets in every Write (commands write whole
// lines, so a secret is never split across two writes).
type redactingWriter struct{ w io.Writer }

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, telemetry.Redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// cliLog is a command's logger on stderr at level, secrets masked.
func cliLog(level slog.Level) *slog.Logger {
	return slog.New(telemetry.NewRedactHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
}
