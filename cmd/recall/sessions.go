package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// The session index from the command line (docs/sessions.md), through
// pkg/client over NATS.

// indexClient connects and returns a pkg/client for tenant.
func indexClient(natsURL, tenant, name string) (*client.Client, func(), error) {
	nc, err := dialNATS(natsURL, name)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	c, err := client.New(js, tenant)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, nc.Close, nil
}

func printJSON(stdout io.Writer, v any) error {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runSessions(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "ls" && args[0] != "show") {
		return fmt.Errorf("%w: recall sessions ls [--q TEXT] [--tag T] [--limit N] | show --session S  [--tenant T] [--json]", errUsage)
	}
	sub := args[0]
	fs := newFlags("sessions " + sub)
	target := addSessionFlags(fs, "session id (show)", "tenant")
	q := fs.String("q", "", "keep sessions matching every word (name, description, summary, tags, id)")
	tag := fs.String("tag", "", "keep sessions with this tag")
	limit := fs.Int("limit", 50, "sessions per page")
	all := fs.Bool("all", false, "every page")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if err := target.validate(sub == "show"); err != nil {
		return err
	}
	c, closeFn, err := indexClient(*target.natsURL, *target.tenant, "recall-sessions")
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if sub == "show" {
		r, err := c.Index(ctx, *target.session)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, r)
		}
		printEntry(stdout, r.Index)
		return nil
	}
	req := events.SessionsRequest{Q: *q, Tag: *tag, Limit: *limit}
	var out []events.SessionIndex
	for {
		page, err := c.Sessions(ctx, req)
		if err != nil {
			return err
		}
		out = append(out, page.Sessions...)
		if !*all || page.Next == "" {
			break
		}
		req.Cursor = page.Next
	}
	if *asJSON {
		return printJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tNAME\tUPDATED\tTAGS\tDESCRIPTION")
	for _, s := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Session, orNone(s.Name), s.UpdatedAt.Format(time.RFC3339), strings.Join(s.Tags, ","), clipLine(s.Description, 80))
	}
	return tw.Flush()
}

func printEntry(w io.Writer, s events.SessionIndex) {
	fmt.Fprintf(w, "session      %s\nname         %s\ndescription  %s\ntags         %s\n", s.Session, orNone(s.Name), s.Description, strings.Join(s.Tags, ", "))
	if s.ParentSession != "" {
		fmt.Fprintf(w, "parent       %s\n", s.ParentSession)
	}
	if s.CWD != "" {
		fmt.Fprintf(w, "cwd          %s\n", s.CWD)
	}
	fmt.Fprintf(w, "created      %s\nupdated      %s\nindexed      up to record %s (seq %d) by %s\n", s.CreatedAt.Format(time.RFC3339), s.UpdatedAt.Format(time.RFC3339), orNone(s.LastIndexedID), s.LastIndexedSeq, orNone(s.IndexModel))
	if s.Summary != "" {
		fmt.Fprintf(w, "\n%s\n", s.Summary)
	}
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clipLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func runIndex(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("index")
	target := addSessionFlags(fs, "session id (required)", "tenant")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long to wait")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := target.validate(true); err != nil {
		return err
	}
	c, closeFn, err := indexClient(*target.natsURL, *target.tenant, "recall-index")
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r, err := c.Reindex(ctx, *target.session)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, r)
	}
	o := r.Outcome
	if !o.Success {
		return fmt.Errorf("indexing %s failed after %d model call(s): %s", *target.session, o.Attempts, o.Error)
	}
	fmt.Fprintf(stdout, "indexed %s as %q (%s, %d call(s), %d in / %d out tokens, $%.4f, %d ms)\n\n",
		*target.session, o.Name, o.Model, o.Attempts, o.Usage.InputTokens, o.Usage.OutputTokens, o.CostUSD, o.DurationMS)
	printEntry(stdout, r.Index)
	return nil
}

func runResolve(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("resolve")
	target := addSessionFlags(fs, "unused", "tenant")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: recall resolve [--tenant T] [--json] REF   (an id, a name, a fuzzy name; name~N adds N ancestors)")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: recall resolve REF", errUsage)
	}
	if err := target.validate(false); err != nil {
		return err
	}
	c, closeFn, err := indexClient(*target.natsURL, *target.tenant, "recall-resolve")
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := c.Resolve(ctx, strings.TrimPrefix(fs.Arg(0), "@@"))
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, r)
	}
	fmt.Fprintf(stdout, "%s → %s (%s, matched by %s)\n", r.Ref, r.Session.Session, orNone(r.Session.Name), r.By)
	for i, a := range r.Ancestors {
		fmt.Fprintf(stdout, "  ancestor %d: %s (%s)\n", i+1, a.Session, orNone(a.Name))
	}
	return nil
}

func runQuery(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("query")
	target := addSessionFlags(fs, "the session to ask: an id or a name (required)", "tenant")
	question := fs.String("question", "", "the question (required)")
	budget := fs.Int64("budget", 0, "most session tokens sent (0: the indexer's default)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if strings.TrimSpace(*question) == "" {
		return fmt.Errorf("%w: --question is required", errUsage)
	}
	if err := target.validate(true); err != nil {
		return err
	}
	c, closeFn, err := indexClient(*target.natsURL, *target.tenant, "recall-query")
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r, err := c.Query(ctx, *target.session, events.QueryRequest{Question: *question, BudgetTokens: *budget})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, r)
	}
	fmt.Fprintf(stdout, "%s\n\n(%s; %d records read, %d left out for the budget; %.1f ms overhead)\n", r.Answer, orNone(r.Model), r.Records, r.Truncated, r.OverheadMS)
	for _, s := range r.Sources {
		fmt.Fprintf(stdout, "  source seq %d %s %s: %s\n", s.Seq, s.Role, s.ID, clipLine(s.Excerpt, 100))
	}
	return nil
}
