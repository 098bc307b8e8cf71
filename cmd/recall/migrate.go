package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/migrate"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/pkg/events"
)

// migrateFlags are recall migrate's flags.
type migrateFlags struct {
	natsURL  *string
	shards   *int
	dryRun   *bool
	force    *bool
	idleWait *time.Duration
}

func runMigrate(ctx context.Context, args []string, stdout io.Writer) error {
	var pc provision.Config
	if err := envconfig.Process(svcmain.EnvPrefix, &pc); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	fs := newFlags("migrate")
	f := migrateFlags{
		natsURL:  fs.String("nats-url", envOr("RECALL_NATS_URL", nats.DefaultURL), "NATS server URL ($RECALL_NATS_URL sets the default)"),
		shards:   fs.Int("shards", pc.Shards, "shard count S, fixed once the shards exist ($RECALL_SHARDS sets the default)"),
		dryRun:   fs.Bool("dry-run", false, "count the records per shard, the durables and pending requests, estimate the time; change nothing"),
		force:    fs.Bool("force", false, "skip the check that the services are stopped"),
		idleWait: fs.Duration("idle-wait", 15*time.Second, "how long to wait for stopped services' pins and heartbeats to expire before refusing"),
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *f.shards < 1 || *f.shards > events.MaxShards {
		return fmt.Errorf("%w: --shards must be between 1 and %d", errUsage, events.MaxShards)
	}
	pc.Shards = *f.shards
	nc, err := dialNATS(*f.natsURL, "recall-migrate")
	if err != nil {
		return err
	}
	defer nc.Close()
	bulk, err := dialNATS(*f.natsURL, "recall-migrate-read")
	if err != nil {
		return err
	}
	defer bulk.Close()
	bar := &migrateBar{}
	defer bar.done()
	m, err := migrate.New(nc, bulk, migrate.Config{Provision: pc, Force: *f.force, IdleWait: *f.idleWait, Progress: bar.set,
		Log: cliLog(slog.LevelInfo)})
	if err != nil {
		return err
	}
	if *f.dryRun {
		p, err := m.Plan(ctx)
		if err != nil {
			return err
		}
		printPlan(stdout, p)
		return nil
	}
	rep, err := m.Run(ctx)
	bar.done()
	if err != nil {
		return fmt.Errorf("migrating (run `recall migrate` again to resume; the services refuse to start until it completes): %w", err)
	}
	printMigration(stdout, rep)
	return nil
}

// migrateBar draws each step's progress on stderr when it is a terminal.
type migrateBar struct {
	step string
	bar  *progress
}

func (b *migrateBar) set(p migrate.Progress) {
	if p.Step != b.step || b.bar == nil {
		b.done()
		b.step, b.bar = p.Step, newProgress(os.Stderr, int(p.Total), p.Step)
	}
	b.bar.set(int(p.Done))
}

func (b *migrateBar) done() {
	if b.bar != nil {
		b.bar.done()
		b.bar = nil
	}
}

// legacyRemoval tells the operator how to delete the sealed legacy stream.
const legacyRemoval = "The legacy stream " + provision.StreamLegacyTranscript + " is sealed (writers of the old version get an error) and kept;\n" +
	"delete it once you no longer need it: nats stream rm " + provision.StreamLegacyTranscript + "\n"

func printMigration(w io.Writer, r migrate.Report) {
	switch r.Outcome {
	case migrate.OutcomeNoLegacy:
		fmt.Fprintf(w, "No legacy stream %s on this server: nothing to migrate.\n", provision.StreamLegacyTranscript)
		return
	case migrate.OutcomeAlready:
		fmt.Fprintf(w, "Already migrated to %d shards on %s: nothing to do.\n%s", r.Shards, r.CompletedAt.Format(time.RFC3339), legacyRemoval)
		return
	}
	fmt.Fprintf(w, "Migrated %s into %d shards in %s.\n", provision.StreamLegacyTranscript, r.Shards, r.Duration.Round(time.Millisecond))
	fmt.Fprintf(w, "  records: %d copied, %d already there (an earlier run), %d left (not a session's subject), %d from other writers\n",
		r.Copied, r.Present, r.Skipped, r.Foreign)
	fmt.Fprintf(w, "  per shard: %s\n", strings.Trim(fmt.Sprint(r.PerShard), "[]"))
	fmt.Fprintf(w, "  translated: %s\n", counts(r.Translated))
	fmt.Fprintf(w, "  dropped (their records are gone): %s\n", counts(r.Dropped))
	purged := map[string]int{}
	for b, n := range r.Purged {
		purged[b] = int(n)
	}
	fmt.Fprintf(w, "  emptied caches: %s\n", counts(purged))
	for _, d := range r.Durables {
		if d.Shard == 0 {
			fmt.Fprintf(w, "  durable %s: legacy ack floor %d; starts on shard 0 at %d", d.Durable, d.LegacyFloor, d.StartSeq)
		} else {
			fmt.Fprintf(w, ", shard %d at %d", d.Shard, d.StartSeq)
		}
		if d.Shard == r.Shards-1 {
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "Start the services with RECALL_SHARDS=%d.\n%s", r.Shards, legacyRemoval)
}

// counts formats "name n, name n" in name order ("none" when empty).
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func printPlan(w io.Writer, p migrate.Plan) {
	fmt.Fprintf(w, "Dry run: %s (%s) → %d shards; nothing was changed.\n", provision.StreamLegacyTranscript, p.State, p.Shards)
	if p.State == string(migrate.OutcomeNoLegacy) {
		return
	}
	fmt.Fprintf(w, "  records: %d (%d bytes) in %d sessions, %d not a session's; estimated time %s (%s per million records, measured)\n",
		p.Records, p.Bytes, p.Sessions, p.Skipped, roughly(p.Estimate), migrate.PerMillion)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  shard\trecords\tsessions")
	for k, s := range p.PerShard {
		fmt.Fprintf(tw, "  %d\t%d\t%d\n", k, s.Records, s.Sessions)
	}
	tw.Flush()
	for _, d := range p.Durables {
		fmt.Fprintf(w, "  durable %s: ack floor %d\n", d.Name, d.AckFloor)
	}
	pending := map[string]int{}
	for s, n := range p.Pending {
		pending[s] = int(n)
	}
	fmt.Fprintf(w, "  pending requests: %s\n", counts(pending))
	fmt.Fprintln(w, "Stop every Recall service before migrating: the migration refuses while they run.")
}

// roughly rounds an estimate to what it can tell.
func roughly(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
