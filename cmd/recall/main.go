// Command recall is Recall's one binary (the list is commandList in
// commands.go):
//   - the whole pipeline in one process on an embedded NATS server (up,
//     demo; services/stack);
//   - any single service, so one image runs each: ingest, trigger,
//     extractor, compactor, indexer, longterm, gateway;
//   - the clients of agents: watch, hook, mcp, replay;
//   - the operator tools: memory, compact, extract, edit, erase, export,
//     sessions, index, resolve, query, ltm, commit, tenant, config,
//     nats-permissions, migrate, backup, restore, probe, bench, eval.
//
// Each command parses its own flags; errors marked errUsage exit 2, other
// errors 1, and everything printed is masked (no URL password or token
// reaches the terminal).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/pkg/events"
)

// command is one subcommand. Each lives in its own file; commandList names
// them all.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout io.Writer) error
}

// findCommand returns the command called name.
func findCommand(name string) (command, bool) {
	for _, c := range commandList() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// errUsage marks errors that should print usage and exit 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "recall:", telemetry.Redact(err.Error()))
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "recall:", telemetry.Redact(err.Error()))
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	stdout = redactingWriter{stdout}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(stdout)
		return nil
	}
	c, ok := findCommand(args[0])
	if !ok {
		return fmt.Errorf("%w: unknown command %q (run 'recall help' for the list)", errUsage, args[0])
	}
	rest := args[1:]
	if sub, ok := helpFirst[c.name]; ok && len(rest) > 0 && isHelp(rest[0]) {
		rest = []string{sub, rest[0]} // the first subcommand's flags
	}
	return c.run(ctx, rest, stdout)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "recall — background session memory for agent platforms\n\nUsage: recall <command> [flags]\n\nCommands:")
	list := commandList()
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	for _, c := range list {
		fmt.Fprintf(w, "  %-17s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'recall <command> -h' for a command's flags.")
}

// dialNATS connects an operator command to NATS at url with the
// credentials and TLS settings of the RECALL_NATS_* environment (the same
// variables the services read), so the tools work against a secured
// cluster. It fails fast instead of retrying in the background.
func dialNATS(url, name string, extra ...nats.Option) (*nats.Conn, error) {
	var c natsconn.Config
	if err := envconfig.Process(svcmain.EnvPrefix+"_NATS", &c); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	c.URL = url
	opts, err := c.Options(name)
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.RetryOnFailedConnect(false), nats.MaxReconnects(5))
	opts = append(opts, extra...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %s", telemetry.Redact(url), telemetry.Redact(err.Error()))
	}
	return nc, nil
}

// openBucket connects to NATS at url and opens one of Recall's KV buckets;
// closeFn closes the connection.
func openBucket(ctx context.Context, url, name, bucket string) (kv jetstream.KeyValue, closeFn func(), err error) {
	nc, err := dialNATS(url, name)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		kv, err = js.KeyValue(ctx, bucket)
		if err != nil {
			err = fmt.Errorf("opening %s (is Recall provisioned on this server?): %w", bucket, err)
		}
	}
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return kv, nc.Close, nil
}

// sessionFlags are the flags every operator command that acts on one
// session shares: --session, --tenant and --nats-url.
type sessionFlags struct {
	session, tenant, natsURL *string
}

// addSessionFlags declares the session flags on fs; sessionHelp describes
// --session for this command.
func addSessionFlags(fs *flag.FlagSet, sessionHelp, tenantHelp string) sessionFlags {
	return sessionFlags{
		session: fs.String("session", "", sessionHelp),
		tenant:  fs.String("tenant", "default", tenantHelp),
		natsURL: fs.String("nats-url", envOr("RECALL_NATS_URL", nats.DefaultURL), "NATS server URL ($RECALL_NATS_URL sets the default)"),
	}
}

// validate checks the ids; --session must be set when required.
func (f sessionFlags) validate(required bool) error {
	if required && *f.session == "" {
		return fmt.Errorf("%w: --session is required", errUsage)
	}
	if *f.session != "" {
		if err := events.ValidateID(*f.session); err != nil {
			return fmt.Errorf("%w: --session: %v", errUsage, err)
		}
	}
	if err := events.ValidateID(*f.tenant); err != nil {
		return fmt.Errorf("%w: --tenant: %v", errUsage, err)
	}
	return nil
}
