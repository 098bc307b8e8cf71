package eval

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/recallhq/recall/internal/eval/sessiongen"
)

// addProbes scores the session's probes against one system's context:
// its own probes by kind (checkProbe) and the artifact probe against the
// transcript's tool calls, one point per changed file (checkArtifacts).
func addProbes(res *SystemResult, ss *SessionSystem, p *Prepared, t scoredText) {
	ss.Probes = map[string]Score{}
	add := func(kind string, pass bool) {
		s := ss.Probes[kind]
		s.add(pass)
		ss.Probes[kind] = s
		s = res.Probes[kind]
		s.add(pass)
		res.Probes[kind] = s
	}
	for i := range p.Probes {
		pr := &p.Probes[i]
		v := checkProbe(pr, t)
		add(pr.Kind, v.Pass)
		if !v.Pass {
			ss.ProbesFailed = append(ss.ProbesFailed, Miss{Fact: pr.ID, Category: pr.Kind, Why: v.Why})
		}
	}
	if len(p.Artifacts) > 0 {
		pass, misses := checkArtifacts(p.Artifacts, p.Cwd, t)
		for i := 0; i < len(p.Artifacts); i++ {
			add(sessiongen.ProbeArtifact, i < pass)
		}
		for _, m := range misses {
			ss.ProbesFailed = append(ss.ProbesFailed, Miss{Fact: m.Path, Category: sessiongen.ProbeArtifact, Why: m.Why})
		}
	}
	finishAll(ss.Probes)
}

// printProbes writes the scores per probe kind and system; nothing when
// the family has no probes.
func printProbes(w io.Writer, r *Report) {
	any := false
	for i := range r.Results {
		any = any || len(r.Results[i].Probes) > 0
	}
	if !any {
		return
	}
	fmt.Fprintln(w, "probes by kind (recall, continuation, decision: probes; artifact: changed files, scored against the transcript's tool calls)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "system\t")
	for _, k := range sessiongen.ProbeKinds {
		fmt.Fprintf(tw, "%s\t", k)
	}
	fmt.Fprintln(tw)
	for i := range r.Results {
		res := &r.Results[i]
		fmt.Fprintf(tw, "%s\t", res.System)
		for _, k := range sessiongen.ProbeKinds {
			fmt.Fprintf(tw, "%s\t", pct(res.Probes[k]))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
