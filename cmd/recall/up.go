package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/kelseyhightower/envconfig"

	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/internal/telemetry"
)

func init() {
	register(command{"up", "run every service on an embedded NATS server (the newcomer's default)", runUp})
}

func runUp(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("up")
	data := fs.String("data", "./data", "JetStream file store directory of the embedded server")
	httpAddr := fs.String("http", "127.0.0.1:8080", "HTTP edge listen address")
	natsListen := fs.String("nats-listen", "127.0.0.1:4222", "client address of the embedded NATS server, for nats CLI and other processes")
	natsURL := fs.String("nats-url", "", "use this external NATS instead of the embedded server")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var tc telemetry.Config
	if err := envconfig.Process(svcmain.EnvPrefix, &tc); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := telemetry.NewLogger(os.Stderr, tc)
	tel, err := telemetry.Setup(ctx, tc, "up")
	if err != nil {
		return err
	}
	defer tel.Shutdown(context.Background())
	st, err := startStack(ctx, stackOptions{DataDir: *data, NATSListen: *natsListen, NATSURL: *natsURL, HTTPAddr: *httpAddr, Log: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Recall is up.\n  HTTP edge: http://%s (POST /v1/events)\n  console:   http://%s/console/\n  NATS:      %s\n  data:      %s\n", st.HTTPAddr, st.HTTPAddr, st.NATSURL, *data)
	printAuth(stdout, st.Auth)
	fmt.Fprintln(stdout, "Press Ctrl-C to stop.")
	select {
	case <-ctx.Done():
	case <-st.Done():
	}
	return st.Close()
}

// printAuth prints the NATS users of an authenticated stack — never their
// passwords, which stay in the 0600 file it names — or says that NATS runs
// without authentication on loopback.
func printAuth(w io.Writer, a *upAuth) {
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
