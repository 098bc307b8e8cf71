package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/recallhq/recall/internal/export"
	"github.com/recallhq/recall/internal/provision"
)

func runExport(ctx context.Context, args []string, stdout io.Writer) error {
	var notes *bool
	f, err := parseLifecycle("export", args, func(fs *flag.FlagSet) {
		notes = fs.Bool("notes", false, "with --session: the notes and index entry (JSON) instead of the records")
	})
	if err != nil {
		return err
	}
	js, closeNATS, err := openJS(*f.natsURL, "recall-export")
	if err != nil {
		return err
	}
	defer closeNATS()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var v any
	switch {
	case *f.user != "":
		v, err = export.User(ctx, js, *f.tenant, *f.user)
	case *notes:
		v, err = export.SessionNotes(ctx, js, *f.tenant, *f.session)
	default:
		layout, err := provision.DiscoverLayout(ctx, js)
		if err != nil {
			return err
		}
		_, err = export.SessionJSONL(ctx, js.Conn(), layout, *f.tenant, *f.session, stdout, nil)
		return err
	}
	if err != nil {
		return fmt.Errorf("exporting: %w", err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
