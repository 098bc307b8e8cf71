package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
)

// Bounds TestTenantFairness states for the victim's requests under each
// attack.
const (
	fairMaxLatency = 3 * time.Second // the victim's worst request
	fairPhase      = 6 * time.Second // each attack runs this long
)

// TestTenantFairness: acme attacks the HTTP edge of a real stack while
// globex (the victim) keeps working — posting events, reading its memory,
// its console list and session page. Attacks, each for fairPhase, then all
// at once: 16 large and 16 small request bodies announced and never sent;
// a flood of console session pages over acme's six 8 MB sessions, console
// lists, compactions and queries from 22 concurrent clients; 3,000 idle
// connections without credentials from another address. Globex gets only
// 2xx, its worst latency stays under fairMaxLatency, and no service
// connection is disconnected or falls behind (slow consumer).
//
// Its bounds are latencies, so it skips under the race detector (which
// slows every goroutine several times over and measures itself); .ci/test,
// the README's test command, runs this package without it.
func TestTenantFairness(t *testing.T) {
	if raceEnabled {
		t.Skip("latency bounds: run without -race (as .ci/test does)")
	}
	h := newHarness(t)
	h.Provider = llm.NewOffline()
	h.startExtractor()
	h.startCompactor()
	base := h.startIngest()
	seedFairness(t, h)
	marks := natsTrouble(h)
	seededRSS := procStatus("VmRSS")

	phases := []struct {
		name    string
		attacks []func(ctx context.Context, a *attackStats)
	}{
		{"slow bodies", []func(context.Context, *attackStats){slowBodies(t, base)}},
		{"console, compact and query flood", []func(context.Context, *attackStats){readFlood(base)}},
		{"3,000 idle connections", []func(context.Context, *attackStats){idleConns(t, base)}},
		{"all at once", []func(context.Context, *attackStats){slowBodies(t, base), readFlood(base), idleConns(t, base)}},
	}
	var peakRSS int64
	for _, ph := range phases {
		ctx, cancel := context.WithTimeout(context.Background(), fairPhase)
		a := &attackStats{statuses: map[int]int{}}
		a.underway.Add(len(ph.attacks))
		var wg sync.WaitGroup
		for _, attack := range ph.attacks {
			wg.Add(1)
			go func() { defer wg.Done(); attack(ctx, a) }()
		}
		a.underway.Wait() // every attack is under way (or over)
		v := victimLoad(ctx, base)
		peakRSS = max(peakRSS, procStatus("VmRSS"))
		cancel()
		wg.Wait()
		t.Logf("RELIABILITY fairness %s: globex %d requests, statuses %v, p50 %v, p99 %v, worst %v; acme's statuses %v",
			ph.name, len(v.latencies), v.statuses, v.quantile(.5), v.quantile(.99), v.quantile(1), a.snapshot())
		for status := range v.statuses {
			if status < 200 || status > 299 {
				t.Errorf("%s: globex got %d (%d times)", ph.name, status, v.statuses[status])
			}
		}
		if worst := v.quantile(1); worst > fairMaxLatency {
			t.Errorf("%s: globex's worst request took %v, bound %v", ph.name, worst, fairMaxLatency)
		}
		if len(v.latencies) < 4 {
			t.Errorf("%s: globex made only %d requests", ph.name, len(v.latencies))
		}
	}
	if n := marks(); n > 0 {
		t.Errorf("%d NATS disconnects or slow consumers logged during the attacks", n)
	}
	t.Logf("RELIABILITY fairness: RSS of the test process (NATS server, services, clients) %.0f MiB once seeded, peak %.0f MiB during the attacks",
		float64(seededRSS)/1024, float64(peakRSS)/1024)
}

// seedFairness stores acme's six 8 MB sessions (20 records of 400 KiB)
// and globex's small session b1 with a memory.
func seedFairness(t *testing.T, h *harness) {
	t.Helper()
	for s := range 6 {
		session := fmt.Sprintf("big%d", s)
		evs := make([]event.Event, 20)
		for n := range evs {
			evs[n] = transcriptEvent(tenantA, session, n, 400<<10)
		}
		publishSession(t, h, tenantA, evs)
	}
	publishSession(t, h, tenantB, []event.Event{eventtest.NewSession("", "b1").User("0", "hello")})
	mem, err := h.js.KeyValue(context.Background(), events.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Put(context.Background(), events.MemoryKey(tenantB, "b1"),
		[]byte(`{"notes":"# Notes","last_summarized_seq":1,"covered_seq":1,"extractions":1,"usage":{"input_tokens":1,"output_tokens":1}}`)); err != nil {
		t.Fatal(err)
	}
}

// natsTrouble returns a function counting the NATS disconnects and slow
// consumers the services logged since natsTrouble was called.
func natsTrouble(h *harness) func() int {
	count := func() int {
		s := h.logs.String()
		return strings.Count(s, "NATS disconnected") + strings.Count(s, "NATS slow consumer")
	}
	before := count()
	return func() int { return count() - before }
}

// attackStats counts the statuses acme got. Each attack calls the func
// underway returns once it is in full force, or when it ends without.
type attackStats struct {
	mu       sync.Mutex
	statuses map[int]int
	underway sync.WaitGroup
}

// begun is an attack's "under way" signal; calls after the first do nothing.
func (a *attackStats) begun() func() { return sync.OnceFunc(a.underway.Done) }

func (a *attackStats) add(status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.statuses[status]++
}

func (a *attackStats) snapshot() map[int]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.statuses)
}

