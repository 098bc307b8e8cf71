package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// SoakReport is the one JSON object `recall bench --soak D --json` prints.
type SoakReport struct {
	Meta Meta       `json:"meta"`
	Soak SoakResult `json:"soak"`
}

// SoakResult holds a soak's figures: the verdicts first, then every phase.
//
// RSSGrowthRatio is the summed RSS of the service processes at the end of
// the last phase ÷ at the end of the second (the first phase warms up);
// GoroutineGrowth the same difference of their goroutines. A SIGKILLed
// service starts again with a fresh heap, so these sums are read beside
// each process's own figures (Phases[].Procs) and the bench process's
// (which holds the NATS server), which is never killed.
type SoakResult struct {
	DurationS          float64 `json:"duration_s"`
	CapacityEventsPerS float64 `json:"capacity_events_per_s"`
	RateEventsPerS     float64 `json:"rate_events_per_s"`
	Acknowledged       int     `json:"acknowledged"`
	Checked            int     `json:"checked"`
	Lost               int     `json:"lost"`
	Duplicated         int     `json:"duplicated"`
	// NotStored counts events the client gave up on (not acknowledged,
	// so not lost); DuplicateAcks the resends the edge answered as stored.
	NotStored       int      `json:"not_stored"`
	DuplicateAcks   int      `json:"duplicate_acks"`
	Examples        []string `json:"examples,omitempty"`
	Kills           int      `json:"kills"`
	UncleanExits    int      `json:"unclean_exits"`
	RSSGrowthRatio  *float64 `json:"rss_growth_ratio"`
	GoroutineGrowth *int64   `json:"goroutine_growth"`
	// BenchRSSGrowthRatio is the same ratio for the bench process (the
	// embedded NATS server and the load generator).
	BenchRSSGrowthRatio *float64 `json:"bench_rss_growth_ratio"`
	// BacklogGrowth is the pipeline's backlog (durables' pending records
	// and queued extraction requests) at the last phase's end minus at the
	// second's: a rate the pipeline sustains keeps it near 0, one it does
	// not makes it grow with the run.
	BacklogGrowth *int64   `json:"backlog_growth"`
	StopErrors    []string `json:"stop_errors,omitempty"`
	// KeptDir holds the NATS data and the services' logs of a run that
	// found something (removed after a clean run).
	KeptDir string      `json:"kept_dir,omitempty"`
	Phases  []SoakPhase `json:"phases"`
}

// SoakPhase is one phase's figures, sampled at its end.
type SoakPhase struct {
	Phase      int     `json:"phase"`
	EndS       float64 `json:"end_s"`
	Events     int     `json:"events"` // acknowledged during the phase
	Killed     string  `json:"killed,omitempty"`
	LagP50MS   float64 `json:"lag_p50_ms"`
	LagP99MS   float64 `json:"lag_p99_ms"`
	LagSamples int     `json:"lag_samples"`
	// CompactP99MS is the compaction replies' p99; Compactions counts
	// them by outcome (http_NNN and error while a service restarts).
	CompactP99MS    float64           `json:"compact_p99_ms"`
	Compactions     map[string]int    `json:"compactions"`
	RSSBytes        int64             `json:"rss_bytes"` // the services' sum
	Goroutines      int64             `json:"goroutines"`
	FDs             int64             `json:"fds"`
	Procs           []ProcSample      `json:"procs"`
	Streams         []StreamSize      `json:"streams"`
	ConsumerPending map[string]uint64 `json:"consumer_pending"`
	// Backlog is the durables' pending records plus the extraction
	// requests queued, at the phase's end.
	Backlog uint64 `json:"backlog"`
}

// ProcSample is one process's figures (-1: not readable).
type ProcSample struct {
	Name         string `json:"name"`
	PID          int    `json:"pid"`
	RSSBytes     int64  `json:"rss_bytes"`
	HeapBytes    int64  `json:"heap_bytes"` // Go's live heap (allocated, not yet freed)
	Goroutines   int64  `json:"goroutines"`
	FDs          int    `json:"fds"`
	Restarts     int    `json:"restarts"`
	UncleanExits int    `json:"unclean_exits"`
}

// StreamSize is a stream's size; Keys is set for KV buckets' streams.
type StreamSize struct {
	Name  string `json:"name"`
	Msgs  uint64 `json:"msgs"`
	Bytes uint64 `json:"bytes"`
	Keys  uint64 `json:"keys,omitempty"`
}

