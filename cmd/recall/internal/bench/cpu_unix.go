//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) the process used so far, from
// getrusage(RUSAGE_SELF): every goroutine of the bench, of the services it
// runs and of the embedded server it starts.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
