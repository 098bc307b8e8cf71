//go:build race

package reliability

// raceEnabled: this binary runs under the race detector, which slows every
// goroutine several times over; tests that bound latencies skip (CI runs
// them again without it).
const raceEnabled = true
