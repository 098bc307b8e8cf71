package eval

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/recallhq/recall/internal/eval/sessiongen"
)

// Report is the result of a run (the JSON of recall eval --json).
type Report struct {
	// Family is the family of the sessions (sessiongen.Families).
	Family    string   `json:"family"`
	Seed      uint64   `json:"seed"`
	Quick     bool     `json:"quick"`
	Budget    int64    `json:"budget_tokens"`
	Threshold int64    `json:"threshold_tokens"`
	Model     string   `json:"model,omitempty"`
	Judge     string   `json:"judge,omitempty"`
	Systems   []string `json:"systems"`
	// Results per system, in Systems order.
	Results  []SystemResult  `json:"results"`
	Sessions []SessionResult `json:"sessions"`
	Facts    int             `json:"facts"`
	Elapsed  float64         `json:"elapsed_seconds"`
	// Families are the reports of the other families of the run
	// (RunFamilies), each of this shape without Families.
	Families []*Report `json:"families,omitempty"`
}

// Score is a pass rate.
type Score struct {
	Pass    int     `json:"pass"`
	Total   int     `json:"total"`
	Percent float64 `json:"percent"`
}

func (s *Score) add(pass bool) {
	s.Total++
	if pass {
		s.Pass++
	}
}

func (s *Score) finish() {
	if s.Total > 0 {
		s.Percent = math.Round(1000*float64(s.Pass)/float64(s.Total)) / 10
	}
}

// SystemResult is one system's scores over every session.
type SystemResult struct {
	System     string           `json:"system"`
	Overall    Score            `json:"overall"`
	Categories map[string]Score `json:"categories"`
	// Sessions without and with earlier compactions (BandFresh,
	// BandCompacted): the two regimes differ most.
	Bands map[string]Score `json:"bands"`
	// Probes are the scores per probe kind (sessiongen.ProbeKinds; an
	// artifact point is one changed file).
	Probes map[string]Score `json:"probes,omitempty"`
	// Judge holds the LLM judge's scores (absent without a judge).
	Judge *JudgeScores `json:"judge,omitempty"`
	// ContextTokens: mean and largest context; OverBudget counts contexts
	// larger than the budget.
	ContextTokensMean int64          `json:"context_tokens_mean"`
	ContextTokensMax  int64          `json:"context_tokens_max"`
	OverBudget        int            `json:"over_budget"`
	Outcomes          map[string]int `json:"outcomes"`
	tokens            int64
}

// JudgeScores are an LLM judge's scores. Contexts whose judge call failed
// are not counted; Errors says how many.
type JudgeScores struct {
	Overall    Score            `json:"overall"`
	Categories map[string]Score `json:"categories"`
	Bands      map[string]Score `json:"bands"`
	Errors     int              `json:"errors,omitempty"`
}

// SessionResult is one session and how each system did on it.
type SessionResult struct {
	ID          string                    `json:"id"`
	Project     string                    `json:"project"`
	Tokens      int64                     `json:"tokens"`
	Records     int                       `json:"records"`
	Compactions int                       `json:"earlier_compactions"`
	Facts       []sessiongen.Fact         `json:"facts"`
	Systems     map[string]*SessionSystem `json:"systems"`
}

// SessionSystem is one system's context for one session and its verdicts.
type SessionSystem struct {
	Outcome string `json:"outcome"`
	Served  bool   `json:"served"`
	Reason  string `json:"reason,omitempty"`
	Tokens  int64  `json:"context_tokens"`
	Kept    int    `json:"kept_messages"`
	Score   Score  `json:"score"`
	Failed  []Miss `json:"failed,omitempty"`
	// Probes per kind, and the probes (and changed files) missed.
	Probes       map[string]Score `json:"probes,omitempty"`
	ProbesFailed []Miss           `json:"probes_failed,omitempty"`
	Judge        *Score           `json:"judge,omitempty"`
	// JudgeError is why the judge gave no verdicts for this context.
	JudgeError string `json:"judge_error,omitempty"`
}

// Session bands.
const (
	BandFresh     = "no_earlier_compaction"
	BandCompacted = "after_compactions"
)

func band(p *Prepared) string {
	if p.Compactions > 0 {
		return BandCompacted
	}
	return BandFresh
}

// Miss is a fact a context failed.
type Miss struct {
	Fact     string `json:"fact"`
	Category string `json:"category"`
	Why      string `json:"why"`
}