// slowBodies announces 16 large (8 MiB) and 16 small (512 KiB) bodies
// with acme's token and sends none of them until ctx is done.
func slowBodies(t *testing.T, base string) func(context.Context, *attackStats) {
	return func(ctx context.Context, a *attackStats) {
		begun := a.begun()
		defer begun()
		addr := strings.TrimPrefix(base, "http://")
		var conns []net.Conn
		for i := range 32 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Errorf("slow body %d: %v", i, err)
				continue
			}
			size := 8 << 20
			if i%2 == 1 {
				size = 512 << 10
			}
			fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/cloudevents-batch+json\r\nContent-Length: %d\r\n\r\n", tokenA, size)
			conns = append(conns, c)
		}
		begun()
		<-ctx.Done()
		for _, c := range conns {
			// A refused body was answered at once: count its status.
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			var b [12]byte
			if n, _ := io.ReadFull(c, b[:]); n == 12 {
				var status int
				_, _ = fmt.Sscanf(string(b[9:12]), "%d", &status)
				a.add(status)
			}
			c.Close()
		}
	}
}

// readFlood runs 22 clients of acme until ctx is done: 12 reading console
// session pages of its six large sessions, 2 its console list, 4
// compacting and 4 querying.
func readFlood(base string) func(context.Context, *attackStats) {
	return func(ctx context.Context, a *attackStats) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
		defer client.CloseIdleConnections()
		begun := a.begun() // at the flood's first answer
		defer begun()
		var wg sync.WaitGroup
		do := func(method, path string) {
			defer wg.Done()
			for ctx.Err() == nil {
				status, _, err := fairRequest(ctx, client, method, base+path, tokenA)
				if err == nil {
					a.add(status)
					begun()
				}
			}
		}
		for i := range 12 {
			wg.Add(1)
			go do("GET", fmt.Sprintf("/console/api/tenants/%s/sessions/big%d", tenantA, i%6))
		}
		for range 2 {
			wg.Add(1)
			go do("GET", "/console/api/tenants/"+tenantA+"/sessions")
		}
		for i := range 4 {
			wg.Add(2)
			go do("POST", fmt.Sprintf("/v1/sessions/big%d/compact", i))
			go do("POST", fmt.Sprintf("/v1/sessions/big%d/query", i))
		}
		wg.Wait()
	}
}

// idleConns opens 3,000 connections from 127.0.0.2 that send nothing and
// holds them until ctx is done.
func idleConns(t *testing.T, base string) func(context.Context, *attackStats) {
	return func(ctx context.Context, a *attackStats) {
		begun := a.begun()
		defer begun()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: time.Second}
		addr := strings.TrimPrefix(base, "http://")
		var conns []net.Conn
		for range 3000 {
			if ctx.Err() != nil {
				break
			}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				// The edge no longer accepts (its connection bound and
				// the kernel's backlog are full): in full force.
				begun()
				continue
			}
			if conns = append(conns, c); len(conns) == 1000 {
				begun()
			}
		}
		begun()
		<-ctx.Done()
		for _, c := range conns {
			c.Close()
		}
		if len(conns) < 1000 {
			t.Logf("only %d idle connections opened", len(conns))
		}
	}
}

// victimRun is what globex saw.
type victimRun struct {
	statuses  map[int]int
	latencies []time.Duration
}

func (v *victimRun) quantile(q float64) time.Duration {
	if len(v.latencies) == 0 {
		return 0
	}
	s := slices.Clone(v.latencies)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// victimLoad runs globex's work in turn until ctx is done: post an event, read
// its memory, its console list and its session page.
func victimLoad(ctx context.Context, base string) *victimRun {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	v := &victimRun{statuses: map[int]int{}}
	steps := []struct{ method, path string }{
		{"POST", "/v1/events"},
		{"GET", "/v1/sessions/b1/memory"},
		{"GET", "/console/api/tenants/" + tenantB + "/sessions"},
		{"GET", "/console/api/tenants/" + tenantB + "/sessions/b1"},
	}
	for i := 0; ctx.Err() == nil; i++ {
		st := steps[i%len(steps)]
		start := time.Now()
		// The victim's own requests are not cut by the phase's end.
		status, _, err := fairRequest(context.Background(), client, st.method, base+st.path, tokenB)
		if err != nil {
			status = -1
		}
		v.latencies = append(v.latencies, time.Since(start))
		v.statuses[status]++
	}
	return v
}

// fairRequest sends one request; a POST /v1/events carries a new event,
// a query a question, other POSTs an empty JSON object.
func fairRequest(ctx context.Context, client *http.Client, method, url, token string) (int, []byte, error) {
	var body io.Reader
	ct := ""
	if method == "POST" {
		body, ct = strings.NewReader(`{}`), "application/json"
		if strings.HasSuffix(url, "/v1/events") {
			e, err := json.Marshal(eventtest.Session{ID: "b1", Source: "fair"}.User(fmt.Sprintf("v%d", time.Now().UnixNano()), "hi"))
			if err != nil {
				return 0, nil, err
			}
			body, ct = bytes.NewReader(e), "application/cloudevents+json"
		}
	}
	if strings.HasSuffix(url, "/query") {
		body = strings.NewReader(`{"question":"what happened?"}`)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// procStatus reads a kB field of /proc/self/status (0 when unavailable).
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			_, _ = fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb
		}
	}
	return 0
}
