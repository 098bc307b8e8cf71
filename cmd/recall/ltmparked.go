package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/parked"
)

// parkedCommits lists (recall commit --failed) or replays (recall commit
// --replay-failed [--session S] [--tenant T]) the long-term memory commits
// that kept failing and were parked (docs/long-term-memory.md).
func parkedCommits(ctx context.Context, fs *flag.FlagSet, target sessionFlags, failed, replay, asJSON bool, stdout io.Writer) error {
	if failed && replay {
		return fmt.Errorf("%w: --failed and --replay-failed are exclusive", errUsage)
	}
	if err := target.validate(false); err != nil {
		return err
	}
	nc, err := dialNATS(*target.natsURL, "recall-commit")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if !replay {
		return listParkedCommits(ctx, js, stdout, asJSON)
	}
	f := parked.Filter{Session: *target.session}
	tenantSet := false
	fs.Visit(func(fl *flag.Flag) { tenantSet = tenantSet || fl.Name == "tenant" })
	if tenantSet || *target.session != "" {
		f.Tenant = *target.tenant
	}
	var bar *progress
	f.Progress = func(done, total int) {
		if bar == nil {
			bar = newProgress(os.Stderr, total, "parked commits")
		}
		bar.set(done)
	}
	n, err := parked.ReplayCommits(ctx, js, f)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "replayed %d parked commit(s)\n", n)
	return nil
}

func listParkedCommits(ctx context.Context, js jetstream.JetStream, stdout io.Writer, asJSON bool) error {
	list, err := parked.ListCommits(ctx, js)
	if err != nil {
		return err
	}
	if asJSON {
		if list == nil {
			list = []parked.Commit{}
		}
		return printJSON(stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no parked long-term memory commits")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARKED AT\tTENANT\tUSER\tSESSION\tUP TO SEQ\tREASON\tATTEMPTS\tERROR")
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\n", p.ParkedAt.Local().Format(time.DateTime), p.Tenant, p.User, p.Session,
			p.UpTo, p.Reason, p.Attempts, truncate(p.Error, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%d parked; re-run them with: recall commit --replay-failed [--session S]\n", len(list))
	return nil
}
