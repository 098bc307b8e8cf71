package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/recallhq/recall/pkg/events"
)

// Long-term memory from the command line (docs/long-term-memory.md).
func init() {
	register(command{"ltm", "show a user's long-term memory (show --user U [--types a,b] [--context])", runLTM})
	register(command{"commit", "commit a session's batch to long-term memory now", runCommit})
}

func runLTM(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "show" {
		return fmt.Errorf("%w: recall ltm show --user U [--types a,b] [--context] [--tenant T] [--json]", errUsage)
	}
	fs := newFlags("ltm show")
	target := addSessionFlags(fs, "unused", "tenant")
	user := fs.String("user", "", "user id (required)")
	types := fs.String("types", "", "comma-separated memory types (default: all)")
	block := fs.Bool("context", false, "print the context block for a new session instead")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if err := events.ValidateID(*user); err != nil {
		return fmt.Errorf("%w: --user: %v", errUsage, err)
	}
	if err := target.validate(false); err != nil {
		return err
	}
	c, closeFn, err := indexClient(*target.natsURL, *target.tenant, "recall-ltm")
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var ts []string
	for _, t := range strings.Split(*types, ",") {
		if t = strings.TrimSpace(t); t != "" {
			ts = append(ts, t)
		}
	}
	r, err := c.UserMemory(ctx, *user, ts...)
	if err != nil {
		return err
	}
	switch {
	case *asJSON:
		return printJSON(stdout, r)
	case *block:
		fmt.Fprintln(stdout, r.Context)
		return nil
	}
	if len(r.Documents) == 0 {
		fmt.Fprintf(stdout, "%s has no long-term memory yet\n", *user)
		return nil
	}
	for _, d := range r.Documents {
		fmt.Fprintf(stdout, "== %s/%s (revision %d, %s)\n%s\n", d.Target, d.Type, d.Revision, d.UpdatedAt.Format(time.RFC3339), strings.TrimRight(d.Content, "\n"))
	}
	return nil
}

func runCommit(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("commit")
	target := addSessionFlags(fs, "session id (required)", "tenant")
	timeout := fs.Duration("timeout", 4*time.Minute, "how long to wait")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := target.validate(true); err != nil {
		return err
	}
	c, closeFn, err := indexClient(*target.natsURL, *target.tenant, "recall-commit")
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r, err := c.Commit(ctx, *target.session)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, r)
	}
	if !r.Success {
		return fmt.Errorf("the commit of %s failed: %s", *target.session, r.Error)
	}
	fmt.Fprintf(stdout, "committed %s for user %s: records %d–%d (%d messages), phases %s, peers %v\n",
		*target.session, r.User, r.FromSeq, r.ToSeq, r.Messages, strings.Join(r.Phases, ", "), r.AllowedPeers)
	for _, w := range r.Written {
		fmt.Fprintf(stdout, "  wrote %s/%s: %d new lines (revision %d)\n", w.Target, w.Type, w.Lines, w.Revision)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(stdout, "  skipped %d %s operation(s): %s\n", s.Count, s.Type, s.Reason)
	}
	for _, d := range r.Denied {
		fmt.Fprintf(stdout, "  denied: %s\n", d)
	}
	return nil
}
