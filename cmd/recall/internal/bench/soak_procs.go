package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/recallhq/recall/pkg/retry"
)

// soakProc is one Recall service running as a child process of the soak
// (`recall <service>`), as a container runs it: configured by RECALL_*
// variables, killed with SIGKILL and started again by the soak as a
// supervisor would.
type soakProc struct {
	name    string
	bin     string
	env     []string
	ops     string // host:port of /readyz and /metrics
	logPath string

	ctx context.Context // the soak's lifetime: restarts stop with it

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current process has exited
	exitErr  error
	restarts int
	// unclean counts exits the soak did not cause (a crash, a failure to
	// start): each is a finding.
	unclean int
	killing bool
}

// soakServices are the services the soak runs, in kill rotation order. The
// gateway is not among them: it holds no state and sees no soak traffic.
var soakServices = []string{"extractor", "trigger", "compactor", "indexer", "longterm", "ingest"}

// opsEnv is the variable naming a service's operational address (the
// ingest serves /readyz and /metrics on its HTTP edge).
func opsEnv(name string) string {
	if name == "ingest" {
		return "RECALL_HTTP_ADDR"
	}
	return "RECALL_" + strings.ToUpper(name) + "_OPS_ADDR"
}

// newSoakProc prepares a service on natsURL with its operational endpoints
// on ops; its output goes to logPath.
func newSoakProc(bin, name, natsURL, ops, logPath string) *soakProc {
	env := append(os.Environ(), "RECALL_NATS_URL="+natsURL, opsEnv(name)+"="+ops, "RECALL_LLM_PROVIDER=offline",
		"RECALL_LOG_LEVEL=warn")
	return &soakProc{name: name, bin: bin, env: env, ops: ops, logPath: logPath}
}

// freeAddrs returns n distinct free loopback addresses: the listeners are
// held until all are chosen, so no two are the same port.
func freeAddrs(n int) ([]string, error) {
	var addrs []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls, addrs = append(ls, l), append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// start starts the process; a process that exits on its own is counted
// unclean and started again after a second, until ctx ends.
func (p *soakProc) start(ctx context.Context) error {
	p.ctx = ctx
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening the %s log: %w", p.name, err)
	}
	cmd := exec.Command(p.bin, p.name)
	cmd.Env, cmd.Stdout, cmd.Stderr = p.env, f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s %s: %w", p.bin, p.name, err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.exitErr = err
		killed := p.killing
		p.killing = false
		if !killed && ctx.Err() == nil {
			p.unclean++
		}
		p.mu.Unlock()
		close(exited)
		if !killed && ctx.Err() == nil {
			if retry.Pause(ctx.Done(), time.Second) {
				_ = p.start(ctx)
			}
		}
	}()
	return nil
}

// kill SIGKILLs the process, waits for it to exit and starts it again at
// once (Kubernetes restarts a killed container; its back-off starts at
// 10 s, the soak does not wait).
func (p *soakProc) kill() error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.killing = true
	p.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-exited
	p.mu.Lock()
	p.restarts++
	p.mu.Unlock()
	return p.start(p.ctx)
}

// stop sends SIGTERM and waits up to 60 s for a clean exit; a service that
// exits with an error or must be killed is reported.
func (p *soakProc) stop() error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.killing = true
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s did not stop within 60s of SIGTERM", p.name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitErr != nil {
		return fmt.Errorf("%s stopped with %v (log: %s)", p.name, p.exitErr, p.logPath)
	}
	return nil
}

// waitReady polls /readyz until it answers 200 or the deadline passes.
func (p *soakProc) waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.ops+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was not ready within %s (log: %s)", p.name, within, p.logPath)
		}
		if !retry.Pause(ctx.Done(), 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// sample reads the process's RSS and open descriptors from /proc and its
// goroutines and live heap from /metrics (go_goroutines,
// go_memstats_heap_alloc_bytes). A figure that cannot be read
// is -1.
func (p *soakProc) sample(ctx context.Context) ProcSample {
	p.mu.Lock()
	pid, restarts, unclean := p.cmd.Process.Pid, p.restarts, p.unclean
	p.mu.Unlock()
	s := procSample(p.name, pid)
	s.Restarts, s.UncleanExits = restarts, unclean
	page := scrapePage(ctx, "http://"+p.ops+"/metrics")
	s.Goroutines = gaugeValue(strings.NewReader(page), "go_goroutines")
	s.HeapBytes = gaugeValue(strings.NewReader(page), "go_memstats_heap_alloc_bytes")
	return s
}

// procSample reads pid's RSS and descriptor count (Linux /proc; -1
// elsewhere).
func procSample(name string, pid int) ProcSample {
	s := ProcSample{Name: name, PID: pid, RSSBytes: -1, HeapBytes: -1, FDs: -1, Goroutines: -1}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		s.RSSBytes = statusKB(string(b), "VmRSS:") * 1024
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.FDs = len(ents)
	}
	return s
}

// statusKB is the kB value of a /proc/<pid>/status line ("VmRSS:  1234 kB").
func statusKB(status, key string) int64 {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return -1
}

// scrapePage reads a Prometheus text page ("" when it cannot).
func scrapePage(ctx context.Context, url string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return string(b)
}

// gaugeValue finds `name value` in a Prometheus text exposition.
func gaugeValue(r io.Reader, name string) int64 {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err == nil {
				return int64(v)
			}
		}
	}
	return -1
}
