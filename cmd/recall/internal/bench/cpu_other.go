//go:build !unix

package bench

import "time"

// cpuTime is not measured where getrusage does not exist: the CPU numbers
// are then null.
func cpuTime() (time.Duration, bool) { return 0, false }