func newReport(o Options, systems []string, sessions []*Prepared) *Report {
	r := &Report{Family: o.Family, Seed: o.Seed, Quick: o.Quick, Budget: o.Budget, Threshold: o.Threshold, Model: o.ModelName, Systems: systems}
	if o.Judge != nil {
		r.Judge = o.Judge.Name()
	}
	for _, s := range systems {
		sr := SystemResult{System: s, Categories: map[string]Score{}, Bands: map[string]Score{}, Outcomes: map[string]int{}, Probes: map[string]Score{}}
		if o.Judge != nil {
			sr.Judge = &JudgeScores{Categories: map[string]Score{}, Bands: map[string]Score{}}
		}
		r.Results = append(r.Results, sr)
	}
	for _, p := range sessions {
		r.Sessions = append(r.Sessions, SessionResult{ID: p.ID, Project: p.Project, Tokens: p.Tokens, Records: p.Session.Records,
			Compactions: p.Compactions, Facts: p.Facts, Systems: map[string]*SessionSystem{}})
		r.Facts += len(p.Facts)
	}
	return r
}

// add scores c, system sys's context for p, offline and with the judge's
// verdicts when there are some (judgeErr: the judge call failed).
func (r *Report) add(sys string, p *Prepared, c *Context, judged map[string]bool, judgeErr error) {
	var res *SystemResult
	for i := range r.Results {
		if r.Results[i].System == sys {
			res = &r.Results[i]
		}
	}
	var sess *SessionResult
	for i := range r.Sessions {
		if r.Sessions[i].ID == p.ID {
			sess = &r.Sessions[i]
		}
	}
	ss := &SessionSystem{Outcome: c.Outcome, Served: c.Served, Reason: c.Reason, Tokens: c.Tokens, Kept: len(c.Kept)}
	text := prepareText(c.Text())
	if judged != nil {
		ss.Judge = &Score{}
	}
	if judgeErr != nil {
		ss.JudgeError = judgeErr.Error()
		res.Judge.Errors++
	}
	for i := range p.Facts {
		f := &p.Facts[i]
		v := scoreText(f, text)
		ss.Score.add(v.Pass)
		res.Overall.add(v.Pass)
		bs := res.Bands[band(p)]
		bs.add(v.Pass)
		res.Bands[band(p)] = bs
		cs := res.Categories[f.Category]
		cs.add(v.Pass)
		res.Categories[f.Category] = cs
		if !v.Pass {
			ss.Failed = append(ss.Failed, Miss{Fact: f.ID, Category: f.Category, Why: v.Why})
		}
		if judged != nil {
			ok := judged[f.ID]
			ss.Judge.add(ok)
			res.Judge.Overall.add(ok)
			js := res.Judge.Categories[f.Category]
			js.add(ok)
			res.Judge.Categories[f.Category] = js
			jb := res.Judge.Bands[band(p)]
			jb.add(ok)
			res.Judge.Bands[band(p)] = jb
		}
	}
	ss.Score.finish()
	addProbes(res, ss, p, text)
	if ss.Judge != nil {
		ss.Judge.finish()
	}
	res.Outcomes[c.Outcome]++
	res.tokens += c.Tokens
	res.ContextTokensMax = max(res.ContextTokensMax, c.Tokens)
	if c.Tokens > r.Budget {
		res.OverBudget++
	}
	sess.Systems[sys] = ss
}

func (r *Report) finish(elapsed time.Duration) {
	r.Elapsed = math.Round(elapsed.Seconds()*10) / 10
	for i := range r.Results {
		res := &r.Results[i]
		res.Overall.finish()
		finishAll(res.Categories)
		finishAll(res.Bands)
		finishAll(res.Probes)
		if res.Judge != nil {
			res.Judge.Overall.finish()
			finishAll(res.Judge.Categories)
			finishAll(res.Judge.Bands)
		}
		if n := len(r.Sessions); n > 0 {
			res.ContextTokensMean = res.tokens / int64(n)
		}
	}
}

func finishAll(m map[string]Score) {
	for k, s := range m {
		s.finish()
		m[k] = s
	}
}

// Result returns the scores of system, or nil.
func (r *Report) Result(system string) *SystemResult {
	for i := range r.Results {
		if r.Results[i].System == system {
			return &r.Results[i]
		}
	}
	return nil
}