// sums sets the phase's service totals from its samples (the bench
// process, named "bench", is not among them).
func (p *SoakPhase) sums() {
	p.RSSBytes, p.Goroutines, p.FDs = 0, 0, 0
	for _, s := range p.Procs {
		if s.Name == "bench" {
			continue
		}
		p.RSSBytes += max(s.RSSBytes, 0)
		p.Goroutines += max(s.Goroutines, 0)
		p.FDs += int64(max(s.FDs, 0))
	}
}

// growth sets the growth verdicts from the second and the last phase.
func (r *SoakResult) growth() {
	if len(r.Phases) < 3 {
		return
	}
	second, last := r.Phases[1], r.Phases[len(r.Phases)-1]
	if second.RSSBytes > 0 {
		r.RSSGrowthRatio = f64(round3(float64(last.RSSBytes) / float64(second.RSSBytes)))
	}
	g := last.Goroutines - second.Goroutines
	r.GoroutineGrowth = &g
	b := int64(last.Backlog) - int64(second.Backlog)
	r.BacklogGrowth = &b
	b2, bl := benchRSS(second), benchRSS(last)
	if b2 > 0 {
		r.BenchRSSGrowthRatio = f64(round3(float64(bl) / float64(b2)))
	}
}

func benchRSS(p SoakPhase) int64 {
	for _, s := range p.Procs {
		if s.Name == "bench" {
			return s.RSSBytes
		}
	}
	return -1
}

// PrintSoak writes the soak's table.
func PrintSoak(w io.Writer, rep *SoakReport) error {
	r := rep.Soak
	fmt.Fprintf(w, "soak: %.0f s at %.0f events/s (50%% of %.0f measured), %d kills\n", r.DurationS, r.RateEventsPerS, r.CapacityEventsPerS, r.Kills)
	fmt.Fprintf(w, "acknowledged %d, checked %d: lost %d, duplicated %d (not stored by the client: %d; resends answered duplicate: %d); unclean exits %d\n",
		r.Acknowledged, r.Checked, r.Lost, r.Duplicated, r.NotStored, r.DuplicateAcks, r.UncleanExits)
	fmt.Fprintf(w, "rss_growth_ratio %s, goroutine_growth %s, bench (NATS + load) rss ratio %s, backlog_growth %s\n\n",
		fmtRatio(r.RSSGrowthRatio), fmtInt(r.GoroutineGrowth), fmtRatio(r.BenchRSSGrowthRatio), fmtInt(r.BacklogGrowth))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tend s\tevents\tkilled\tlag p50/p99 ms\tcompact p99 ms\tservices RSS MiB\tgoroutines\tfds\tbench RSS MiB\tbacklog\ttranscript MiB\tKV msgs/keys")
	for _, p := range r.Phases {
		fmt.Fprintf(tw, "%d\t%.0f\t%d\t%s\t%.0f / %.0f\t%.0f\t%.1f\t%d\t%d\t%.1f\t%d\t%.1f\t%s\n", p.Phase, p.EndS, p.Events, dash(p.Killed),
			p.LagP50MS, p.LagP99MS, p.CompactP99MS, mib(p.RSSBytes), p.Goroutines, p.FDs, mib(benchRSS(p)), p.Backlog, mib(int64(transcriptBytes(p.Streams))), kvHistory(p.Streams))
	}
	return tw.Flush()
}

func transcriptBytes(ss []StreamSize) uint64 {
	var n uint64
	for _, s := range ss {
		if strings.HasPrefix(s.Name, "RECALL_TRANSCRIPT") {
			n += s.Bytes
		}
	}
	return n
}

// kvHistory is "msgs/keys" of every bucket with keys, largest first.
func kvHistory(ss []StreamSize) string {
	var kv []StreamSize
	for _, s := range ss {
		if s.Keys > 0 {
			kv = append(kv, s)
		}
	}
	slices.SortFunc(kv, func(a, b StreamSize) int { return int(b.Msgs) - int(a.Msgs) })
	var parts []string
	for _, s := range kv[:min(3, len(kv))] {
		parts = append(parts, fmt.Sprintf("%s %d/%d", strings.TrimPrefix(s.Name, "KV_RECALL_"), s.Msgs, s.Keys))
	}
	return strings.Join(parts, ", ")
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtRatio(v *float64) string {
	if v == nil {
		return "not measured"
	}
	return fmt.Sprintf("%.3f", *v)
}

func fmtInt(v *int64) string {
	if v == nil {
		return "not measured"
	}
	return fmt.Sprint(*v)
}
