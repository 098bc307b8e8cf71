package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/kelseyhightower/envconfig"

	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/services/stack"
)

func runUp(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("up")
	data := fs.String("data", "./data", "JetStream file store directory of the embedded server (locked: one recall up per directory)")
	httpAddr := fs.String("http", envOr("RECALL_HTTP_ADDR", "127.0.0.1:8080"), "HTTP edge listen address; port 0 picks a free port ($RECALL_HTTP_ADDR sets the default)")
	gatewayAddr := fs.String("gateway", envOr("RECALL_GATEWAY_ADDR", "127.0.0.1:8090"), "model gateway listen address (docs/gateway.md); port 0 picks a free port, empty runs none ($RECALL_GATEWAY_ADDR sets the default)")
	natsListen := fs.String("nats-listen", "127.0.0.1:4222", "client address of the embedded NATS server, for nats CLI and other processes; port 0 picks a free port")
	natsURL := fs.String("nats-url", "", "use this external NATS instead of the embedded server")
	verbose := fs.Bool("v", false, "log every service's records to stderr (default: to "+logFileName+" in the data directory, warnings also to stderr)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var tc telemetry.Config
	if err := envconfig.Process(svcmain.EnvPrefix, &tc); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log, logPath, quiet, closeLog, err := upLogger(os.Stderr, *data, *verbose, tc)
	if err != nil {
		return err
	}
	defer closeLog()
	tel, err := telemetry.Setup(ctx, tc, "up")
	if err != nil {
		return err
	}
	defer tel.Shutdown(context.Background())
	st, err := stack.Start(ctx, stack.Options{DataDir: *data, NATSListen: *natsListen, NATSURL: *natsURL, HTTPAddr: *httpAddr, GatewayAddr: *gatewayAddr, Log: log})
	if err != nil {
		return err
	}
	printUp(stdout, st, *data, logPath)
	select {
	case <-ctx.Done():
		quiet() // the stop's disconnect warnings go to the log file only
	case <-st.Done():
	}
	return st.Close()
}

// printUp writes the banner of a running stack: where it serves, where its
// data and logs are, and what to run next.
func printUp(w io.Writer, st *stack.Stack, data, logPath string) {
	fmt.Fprintf(w, "Recall is up.\n  HTTP edge: http://%s  (console: http://%s/console/)\n  NATS:      %s\n", st.HTTPAddr, st.HTTPAddr, st.NATSURL)
	if st.GatewayAddr != "" {
		fmt.Fprintf(w, "  gateway:   http://%s  (ANTHROPIC_BASE_URL=http://%s/anthropic, OPENAI_BASE_URL=http://%s/openai/v1)\n", st.GatewayAddr, st.GatewayAddr, st.GatewayAddr)
	}
	printAuth(w, st.Auth)
	logs := "on stderr (-v)"
	if logPath != "" {
		logs = logPath + " (warnings also on this terminal; -v for everything)"
	}
	fmt.Fprintf(w, "  data:      %s\n  logs:      %s\n\n", data, logs)
	fmt.Fprintf(w, "Next, in another terminal:\n  export RECALL_NATS_URL=%s RECALL_URL=http://%s\n", st.NATSURL, st.HTTPAddr)
	fmt.Fprintln(w, "  recall replay internal/importer/testdata/coding-session.jsonl --session demo1")
	fmt.Fprintln(w, "  recall extract --session demo1 && recall compact --session demo1")
	fmt.Fprintln(w, "Press Ctrl-C to stop.")
}

// printAuth prints the NATS users of an authenticated stack — never their
// passwords, which stay in the 0600 file it names — or says that NATS runs
// without authentication on loopback.
func printAuth(w io.Writer, a *stack.Auth) {
	if a == nil {
		fmt.Fprintln(w, "  NATS auth: none (no RECALL_TENANTS; loopback only)")
		return
	}
	fmt.Fprintf(w, "  NATS auth: users and passwords in %s (mode 0600; passwords are not printed); the same permissions as `recall nats-permissions`\n", a.Path)
	for _, u := range a.Users {
		switch {
		case u.Tenant != "":
			fmt.Fprintf(w, "    tenant %-12s user %s (connect with inbox prefix %s)\n", u.Tenant, u.Name, u.InboxPrefix)
		case u.Service == "":
			fmt.Fprintf(w, "    operator            user %s (for the CLI: RECALL_NATS_USER, and RECALL_NATS_PASSWORD from the file)\n", u.Name)
		}
	}
}
