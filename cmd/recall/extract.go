package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
)

func runExtract(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("extract")
	target := addSessionFlags(fs, "session id (required for a manual extraction; a filter for --replay-failed)", "tenant (a filter for --replay-failed when set explicitly)")
	session, tenant, natsURL := target.session, target.tenant, target.natsURL
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the extraction")
	failed := fs.Bool("failed", false, "list parked (failed) extraction requests")
	replay := fs.Bool("replay-failed", false, "re-run parked extraction requests (all, or those of --session)")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage:\n  recall extract --session S [--tenant T] [--timeout D] [--json]\n  recall extract --failed [--json]\n  recall extract --replay-failed [--session S] [--tenant T]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tenantSet := false
	fs.Visit(func(f *flag.Flag) { tenantSet = tenantSet || f.Name == "tenant" })
	if *failed && *replay {
		return fmt.Errorf("%w: --failed and --replay-failed are exclusive", errUsage)
	}
	if !*failed && !*replay && *session == "" {
		return fmt.Errorf("%w: --session is required (or --failed / --replay-failed)", errUsage)
	}
	if err := target.validate(false); err != nil {
		return err
	}
	nc, err := dialNATS(*natsURL, "recall-extract")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	switch {
	case *failed:
		return listFailed(ctx, js, stdout, *asJSON)
	case *replay:
		f := parked.Filter{Session: *session}
		if tenantSet || *session != "" {
			f.Tenant = *tenant
		}
		var bar *progress
		f.Progress = func(done, total int) {
			if bar == nil {
				bar = newProgress(os.Stderr, total, "parked requests")
			}
			bar.set(done)
		}
		n, err := parked.Replay(ctx, js, "cli", f)
		if bar != nil {
			bar.done()
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "replayed %d parked extraction request(s)\n", n)
		return nil
	}
	return manualExtract(ctx, nc, stdout, *tenant, *session, *timeout, *asJSON)
}

// manualExtract asks the trigger for an extraction of the session and prints
// the outcome.
func manualExtract(ctx context.Context, nc *nats.Conn, stdout io.Writer, tenant, session string, timeout time.Duration, asJSON bool) error {
	body, _ := json.Marshal(events.ExtractRequest{TimeoutMS: timeout.Milliseconds()})
	rctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	// The reply comes in the tenant's reply space, the only one the trigger
	// answers in (internal/replyspace); chunked.Request listens there.
	m, err := chunked.Request(rctx, nc, events.APISubject(events.VerbExtract, tenant, session), nil, body)
	if errors.Is(err, chunked.ErrNoResponders) {
		return errors.New("no trigger service answers manual extractions (is Recall running? try `recall up`)")
	}
	if err != nil {
		return fmt.Errorf("requesting extraction: %w", err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return fmt.Errorf("extraction refused (%s): %s", code, m.Header.Get(micro.ErrorHeader))
	}
	var res events.ExtractResult
	if err := json.Unmarshal(m.Data, &res); err != nil {
		return fmt.Errorf("decoding extraction result: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else if res.Success {
		fmt.Fprintf(stdout, "extracted %s/%s up to transcript seq %d (memory %s revision %d)\n", tenant, session, res.UpToSeq, res.MemoryKey, res.Revision)
	}
	if !res.Success {
		return fmt.Errorf("extraction of %s/%s failed: %s", tenant, session, res.Error)
	}
	return nil
}

func listFailed(ctx context.Context, js jetstream.JetStream, stdout io.Writer, asJSON bool) error {
	list, err := parked.List(ctx, js)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if list == nil {
			list = []parked.Parked{}
		}
		return enc.Encode(list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no parked extraction requests")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARKED AT\tTENANT\tSESSION\tUP TO SEQ\tREASON\tATTEMPTS\tERROR")
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\n", p.ParkedAt.Local().Format(time.DateTime), p.Request.Tenant, p.Request.Session,
			p.Request.UpToSeq, p.Reason, p.Attempts, truncate(p.Error, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%d parked; re-run them with: recall extract --replay-failed [--session S]\n", len(list))
	return nil
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
