// Package eval measures what a compacted context still knows (recall eval).
//
// It generates coding-agent sessions with planted facts (package
// sessiongen), compacts each one with several methods on the same sessions
// — plain truncation to a token budget, the reference algorithm without
// Recall's fixes, Recall itself with the offline provider and, when a
// provider is configured, with a model — and scores every fact against the
// context the agent would continue with: offline by normalized match
// (Check, CheckProbe) and, when a judge is configured, by an LLM judge reported
// separately.
//
// Sessions come in families (sessiongen.Families): Run measures one,
// RunFamilies each in turn. The offline provider's rules were developed
// against the planted family; the holdout family was written before them,
// and the unseen family, the headline, was written by someone who had read
// neither the rules nor the other families' turns: its numbers say how the
// rules do on sessions they were not tuned to.
//
// The package does not start Recall: a Compactor does (cmd/recall runs the
// real services on an embedded NATS server). Everything else is in-process
// and deterministic for a seed, except the LLM judge and a model provider.
package eval

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/memory"
)

// System names, in report order.
const (
	SysTruncation = "truncation"
	// SysTruncationMatched truncates to the size of Recall's (offline)
	// context for the same session instead of the budget.
	SysTruncationMatched = "truncation-matched"
	SysReference         = "reference"
	SysRecallOffline     = "recall-offline"
	SysRecallModel       = "recall-model"
)

// Defaults.
const (
	// DefaultBudget is the context budget of the truncation baseline and
	// the bound Recall's context is checked against: the reference's
	// largest keep window (40,000 tokens) plus the largest notes (12,000).
	DefaultBudget = refMaxTokens + memory.MaxTotalTokens
	// DefaultSessions is the number of sessions of a full run.
	DefaultSessions = 10
	// DefaultTenant is the tenant the sessions are replayed under.
	DefaultTenant = "eval"
)

// Compactor compacts prepared sessions through a running Recall.
type Compactor interface {
	// Compact replays every session, waits until the pipeline has extracted
	// what it will, asks for each session's compaction and returns the
	// contexts keyed by session id. step is called once per session
	// compacted.
	Compact(ctx context.Context, sessions []*Prepared, step func(label string)) (map[string]*Context, error)
}

// Options configure a run.
type Options struct {
	Seed     uint64
	Sessions int     // 0: DefaultSessions (quick: len(sessiongen.QuickLengths))
	Lengths  []int64 // session sizes cycled through; nil: sessiongen.Lengths or QuickLengths
	Quick    bool
	Budget   int64 // 0: DefaultBudget
	// Threshold is the auto-compact threshold (0: 167,000 for a 200K window).
	Threshold int64
	Tenant    string
	// Recall compacts with the offline provider; RecallModel with the
	// configured model (nil: skipped). ModelName describes the latter.
	Recall      Compactor
	RecallModel Compactor
	ModelName   string
	// Judge, when set, grades every context with an LLM as well.
	Judge *Judge
	// Progress receives a progress bar (nil: none).
	Progress io.Writer
	// Family is the family of generated sessions (sessiongen.FamilyPlanted
	// when empty; RunFamilies sets it).
	Family string
	// DumpDir, when set, receives every context as text
	// (<session>.<system>.txt), to see why a fact was missed.
	DumpDir string
}

func (o *Options) defaults() {
	if o.Lengths == nil {
		o.Lengths = sessiongen.Lengths
		if o.Quick {
			o.Lengths = sessiongen.QuickLengths
		}
	}
	if o.Sessions <= 0 {
		o.Sessions = DefaultSessions
		if o.Quick {
			o.Sessions = len(sessiongen.QuickLengths)
		}
	}
	if o.Budget <= 0 {
		o.Budget = DefaultBudget
	}
	if o.Threshold <= 0 {
		o.Threshold = memory.AutoCompactThreshold(200000, 20000)
	}
	if o.Tenant == "" {
		o.Tenant = DefaultTenant
	}
	if o.Family == "" {
		o.Family = sessiongen.FamilyPlanted
	}
}

// RunFamilies runs each family in turn on its own sessions (Run) and
// returns the first family's report with the others' under Families. The
// families share every option but the family; the first error ends the run.
func RunFamilies(ctx context.Context, o Options, families []string) (*Report, error) {
	var head *Report
	for _, f := range families {
		o.Family = f
		rep, err := Run(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("family %s: %w", f, err)
		}
		if head == nil {
			head = rep
			continue
		}
		head.Families = append(head.Families, rep)
	}
	return head, nil
}

