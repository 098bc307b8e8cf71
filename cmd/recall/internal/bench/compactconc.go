package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// seqSpan is the first and last stream sequence of a session's records.
type seqSpan struct{ first, last uint64 }

func (s seqSpan) add(seq uint64) seqSpan {
	if s.first == 0 || seq < s.first {
		s.first = seq
	}
	s.last = max(s.last, seq)
	return s
}

// errRefused is a compaction the compactor refused with a 429 (the tenant
// had its share of compactions in flight).
var errRefused = errors.New("refused (429)")

// measureConcurrentSteps runs measureConcurrent at each of the sizes'
// concurrencies over the background sessions; the first step is
// compaction.concurrent, the second compaction.concurrent_over_share.
func measureConcurrentSteps(ctx context.Context, e *env, fl *floor, sessions []string, spans map[string]seqSpan) error {
	r := &e.res.Compaction
	for i, c := range e.sizes.compactConcurrency {
		st, err := measureConcurrent(ctx, e, fl, sessions, spans, c)
		if err != nil {
			return fmt.Errorf("%d concurrent compactions: %w", c, err)
		}
		e.progress("   %d concurrent compactions over %d sessions: %.0f/s, p50 %.0f us, p99 %.0f us, %d refused (429), %.0f us CPU each; floor %.0f/s, p99 %.0f us, %.0f us CPU each (rate %.2f×, p99 %.2f×, CPU %.2f×)",
			c, st.Sessions, st.CompactionsPerS, st.P50US, st.P99US, st.Refused429, deref(st.CPUUSPerCompaction), st.FloorPerS, st.FloorP99US, deref(st.FloorCPUUSPerRead), st.RateVsFloor, st.P99VsFloor, deref(st.CPUVsFloor))
		if i == 0 {
			r.Concurrent = st
		} else {
			r.ConcurrentOverShare = st
		}
	}
	return nil
}

// measureConcurrent sends the sizes' compactConcRequests compactions, c at
// a time, round-robin over sessions, then issues the same reads the
// compactor does for each (KV get of the memory, batch Direct Get of the
// session's records), c at a time, as the floor.
func measureConcurrent(ctx context.Context, e *env, fl *floor, sessions []string, spans map[string]seqSpan, c int) (*ConcurrentCompaction, error) {
	n := e.sizes.compactConcRequests
	st := &ConcurrentCompaction{Concurrency: c, Sessions: len(sessions), Requests: n}
	var served, refused atomic.Int64
	ph := startPhase()
	lat, d, err := runConcurrently(ctx, c, n, func(ctx context.Context, i int) error {
		rep, err := compactOnce(ctx, e.nc, sessions[i%len(sessions)])
		switch {
		case errors.Is(err, errRefused):
			refused.Add(1)
			return err
		case err != nil:
			return err
		case rep.Served:
			served.Add(1)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	_, cpu, cpuOK := ph.end()
	st.Served, st.Refused429 = int(served.Load()), int(refused.Load())
	st.CPUUSPerCompaction = cpuPerEvent(cpu, cpuOK, st.Served)
	st.CompactionsPerS = round1(rate(len(lat), d))
	st.P50US, st.P99US = round1(lat.percentile(50)), round1(lat.percentile(99))
	ph = startPhase()
	flat, fd, err := runConcurrently(ctx, c, n, func(ctx context.Context, i int) error {
		s := sessions[i%len(sessions)]
		return fl.reads(ctx, s, spans[s].first, spans[s].last)
	})
	if err != nil {
		return nil, err
	}
	_, cpu, cpuOK = ph.end()
	st.FloorCPUUSPerRead = cpuPerEvent(cpu, cpuOK, len(flat))
	if st.CPUUSPerCompaction != nil && st.FloorCPUUSPerRead != nil {
		st.CPUVsFloor = f64(round3(*st.CPUUSPerCompaction / *st.FloorCPUUSPerRead))
	}
	st.FloorPerS = round1(rate(len(flat), fd))
	st.FloorP50US, st.FloorP99US = round1(flat.percentile(50)), round1(flat.percentile(99))
	st.RateVsFloor = round3(st.CompactionsPerS / st.FloorPerS)
	st.P99VsFloor = round3(st.P99US / st.FloorP99US)
	return st, nil
}

// runConcurrently calls op for i in 0..n-1 from c goroutines and returns
// the latencies of the calls that succeeded and the wall time. A call that
// returns errRefused is counted by op and not sampled; any other error ends
// the run and is returned.
func runConcurrently(ctx context.Context, c, n int, op func(context.Context, int) error) (latencies, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	lat := make(latencies, 0, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := make(latencies, 0, n/c+1)
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				s := time.Now()
				err := op(ctx, i)
				if err == nil {
					own = append(own, time.Since(s))
				} else if !errors.Is(err, errRefused) {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					cancel()
				}
			}
			mu.Lock()
			lat = append(lat, own...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat, time.Since(t0), firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// concurrentField is f of c, nil when c was not measured.
func concurrentField(c *ConcurrentCompaction, f func(*ConcurrentCompaction) float64) *float64 {
	if c == nil {
		return nil
	}
	return f64(f(c))
}
