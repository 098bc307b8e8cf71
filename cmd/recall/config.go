package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kelseyhightower/envconfig"

	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/gateway/gatewaysvc"
	"github.com/recallhq/recall/services/indexer/indexersvc"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
	"github.com/recallhq/recall/services/longterm/longtermsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// configSpecs are the configurations `recall config` describes: the
// telemetry every process reads, then each service's.
var configSpecs = []struct {
	name string
	spec any
}{
	{"ingest", &ingestsvc.Config{}},
	{"trigger", &triggersvc.Config{}},
	{"extractor", &extractorsvc.Config{}},
	{"compactor", &compactorsvc.Config{}},
	{"indexer", &indexersvc.Config{}},
	{"longterm", &longtermsvc.Config{}},
	{"gateway", &gatewaysvc.Config{}},
}

// configGroup is a section of `recall config`: a heading and its
// variables, one "KEY\tdefault\tdescription" line each.
type configGroup struct {
	heading string
	lines   []string
}

func runConfig(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("config")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	groups, err := configGroups()
	if err != nil {
		return err
	}
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "# %s\n", g.heading)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		for _, l := range g.lines {
			fmt.Fprintln(tw, l)
		}
		tw.Flush()
	}
	return nil
}

// configGroups lists each variable once: telemetry first, then the
// variables several services share (the same key, default and
// description), grouped by who shares them, then each service's own.
func configGroups() ([]configGroup, error) {
	tel, err := configLines(&telemetry.Config{})
	if err != nil {
		return nil, err
	}
	groups := []configGroup{{"every process (telemetry)", tel}}
	users := map[string][]string{} // line → the services that have it
	var order []string             // lines in first-seen order
	own := make([][]string, len(configSpecs))
	for i, s := range configSpecs {
		lines, err := configLines(s.spec)
		if err != nil {
			return nil, err
		}
		own[i] = lines
		for _, l := range lines {
			if users[l] == nil {
				order = append(order, l)
			}
			users[l] = append(users[l], s.name)
		}
	}
	shared := map[string]int{} // "a, b" → its group's index
	for _, l := range order {
		if len(users[l]) < 2 {
			continue
		}
		who := strings.Join(users[l], ", ")
		if len(users[l]) == len(configSpecs) {
			who = "every service"
		}
		if _, ok := shared[who]; !ok {
			shared[who] = len(groups)
			groups = append(groups, configGroup{heading: "shared by " + who})
		}
		groups[shared[who]].lines = append(groups[shared[who]].lines, l)
	}
	for i, s := range configSpecs {
		g := configGroup{heading: s.name}
		for _, l := range own[i] {
			if len(users[l]) == 1 {
				g.lines = append(g.lines, l)
			}
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// configLines are spec's variables, one "KEY\tdefault\tdescription" line
// each.
func configLines(spec any) ([]string, error) {
	var b bytes.Buffer
	const format = "{{range .}}{{usage_key .}}\t{{usage_default .}}\t{{usage_description .}}\n{{end}}"
	if err := envconfig.Usagef(svcmain.EnvPrefix, spec, &b, format); err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"), nil
}