// PrintTable writes the report as tables, one family after the other:
// scores per category and system, the LLM judge's when present, then one
// line per session.
func PrintTable(w io.Writer, r *Report) error {
	if err := printFamily(w, r); err != nil {
		return err
	}
	for _, f := range r.Families {
		fmt.Fprintln(w)
		if err := printFamily(w, f); err != nil {
			return err
		}
	}
	return nil
}

func printFamily(w io.Writer, r *Report) error {
	var minT, maxT int64 = math.MaxInt64, 0
	minC, maxC := math.MaxInt, 0
	for _, s := range r.Sessions {
		minT, maxT = min(minT, s.Tokens), max(maxT, s.Tokens)
		minC, maxC = min(minC, s.Compactions), max(maxC, s.Compactions)
	}
	fmt.Fprintf(w, "Recall eval, family %s: seed %d, %d sessions (%s–%s tokens, %d–%d earlier compactions), %d facts; budget %s tokens, threshold %s\n\n",
		r.Family, r.Seed, len(r.Sessions), kTokens(minT), kTokens(maxT), minC, maxC, r.Facts, thousands(r.Budget), thousands(r.Threshold))
	printScores(w, r, "offline scoring (normalized match)", func(s *SystemResult) (Score, map[string]Score, map[string]Score) {
		return s.Overall, s.Categories, s.Bands
	})
	if r.Judge != "" {
		fmt.Fprintln(w)
		printScores(w, r, "LLM judge ("+r.Judge+")", func(s *SystemResult) (Score, map[string]Score, map[string]Score) {
			if s.Judge == nil {
				return Score{}, nil, nil
			}
			return s.Judge.Overall, s.Judge.Categories, s.Judge.Bands
		})
		for _, res := range r.Results {
			if res.Judge != nil && res.Judge.Errors > 0 {
				fmt.Fprintf(w, "%s: %d context(s) not judged (the judge's answer failed; see judge_error in --json)\n", res.System, res.Judge.Errors)
			}
		}
	}
	fmt.Fprintln(w)
	printProbes(w, r)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "session\ttokens\tcompactions\t")
	for _, s := range r.Systems {
		fmt.Fprintf(tw, "%s\t", s)
	}
	fmt.Fprintln(tw)
	for _, s := range r.Sessions {
		fmt.Fprintf(tw, "%s\t%s\t%d\t", s.ID, kTokens(s.Tokens), s.Compactions)
		for _, sys := range r.Systems {
			ss := s.Systems[sys]
			fmt.Fprintf(tw, "%d/%d %s (%s)\t", ss.Score.Pass, ss.Score.Total, kTokens(ss.Tokens), ss.Outcome)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func printScores(w io.Writer, r *Report, title string, get func(*SystemResult) (overall Score, cats, bands map[string]Score)) {
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "system\t")
	for _, c := range sessiongen.Categories {
		fmt.Fprintf(tw, "%s\t", c)
	}
	fmt.Fprint(tw, "overall\t"+BandFresh+"\t"+BandCompacted+"\tcontext tokens mean/max\tover budget\toutcomes\t\n")
	for i := range r.Results {
		res := &r.Results[i]
		overall, cats, bands := get(res)
		fmt.Fprintf(tw, "%s\t", res.System)
		for _, c := range sessiongen.Categories {
			s := cats[c]
			fmt.Fprintf(tw, "%s\t", pct(s))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%d\t%s\t\n", pct(overall), pct(bands[BandFresh]), pct(bands[BandCompacted]), kTokens(res.ContextTokensMean), kTokens(res.ContextTokensMax), res.OverBudget, outcomes(res.Outcomes))
	}
	tw.Flush()
}

func pct(s Score) string {
	if s.Total == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%% (%d/%d)", s.Percent, s.Pass, s.Total)
}

func outcomes(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func kTokens(n int64) string {
	if n >= 1000 {
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprint(n)
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// bar is the progress bar: redrawn in place on a terminal, one line per
// step elsewhere (CI logs).
type bar struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	n     int
	total int
}

func newBar(w io.Writer, total int) *bar {
	b := &bar{w: w, total: total}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
		}
	}
	return b
}

func (b *bar) step(label string) {
	if b == nil || b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	const width = 30
	filled := width * min(b.n, b.total) / max(b.total, 1)
	line := fmt.Sprintf("[%s%s] %3d/%d %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), b.n, b.total, label)
	if b.tty {
		fmt.Fprintf(b.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(b.w, line)
	}
}

func (b *bar) done() {
	if b != nil && b.w != nil && b.tty {
		fmt.Fprintln(b.w)
	}
}
