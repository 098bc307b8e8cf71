package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kelseyhightower/envconfig"

	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/indexer/indexersvc"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
	"github.com/recallhq/recall/services/longterm/longtermsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

func init() {
	register(command{"config", "print every environment variable with its default", runConfig})
}

func runConfig(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("config")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	const format = `{{range .}}{{usage_key .}}	{{usage_default .}}	{{usage_description .}}
{{end}}`
	specs := []struct {
		name string
		spec any
	}{
		{"common (telemetry)", &telemetry.Config{}},
		{"ingest", &ingestsvc.Config{}},
		{"trigger", &triggersvc.Config{}},
		{"extractor", &extractorsvc.Config{}},
		{"compactor", &compactorsvc.Config{}},
		{"indexer", &indexersvc.Config{}},
		{"longterm", &longtermsvc.Config{}},
	}
	for _, s := range specs {
		fmt.Fprintf(stdout, "# %s\n", s.name)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		if err := envconfig.Usagef(svcmain.EnvPrefix, s.spec, tw, format); err != nil {
			return err
		}
		tw.Flush()
		fmt.Fprintln(stdout)
	}
	return nil
}