// contexts holds each system's context per session: system → session id →
// context.
type contexts map[string]map[string]*Context

func (cs contexts) put(sys, id string, c *Context) {
	if cs[sys] == nil {
		cs[sys] = map[string]*Context{}
	}
	cs[sys][id] = c
}

// Run generates the sessions, compacts them with every system and scores
// them. A failing system is an error: the report compares systems on the
// same sessions or not at all.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	started := time.Now()
	specs := sessiongen.FamilySuite(o.Family, o.Seed, o.Sessions, o.Lengths)
	systems := []string{SysTruncation, SysReference}
	if o.Recall != nil {
		systems = []string{SysTruncation, SysTruncationMatched, SysReference, SysRecallOffline}
	}
	if o.RecallModel != nil {
		systems = append(systems, SysRecallModel)
	}
	steps := len(specs) * 3 // generate, truncate, reference
	for _, c := range []Compactor{o.Recall, o.RecallModel} {
		if c != nil {
			steps += 2 * len(specs) // replay, compact
		}
	}
	if o.Judge != nil {
		steps += len(specs) * len(systems)
	}
	bar := newBar(o.Progress, steps)
	defer bar.done()

	sessions := make([]*Prepared, len(specs))
	for i, spec := range specs {
		p, err := Prepare(sessiongen.Generate(spec), o.Tenant)
		if err != nil {
			return nil, err
		}
		sessions[i] = p
		bar.step("generated " + p.ID)
	}
	cs := contexts{}
	if err := runRecall(ctx, o, sessions, cs, bar); err != nil {
		return nil, err
	}
	if err := runBaselines(ctx, o, sessions, cs, bar); err != nil {
		return nil, err
	}
	rep := newReport(o, systems, sessions)
	for _, p := range sessions {
		for _, sys := range systems {
			if err := score(ctx, o, rep, sys, p, cs[sys][p.ID], bar); err != nil {
				return nil, err
			}
		}
	}
	rep.finish(time.Since(started))
	return rep, nil
}

// runRecall compacts the sessions with each configured Recall.
func runRecall(ctx context.Context, o Options, sessions []*Prepared, cs contexts, bar *bar) error {
	for _, sys := range []struct {
		name string
		c    Compactor
	}{{SysRecallOffline, o.Recall}, {SysRecallModel, o.RecallModel}} {
		if sys.c == nil {
			continue
		}
		got, err := sys.c.Compact(ctx, sessions, func(label string) { bar.step(sys.name + " " + label) })
		if err != nil {
			return fmt.Errorf("%s: %w", sys.name, err)
		}
		for _, p := range sessions {
			if got[p.ID] == nil {
				return fmt.Errorf("%s: no context for %s", sys.name, p.ID)
			}
			cs.put(sys.name, p.ID, got[p.ID])
		}
	}
	return nil
}

// runBaselines computes the truncation and reference contexts; the
// matched truncation needs Recall's (offline) context first.
func runBaselines(ctx context.Context, o Options, sessions []*Prepared, cs contexts, bar *bar) error {
	offline := llm.NewOffline()
	for _, p := range sessions {
		cs.put(SysTruncation, p.ID, Truncate(p, o.Budget))
		if rc := cs[SysRecallOffline][p.ID]; rc != nil {
			cs.put(SysTruncationMatched, p.ID, Truncate(p, rc.Tokens))
		}
		bar.step("truncation " + p.ID)
		ref, err := Reference(ctx, p, offline, o.Threshold)
		if err != nil {
			return err
		}
		cs.put(SysReference, p.ID, ref)
		bar.step("reference " + p.ID)
	}
	return nil
}

// score scores one context offline and, with a judge, by the judge; with a
// dump directory it writes the context there first. A failed judge call is
// recorded in the report, not fatal: the contexts were expensive to make.
func score(ctx context.Context, o Options, rep *Report, sys string, p *Prepared, c *Context, bar *bar) error {
	if o.DumpDir != "" {
		name := filepath.Join(o.DumpDir, p.ID+"."+sys+".txt")
		if err := os.WriteFile(name, []byte(c.Text()), 0o644); err != nil {
			return fmt.Errorf("dumping a context: %w", err)
		}
	}
	var judged map[string]bool
	var judgeErr error
	if o.Judge != nil {
		judged, judgeErr = o.Judge.Grade(ctx, p.Facts, c)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		bar.step("judged " + sys + " " + p.ID)
	}
	rep.add(sys, p, c, judged, judgeErr)
	return nil
}
