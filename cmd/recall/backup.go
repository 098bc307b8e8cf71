package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/backup"
	"github.com/recallhq/recall/internal/embedded"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/services/stack"
)

func init() {
	examples["backup"] = "recall backup /backups/$(date +%F) --nats-url nats://127.0.0.1:4222"
	examples["restore"] = "recall restore /backups/2026-12-01 --data ./data   # then: recall up --data ./data"
}

// storeTarget is the server a backup or restore works on: a running one
// (--nats-url) or the data directory of a stopped recall up (--data).
type storeTarget struct {
	natsURL, data *string
}

func addStoreTarget(fs *flag.FlagSet) storeTarget {
	return storeTarget{
		natsURL: fs.String("nats-url", envOr("RECALL_NATS_URL", nats.DefaultURL), "NATS server URL ($RECALL_NATS_URL sets the default)"),
		data:    fs.String("data", "", "instead of --nats-url: the data directory of a stopped recall up (an embedded server is started on it, locked like recall up does)"),
	}
}

// open connects to the target; closeFn closes the connection and stops
// an embedded server.
func (t storeTarget) open(name string) (nc *nats.Conn, where string, closeFn func(), err error) {
	if *t.data == "" {
		nc, err := dialNATS(*t.natsURL, name)
		if err != nil {
			return nil, "", nil, err
		}
		return nc, nc.ConnectedUrlRedacted(), nc.Close, nil
	}
	unlock, err := stack.LockDataDir(*t.data)
	if err != nil {
		return nil, "", nil, err
	}
	srv, err := embedded.Start(embedded.Options{DataDir: *t.data})
	if err != nil {
		unlock()
		return nil, "", nil, err
	}
	stop := func() { srv.Shutdown(); srv.WaitForShutdown(); unlock() }
	nc, err = nats.Connect(srv.ClientURL(), nats.Name(name))
	if err != nil {
		stop()
		return nil, "", nil, fmt.Errorf("connecting to the embedded server: %w", err)
	}
	return nc, "the data directory " + *t.data, func() { nc.Close(); stop() }, nil
}

// positional parses args with the flags before or after the one
// positional argument, which it returns.
func positional(fs *flag.FlagSet, args []string) (string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		if takesValue(fs, a) && i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	if err := parseFlags(fs, flags); err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", fmt.Errorf("%w: %s takes exactly one DIR (see '%s -h')", errUsage, commandName(fs), fs.Name())
	}
	return pos[0], nil
}

// takesValue reports whether arg is a flag of fs given without "=" that
// takes a value (the next argument).
func takesValue(fs *flag.FlagSet, arg string) bool {
	if strings.Contains(arg, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimLeft(arg, "-"))
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

func runBackup(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("backup")
	target := addStoreTarget(fs)
	setUsage(fs, "backup DIR [--nats-url URL | --data DIR]")
	dir, err := positional(fs, args)
	if err != nil {
		return err
	}
	nc, where, closeFn, err := target.open("recall-backup")
	if err != nil {
		return err
	}
	defer closeFn()
	bar := &streamBar{}
	m, err := backup.Backup(ctx, nc, dir, backup.Options{Progress: bar.set})
	bar.done()
	if err != nil {
		return fmt.Errorf("backing up %s into %s (not a backup: it has no manifest): %w", where, dir, err)
	}
	var msgs uint64
	var size int64
	for _, s := range m.Streams {
		msgs, size = msgs+s.Messages, size+s.Bytes
	}
	fmt.Fprintf(stdout, "Backed up %s into %s: %d streams, %d messages, %s in %s (transcript: %d shards; %d live tombstones).\n",
		where, dir, len(m.Streams), msgs, byteSize(size), fmtDuration(m.Finished.Sub(m.Started)), m.Shards, len(m.Tombstones))
	return nil
}

func runRestore(ctx context.Context, args []string, stdout io.Writer) error {
	var pc provision.Config
	if err := envconfig.Process(svcmain.EnvPrefix, &pc); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	fs := newFlags("restore")
	target := addStoreTarget(fs)
	shards := fs.Int("shards", pc.Shards, "the shard count the services run with; a backup of another count is refused ($RECALL_SHARDS sets the default)")
	force := fs.Bool("force", false, "delete the target's Recall streams first (their tombstones are re-applied after the restore)")
	erasedFrom := fs.String("erased-from", "", "comma-separated newer backup directories whose tombstones are re-applied too")
	setUsage(fs, "restore DIR [--nats-url URL | --data DIR] [--force] [--shards N] [--erased-from DIR,...]")
	dir, err := positional(fs, args)
	if err != nil {
		return err
	}
	o := backup.RestoreOptions{Shards: *shards, Force: *force, Log: cliLog(slog.LevelWarn)}
	if *erasedFrom != "" {
		if o.ErasedFrom, err = backup.ErasedFrom(strings.Split(*erasedFrom, ",")...); err != nil {
			return err
		}
	}
	nc, where, closeFn, err := target.open("recall-restore")
	if err != nil {
		return err
	}
	defer closeFn()
	bar := &streamBar{}
	o.Progress = bar.set
	rep, err := backup.Restore(ctx, nc, dir, o)
	bar.done()
	if err != nil {
		if errors.Is(err, backup.ErrNotEmpty) || errors.Is(err, backup.ErrInvalid) && rep.Streams == 0 {
			return fmt.Errorf("nothing was restored: %w", err)
		}
		return err
	}
	printRestore(stdout, where, dir, rep)
	return nil
}

func printRestore(w io.Writer, where, dir string, rep backup.Report) {
	fmt.Fprintf(w, "Restored %s into %s: %d streams, %d messages, %s in %s.\n", dir, where, rep.Streams, rep.Messages, byteSize(rep.Bytes), fmtDuration(rep.Elapsed))
	if len(rep.Deleted) > 0 {
		fmt.Fprintf(w, "  --force deleted %d streams first.\n", len(rep.Deleted))
	}
	for _, r := range rep.Erased {
		fmt.Fprintf(w, "  erased again: %s/%s (%d messages the restore brought back)\n", r.Tenant, r.Session, r.Total)
	}
}

// byteSize formats a size in KiB or MiB.
func byteSize(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// streamBar draws the streams' progress on stderr when it is a terminal.
type streamBar struct{ bar *progress }

func (b *streamBar) set(_ string, done, total int) {
	if b.bar == nil {
		b.bar = newProgress(os.Stderr, total, "streams")
	}
	b.bar.set(done)
}

func (b *streamBar) done() {
	if b.bar != nil {
		b.bar.done()
		b.bar = nil
	}
}
