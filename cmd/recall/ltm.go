package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

func runLTM(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "history" {
		return runLTMHistory(ctx, args[1:], stdout)
	}
	if len(args) == 0 || args[0] != "show" {
		return fmt.Errorf("%w: recall ltm show --user U [--types a,b] [--context] [--tenant T] [--json] | recall ltm history --user U --type T [--peer P] [--tenant T]", errUsage)
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
	target := addSessionFlags(fs, "session id (required; a filter for --replay-failed)", "tenant (a filter for --replay-failed when set explicitly)")
	timeout := fs.Duration("timeout", 4*time.Minute, "how long to wait")
	asJSON := fs.Bool("json", false, "print JSON")
	failed := fs.Bool("failed", false, "list parked (failed) long-term memory commits")
	replay := fs.Bool("replay-failed", false, "re-queue parked commits (all, or those of --session / --tenant)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *failed || *replay {
		return parkedCommits(ctx, fs, target, *failed, *replay, *asJSON, stdout)
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

// runLTMHistory prints the kept revisions of one memory document with the
// diff of each from the one before (RECALL_LTM keeps 16).
func runLTMHistory(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("ltm history")
	target := addSessionFlags(fs, "unused", "tenant")
	user := fs.String("user", "", "user id (required)")
	typ := fs.String("type", "", "memory type (required), e.g. preferences")
	peer := fs.String("peer", "", "the peer's document instead of the user's own")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for name, v := range map[string]string{"--user": *user, "--type": *typ} {
		if err := events.ValidateID(v); err != nil {
			return fmt.Errorf("%w: %s: %v", errUsage, name, err)
		}
	}
	if *peer != "" {
		if err := events.ValidateID(*peer); err != nil {
			return fmt.Errorf("%w: --peer: %v", errUsage, err)
		}
	}
	if err := target.validate(false); err != nil {
		return err
	}
	kv, closeNATS, err := openBucket(ctx, *target.natsURL, "recall-ltm", events.BucketLTM)
	if err != nil {
		return err
	}
	defer closeNATS()
	key := events.LTMKey(*target.tenant, *user, *peer, *typ)
	hist, err := kv.History(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%s has no such memory document yet", key)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	fmt.Fprintf(stdout, "%d revision(s) of %s kept\n", len(hist), key)
	prev, prevRev := "", uint64(0)
	for _, e := range hist {
		var d events.StoredMemoryDocument
		if e.Operation() == jetstream.KeyValuePut {
			if err := json.Unmarshal(e.Value(), &d); err != nil {
				return fmt.Errorf("%s revision %d is not a memory document: %w", key, e.Revision(), err)
			}
		}
		fmt.Fprintf(stdout, "\n# %s revision %d (%s, session %s)\n", key, e.Revision(), e.Created().Local().Format(time.DateTime), orDash(d.Session))
		if diff := unifiedDiff(prev, d.Content, fmt.Sprintf("%s@%d", key, prevRev), fmt.Sprintf("%s@%d", key, e.Revision()), 3); diff != "" {
			fmt.Fprint(stdout, diff)
		} else {
			fmt.Fprintln(stdout, "(unchanged)")
		}
		prev, prevRev = d.Content, e.Revision()
	}
	return nil
}
