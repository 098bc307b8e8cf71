package bench

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSoakVerdict(t *testing.T) {
	expected := map[string][]string{"a": {"a-start", "a-m000000", "a-m000001"}, "b": {"b-start"}}
	stored := map[string]int{"a-start": 1, "a-m000000": 2, "b-start": 1, "b-m000000": 1, "c-x": 3}
	lost, dup, checked, ex := verdict(expected, stored)
	// a-m000001 was acknowledged and is missing; a-m000000 is stored twice;
	// c-x was never acknowledged (the client gave up) but stored 3 times;
	// b-m000000, stored once without an acknowledgement, is neither.
	if lost != 1 || dup != 2 || checked != 4 {
		t.Fatalf("lost %d, duplicated %d, checked %d (%v); want 1, 2, 4", lost, dup, checked, ex)
	}
	if !slices.Contains(ex, "lost a-m000001") || !slices.Contains(ex, "a-m000000 stored 2 times") {
		t.Errorf("examples %v", ex)
	}
}

func TestSoakExpectedSkipsFailed(t *testing.T) {
	l := &soakLoad{}
	l.sessions = []*soakSession{{id: "s", sent: 3, started: true, ended: true, failed: []string{"s-m000001"}}}
	got := l.expected()["s"]
	want := []string{"s-start", "s-m000000", "s-m000002", "s-end"}
	if !slices.Equal(got, want) {
		t.Fatalf("expected %v, want %v", got, want)
	}
}

func TestSoakBatchEndsAndReplacesSessions(t *testing.T) {
	l := newSoakLoad(nil)
	evs, _ := l.batch(soakActive * (soakSessionLen + 2))
	ends := 0
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.ID()] {
			t.Fatalf("event id %s generated twice", e.ID())
		}
		seen[e.ID()] = true
		if strings.HasSuffix(e.ID(), "-end") {
			ends++
		}
	}
	if ends != soakActive || len(l.sessions) != 2*soakActive {
		t.Fatalf("%d sessions ended, %d created; want %d and %d", ends, len(l.sessions), soakActive, 2*soakActive)
	}
}

func TestGaugeValue(t *testing.T) {
	page := "# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_goroutines_other 7\nx{a=\"b\"} 1\n"
	if v := gaugeValue(strings.NewReader(page), "go_goroutines"); v != 42 {
		t.Errorf("go_goroutines = %d, want 42", v)
	}
	if v := gaugeValue(strings.NewReader(page), "missing"); v != -1 {
		t.Errorf("missing = %d, want -1", v)
	}
	if v := statusKB("Name:\tx\nVmRSS:\t  1234 kB\n", "VmRSS:"); v != 1234 {
		t.Errorf("VmRSS = %d, want 1234", v)
	}
}

func TestProcSampleReadsThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc on this system")
	}
	s := procSample("self", os.Getpid())
	if s.RSSBytes <= 0 || s.FDs <= 0 {
		t.Fatalf("sample %+v: want RSS and descriptors", s)
	}
}

func TestSoakPlan(t *testing.T) {
	for _, c := range []struct {
		left   time.Duration
		phases int
	}{{45 * time.Second, 4}, {29 * time.Minute, 9}, {10 * time.Hour, 20}} {
		n, d, err := soakPlan(c.left)
		if err != nil || n != c.phases || d*time.Duration(n) > c.left {
			t.Errorf("soakPlan(%s) = %d × %s, %v; want %d phases", c.left, n, d, err, c.phases)
		}
	}
	if _, _, err := soakPlan(10 * time.Second); !errors.Is(err, ErrSoakTooShort) {
		t.Errorf("soakPlan(10s): %v, want ErrSoakTooShort", err)
	}
}

func TestSoakGrowth(t *testing.T) {
	ph := func(rss, g int64, bench int64) SoakPhase {
		p := SoakPhase{Backlog: uint64(rss), Procs: []ProcSample{{Name: "bench", RSSBytes: bench}, {Name: "ingest", RSSBytes: rss, Goroutines: g, FDs: 3}}}
		p.sums()
		return p
	}
	r := SoakResult{Phases: []SoakPhase{ph(50, 10, 100), ph(100, 20, 200), ph(110, 25, 300)}}
	r.growth()
	if r.RSSGrowthRatio == nil || *r.RSSGrowthRatio != 1.1 || *r.GoroutineGrowth != 5 || *r.BenchRSSGrowthRatio != 1.5 || *r.BacklogGrowth != 10 {
		t.Fatalf("growth %v %v %v", *r.RSSGrowthRatio, *r.GoroutineGrowth, *r.BenchRSSGrowthRatio)
	}
}
