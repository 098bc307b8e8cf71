package bench

import (
	"math"
	"slices"
	"time"
)

// latencies collects samples; percentiles are exact (sorted samples).
type latencies []time.Duration

// percentile returns the p-th percentile (0 < p <= 100) by the nearest-rank
// method, in microseconds.
func (l latencies) percentile(p float64) float64 {
	if len(l) == 0 {
		return math.NaN()
	}
	s := slices.Clone(l)
	slices.Sort(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	rank = max(0, min(rank, len(s)-1))
	return float64(s[rank]) / float64(time.Microsecond)
}

// rate is n per elapsed second.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ratio is a/b when both are measured, else nil.
func ratio(a, b *float64) *float64 {
	if a == nil || b == nil || *b == 0 {
		return nil
	}
	return f64(round3(*a / *b))
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
