package bench

import (
	"runtime"
	"time"
)

// phase measures one step's wall time and the process's CPU time.
//
// The CPU is the whole process's: the bench's clients, the services it
// runs in-process and, on the embedded server, the server itself. A ratio
// of two phases over the same records therefore compares the same server
// work plus each side's own: the fair comparison, since the server work a
// Recall component causes (its pulls, acks and publications) is part of
// its cost. Against an external server (--url) only the client side is
// counted.
type phase struct {
	start time.Time
	cpu   time.Duration
	ok    bool
}

// startPhase collects garbage left by earlier steps (so a phase does not
// pay for another's heap) and starts measuring.
func startPhase() phase {
	runtime.GC()
	cpu, ok := cpuTime()
	return phase{start: time.Now(), cpu: cpu, ok: ok}
}

// end returns the wall time since startPhase and the CPU time used
// meanwhile (ok false when CPU time cannot be read here).
func (p phase) end() (wall, cpu time.Duration, ok bool) {
	now, ok2 := cpuTime()
	return time.Since(p.start), now - p.cpu, p.ok && ok2
}

// cpuPerEvent is CPU microseconds per event, or nil when not measured.
func cpuPerEvent(cpu time.Duration, ok bool, events int) *float64 {
	if !ok || events <= 0 {
		return nil
	}
	return f64(round3(float64(cpu) / float64(time.Microsecond) / float64(events)))
}
