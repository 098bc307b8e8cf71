package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// edit opens the current configuration in $EDITOR (vi when unset) and
// stores the result with If-Match: the revision read, so a change made
// meanwhile is not overwritten (412: run edit again). An invalid result
// is not stored: its errors are printed and the file kept.
func (c *tenantClient) edit(ctx context.Context, stdout io.Writer) error {
	r, err := c.read(ctx, stdout)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "recall-tenant-*.json")
	if err != nil {
		return err
	}
	path := f.Name()
	before, _ := json.MarshalIndent(r.Config, "", "  ")
	before = append(before, '\n')
	_, err = f.Write(before)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := runEditor(ctx, path); err != nil {
		return err
	}
	after, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(before), bytes.TrimSpace(after)) {
		_ = os.Remove(path)
		fmt.Fprintln(stdout, "no changes")
		return nil
	}
	if err := c.put(ctx, after, strconv.FormatUint(r.Revision, 10), stdout); err != nil {
		return fmt.Errorf("%w (your edit is kept in %s)", err, path)
	}
	_ = os.Remove(path)
	return nil
}

// runEditor runs $VISUAL, $EDITOR or vi on path, attached to the terminal.
func runEditor(ctx context.Context, path string) error {
	editor := envOr("VISUAL", envOr("EDITOR", "vi"))
	cmd := exec.CommandContext(ctx, "sh", "-c", editor+` "$1"`, "sh", path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("running the editor %q: %w", editor, err)
	}
	return nil
}

// history prints the kept revisions, oldest first, with what each changed.
func (c *tenantClient) history(ctx context.Context, stdout io.Writer) error {
	b, _, err := c.do(ctx, http.MethodGet, "/v1/config/history", nil, nil, stdout)
	if err != nil {
		return err
	}
	var h events.ConfigHistory
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("decoding the history: %w", err)
	}
	if len(h.Revisions) == 0 {
		fmt.Fprintf(stdout, "no configuration stored for %s (the service defaults apply)\n", h.Tenant)
		return nil
	}
	for _, r := range h.Revisions {
		who := r.Actor
		if who == "" {
			who = "unknown"
		}
		if r.Via != "" {
			who += " via " + r.Via
		}
		fmt.Fprintf(stdout, "revision %d  %s  %s  %s\n", r.Revision, r.At.Format("2006-01-02 15:04:05Z07:00"), r.Op, who)
		for _, ch := range r.Changes {
			fmt.Fprintf(stdout, "  %s: %s → %s\n", ch.Field, shown(ch.Old), shown(ch.New))
		}
	}
	return nil
}

// shown is a changed value for a terminal: "unset" when absent, long
// strings cut.
func shown(v json.RawMessage) string {
	if len(v) == 0 {
		return "unset"
	}
	s := string(v)
	if len(s) > 60 {
		s = s[:57] + "…"
	}
	return strings.ReplaceAll(s, "\n", " ")
}
