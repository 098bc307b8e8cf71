package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/erase"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// lifecycleFlags are the flags of erase and export: a session or a user.
type lifecycleFlags struct {
	sessionFlags
	user *string
}

func parseLifecycle(name string, args []string, extra func(fs *flag.FlagSet)) (lifecycleFlags, error) {
	fs := newFlags(name)
	f := lifecycleFlags{sessionFlags: addSessionFlags(fs, "session id", "tenant"), user: fs.String("user", "", "user id (instead of --session)")}
	if extra != nil {
		extra(fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	if (*f.session == "") == (*f.user == "") {
		return f, fmt.Errorf("%w: recall %s --session S | --user U [--tenant T]", errUsage, name)
	}
	if *f.user != "" {
		if err := events.ValidateID(*f.user); err != nil {
			return f, fmt.Errorf("%w: --user: %v", errUsage, err)
		}
	}
	return f, f.validate(false)
}

// openJS connects to NATS for an operator command; closeFn closes it.
func openJS(url, name string) (jetstream.JetStream, func(), error) {
	nc, err := dialNATS(url, name)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("opening JetStream: %w", err)
	}
	return js, nc.Close, nil
}

func runErase(ctx context.Context, args []string, stdout io.Writer) error {
	var sessions *bool
	f, err := parseLifecycle("erase", args, func(fs *flag.FlagSet) {
		sessions = fs.Bool("sessions", false, "with --user: erase the user's sessions too")
	})
	if err != nil {
		return err
	}
	js, closeNATS, err := openJS(*f.natsURL, "recall-erase")
	if err != nil {
		return err
	}
	defer closeNATS()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	layout, err := provision.DiscoverLayout(ctx, js)
	if err != nil {
		return err
	}
	// The ingest replicas' guards learn the tombstone from the bucket.
	e := erase.New(js, layout, erase.Config{}, nil, nil)
	var r events.EraseReceipt
	if *f.session != "" {
		r, err = e.Session(ctx, *f.tenant, *f.session, erase.Actor{Operator: true})
	} else {
		r, err = e.User(ctx, *f.tenant, *f.user, *sessions, erase.Actor{Operator: true})
	}
	if err != nil {
		return fmt.Errorf("erasing (run it again to complete it): %w", err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
