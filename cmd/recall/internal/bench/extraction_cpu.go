package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// stepMeter measures a step's CPU: a phase (the process CPU time, see
// phase) and the process's threads' run-queue wait.
type stepMeter struct {
	phase
	wait   time.Duration
	waitOK bool
}

func startStepMeter() stepMeter {
	m := stepMeter{phase: startPhase()}
	m.wait, m.waitOK = runQueueWait()
	return m
}

// cpuUse is what the process used during a step.
type cpuUse struct {
	cpu, wait, wall time.Duration
	cpuOK, waitOK   bool
}

func (m stepMeter) end() cpuUse {
	var u cpuUse
	u.wall, u.cpu, u.cpuOK = m.phase.end()
	wait, ok := runQueueWait()
	u.wait, u.waitOK = wait-m.wait, ok && m.waitOK
	return u
}

// record sets step's CPU figures (its Extractions counted).
func (u cpuUse) record(step *ExtractionStep) {
	if u.wall <= 0 {
		return
	}
	if u.cpuOK {
		step.CPUS = f64(round3(u.cpu.Seconds()))
		step.CPUCores = f64(round3(u.cpu.Seconds() / u.wall.Seconds()))
		if step.Extractions > 0 {
			step.CPUMSPerExtraction = f64(round3(float64(u.cpu) / float64(time.Millisecond) / float64(step.Extractions)))
		}
	}
	if u.waitOK {
		step.RunQueueCores = f64(round3(u.wait.Seconds() / u.wall.Seconds()))
	}
}

// runQueueWait is how long the process's threads have waited for a CPU
// while runnable (the second field of Linux's /proc/self/task/*/schedstat,
// summed; the threads that exited are not counted); ok is false where it
// cannot be read.
func runQueueWait() (time.Duration, bool) {
	files, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var total int64
	ok := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		fields := strings.Fields(string(b))
		if len(fields) < 2 {
			continue
		}
		if n, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
			total, ok = total+n, true
		}
	}
	return time.Duration(total), ok
}

// overallCPU is the CPU per extraction of all steps together (nil when a
// step was not measured).
func overallCPU(steps []ExtractionStep) *float64 {
	cpu, n := 0.0, 0
	for _, s := range steps {
		if s.CPUS == nil {
			return nil
		}
		cpu += *s.CPUS
		n += s.Extractions
	}
	if n == 0 {
		return nil
	}
	return f64(round3(1000 * cpu / float64(n)))
}

// cpuNote describes a step's CPU for the progress lines and the table.
func cpuNote(s ExtractionStep) string {
	if s.CPUMSPerExtraction == nil || s.CPUCores == nil {
		return "CPU not measured"
	}
	note := fmt.Sprintf("%.2f ms CPU per extraction (%.2f cores busy", *s.CPUMSPerExtraction, *s.CPUCores)
	if s.RunQueueCores != nil {
		note += fmt.Sprintf(", %.2f threads waiting for a CPU", *s.RunQueueCores)
	}
	return note + ")"
}
