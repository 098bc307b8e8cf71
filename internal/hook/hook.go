// Package hook answers Claude Code's hooks for Recall (recall hook): one
// hook input as JSON on stdin, at most one JSON answer on stdout.
//
//   - SessionStart: the user's long-term memory (GET
//     /v1/users/{user}/memory) as additionalContext.
//   - UserPromptSubmit: the prompt's @@references resolved (POST
//     /v1/resolve) and their context message as additionalContext.
//   - PreCompact, Stop, SubagentStop, SessionEnd: everything written so far
//     to transcript_path is sent to Recall before the hook returns, from
//     the offset recall watch saved (internal/watch), and the new offset is
//     saved for it.
//
// A hook must never hold Claude Code up or break it: every call is bounded
// by Config.Timeout, and on any failure (Recall down, a bad input) Run
// prints nothing and returns the error for the caller to log — the hook
// still exits 0. Other events are ignored.
package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/recallhq/recall/internal/watch"
	"github.com/recallhq/recall/pkg/client"
)

// Input is the part of a hook's stdin JSON that Recall reads.
type Input struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	HookEventName  string `json:"hook_event_name"`
	CWD            string `json:"cwd"`
	// Prompt is UserPromptSubmit's prompt.
	Prompt string `json:"prompt"`
	// Source is SessionStart's reason: startup, resume, clear or compact.
	Source string `json:"source"`
}

// Output is a hook's answer that adds context.
type Output struct {
	HookSpecificOutput Specific `json:"hookSpecificOutput"`
}

// Specific is the event-specific part of an Output.
type Specific struct {
	HookEventName     string `json:"hookEventName"`
	AdditionalContext string `json:"additionalContext"`
}

// Config configures Run.
type Config struct {
	// Client is Recall's HTTP edge (URL and token).
	Client *client.HTTP
	// User is the long-term memory's user id: SessionStart reads its
	// memory (none when empty), and a flushed transcript's session.started
	// names it (as recall watch --user does).
	User string
	// StatePath is recall watch's state file (offsets), shared.
	StatePath string
	// Transcripts is the directory Claude Code writes its transcripts
	// under (~/.claude/projects); a transcript_path elsewhere — after
	// resolving symlinks and "..", so a link pointing out counts as
	// elsewhere — is refused with ErrOutsideTranscripts. Empty: every
	// path is refused.
	Transcripts string
	// Tenant, when set, is asserted on the events sent.
	Tenant string
	// Timeout bounds the whole hook (10 s when 0).
	Timeout time.Duration
	// Log receives what happened (nil: discarded).
	Log *slog.Logger
}

// Run reads one hook input from stdin and answers it on stdout. On error
// it has written nothing to stdout.
func Run(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer) error {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var in Input
	if err := json.NewDecoder(io.LimitReader(stdin, 4<<20)).Decode(&in); err != nil {
		return fmt.Errorf("reading the hook input: %w", err)
	}
	var text string
	var err error
	switch in.HookEventName {
	case "SessionStart":
		text, err = userMemory(ctx, cfg)
	case "UserPromptSubmit":
		text, err = references(ctx, cfg, in.Prompt)
	case "PreCompact", "Stop", "SubagentStop", "SessionEnd":
		err = flush(ctx, cfg, in.TranscriptPath)
	}
	if err != nil || text == "" {
		return err
	}
	return json.NewEncoder(stdout).Encode(Output{Specific{HookEventName: in.HookEventName, AdditionalContext: text}})
}

// flush sends the transcript at path from the saved offset to its last
// whole line, waiting for Recall to settle every event, and saves the
// offset.
func flush(ctx context.Context, cfg Config, path string) error {
	if path == "" {
		return fmt.Errorf("flushing: the hook input has no transcript_path")
	}
	path, err := underDir(cfg.Transcripts, path)
	if err != nil {
		return err
	}
	st, err := watch.LoadState(cfg.StatePath)
	if err != nil {
		cfg.Log.Warn("hook: reading the transcript from its start", "err", err)
		st = watch.NewState()
	}
	tail := watch.Tail{Sender: cfg.Client, Tenant: cfg.Tenant, User: cfg.User, Log: cfg.Log}
	old := st.Files[path]
	nst, out, err := tail.CatchUp(ctx, path, old)
	for _, r := range out.Rejected {
		cfg.Log.Warn("hook: Recall rejected an event; skipped", "id", r.ID, "status", r.Status, "field", r.Field, "error", r.Error)
	}
	cfg.Log.Info("hook: transcript sent", "file", path, "stored", out.Stored, "duplicates", out.Duplicates, "rejected", len(out.Rejected), "offset", nst.Offset)
	if nst != old {
		st.Files[path] = nst
		if serr := st.Save(cfg.StatePath); serr != nil && err == nil {
			err = serr
		}
	}
	if err != nil {
		return fmt.Errorf("sending %s: %w", path, err)
	}
	return nil
}

// ErrOutsideTranscripts is a transcript_path outside Config.Transcripts.
var ErrOutsideTranscripts = errors.New("transcript is outside the transcripts directory")

// underDir returns path made absolute (the key of recall watch's offsets)
// when, with its symlinks and ".." resolved, it lies under dir resolved
// alike; else an error naming both.
func underDir(dir, path string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("%w: no transcripts directory configured (--transcripts, RECALL_TRANSCRIPTS)", ErrOutsideTranscripts)
	}
	root, err := resolve(dir)
	if err != nil {
		return "", fmt.Errorf("transcripts directory: %w", err)
	}
	p, err := resolve(path)
	if err != nil {
		return "", fmt.Errorf("transcript_path: %w", err)
	}
	if rel, err := filepath.Rel(root, p); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || rel == "." {
		return "", fmt.Errorf("%w: %s is not under %s (set --transcripts or RECALL_TRANSCRIPTS to read from elsewhere)", ErrOutsideTranscripts, path, root)
	}
	return filepath.Abs(path)
}

// resolve is path absolute, with its symlinks and ".." resolved.
func resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}
