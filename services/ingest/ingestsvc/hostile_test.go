package ingestsvc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// TestBinaryAttributesPercentDecoded: ce-* header values are percent-decoded
// once (CloudEvents HTTP binding) and stored as the attribute they encode.
// The source is a URI-reference, kept in its URI form: the header
// "t%C3%BF" (UTF-8 of "tÿ", percent-encoded) and the raw UTF-8 header "tÿ"
// both store the source "t%C3%BF" — never the double-encoded "t%25C3%25BF"
// a reader would decode to something else. A header that is not UTF-8 once
// decoded (a raw Latin-1 byte, "%FF") is rejected, not stored mangled.
func TestBinaryAttributesPercentDecoded(t *testing.T) {
	e := startEnv(t, nil)
	for i, c := range []struct {
		header, want string
		status       int
	}{
		{"t%C3%BF", "t%C3%BF", http.StatusAccepted},
		{"tÿ", "t%C3%BF", http.StatusAccepted},
		{"agent%20one", "agent%20one", http.StatusAccepted},
		{"https%3A%2F%2Fexample.com%2Fa", "https://example.com/a", http.StatusAccepted},
		{"t\xff", "", http.StatusBadRequest},
		{"t%FF", "", http.StatusBadRequest},
	} {
		hdr := map[string]string{"Content-Type": "application/json", "ce-specversion": "1.0", "ce-id": fmt.Sprintf("src%d", i),
			"ce-source": c.header, "ce-type": events.TypeMessage, "ce-subject": "sess"}
		before := len(e.stored())
		status, _, body := e.post("/v1/events", tokenAcme, hdr, mustMarshal(t, message("u1", "hi")))
		if status != c.status {
			t.Fatalf("%q: %d %s", c.header, status, body)
		}
		stored := e.stored()
		if c.status != http.StatusAccepted {
			if len(stored) != before {
				t.Fatalf("%q: rejected but stored", c.header)
			}
			continue
		}
		m := stored[len(stored)-1]
		ev, err := natsce.Decode(m.Header, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Source() != c.want {
			t.Errorf("ce-source %q stored as %q, want %q", c.header, ev.Source(), c.want)
		}
	}
}

// heapSampler records the peak of the heap (HeapAlloc) while a test runs.
// HeapAlloc counts garbage until the next collection, so sampleHeap lowers
// the GC target until Stop: what the peak then measures is what the edge
// holds at once, not how much garbage the bodies it finished left before
// the collector ran (more of them finish first on a loaded machine).
type heapSampler struct {
	gcPercent int
	peak      atomic.Uint64
	stop      chan struct{}
	done      chan struct{}
}

func sampleHeap() *heapSampler {
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{}), gcPercent: debug.SetGCPercent(10)}
	runtime.GC()
	go func() {
		defer close(s.done)
		var ms runtime.MemStats
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > s.peak.Load() {
				s.peak.Store(ms.HeapAlloc)
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) Stop() uint64 {
	close(s.stop)
	<-s.done
	debug.SetGCPercent(s.gcPercent)
	return s.peak.Load()
}

// hostileBatch is an 8 MiB batch of tiny elements (about 2.8 million).
func hostileBatch(size int) []byte {
	var b bytes.Buffer
	b.Grow(size)
	b.WriteByte('[')
	for b.Len() < size-3 {
		b.WriteString("{},")
	}
	b.WriteString("{}]")
	return b.Bytes()
}

// heapBound is the live-heap bound stated in docs/reliability.md for 20
// concurrent hostile requests of one kind against the default limits
// (8 MiB bodies, 16 bodies in flight).
const heapBound = 64 << 20

// TestHostileBatchMemory: 20 concurrent 8 MiB batches of millions of tiny
// elements under the default limits (17 MiB bodies): the tenant's two
// large-body slots read two of them, each rejected (413) at element 1,001,
// the others get 429 before a byte is read; the live heap stays under
// heapBound (the old edge copied every element first: ≈ 384 MB per
// request).
func TestHostileBatchMemory(t *testing.T) {
	e := startEnv(t, nil)
	body := hostileBatch(8 << 20)
	base := sampleHeap()
	baseline := base.Stop()
	s := sampleHeap()
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", e.base+"/v1/events", bytes.NewReader(body))
			req.Header.Set("Content-Type", MediaBatch)
			req.Header.Set("Authorization", "Bearer "+tokenAcme)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				// The edge may close the connection before reading the
				// whole body; the status is what matters when it arrives.
				statuses[i] = -1
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	peak := s.Stop()
	for i, st := range statuses {
		if st != http.StatusRequestEntityTooLarge && st != http.StatusTooManyRequests && st != -1 {
			t.Errorf("request %d: status %d, want 413 (or 429 over the tenant's large-body slots)", i, st)
		}
	}
	grew := int64(peak) - int64(baseline)
	t.Logf("RELIABILITY hostile batches: 20 × 8 MiB (%d elements), statuses %v, live heap peak %.1f MiB (baseline %.1f MiB, +%.1f MiB; the request bodies themselves are %.1f MiB of the test's own heap)",
		strings.Count(string(body), "{}"), statuses, mib(peak), mib(baseline), float64(grew)/(1<<20), mib(uint64(len(body))))
	if grew > heapBound {
		t.Fatalf("live heap grew by %.1f MiB, bound %d MiB", float64(grew)/(1<<20), heapBound>>20)
	}
	if n := len(e.stored()); n != 0 {
		t.Fatalf("%d events stored", n)
	}
}

// TestSlowBodyMemory: 20 authenticated connections of one tenant announce
// 8 MiB bodies and send nothing. No buffer is sized from Content-Length,
// at most the tenant's large-body share (2) is read at once (the rest get
// 429 with Retry-After at once), and the read deadline ends the others
// with 408.
func TestSlowBodyMemory(t *testing.T) {
	e := startEnv(t, func(c *Config) { c.BodyTimeout = time.Second })
	base := sampleHeap()
	baseline := base.Stop()
	s := sampleHeap()
	addr := strings.TrimPrefix(e.base, "http://")
	var wg sync.WaitGroup
	statuses := make([]string, 20)
	start := time.Now()
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				statuses[i] = err.Error()
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", tokenAcme, MediaBatch, 8<<20)
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				statuses[i] = err.Error()
				return
			}
			resp.Body.Close()
			statuses[i] = fmt.Sprint(resp.StatusCode, " ", resp.Header.Get("Retry-After"))
		}()
	}
	wg.Wait()
	peak := s.Stop()
	took := time.Since(start)
	counts := map[string]int{}
	for _, st := range statuses {
		counts[st]++
	}
	t.Logf("RELIABILITY slow bodies: 20 connections announcing 8 MiB, sending nothing: %v after %v; live heap peak %.1f MiB (baseline %.1f MiB)",
		counts, took.Round(10*time.Millisecond), mib(peak), mib(baseline))
	if counts["408 "] != 2 || counts["429 1"] != 18 {
		t.Errorf("statuses %v, want 2 × 408 (read deadline) and 18 × 429 with Retry-After 1 (over the tenant's share)", counts)
	}
	if grew := int64(peak) - int64(baseline); grew > heapBound {
		t.Fatalf("live heap grew by %.1f MiB, bound %d MiB", float64(grew)/(1<<20), heapBound>>20)
	}
	if took > 10*time.Second {
		t.Fatalf("slow bodies held for %v, read deadline 1s", took)
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// TestSessionAPIBodyOverNATSPayload: a session-API body that cannot fit in
// one NATS message is 413 before anything is sent, not a 502 from NATS.
func TestSessionAPIBodyOverNATSPayload(t *testing.T) {
	e := startEnv(t, nil)
	body := []byte(`{"pad":"` + strings.Repeat("x", int(e.nc.MaxPayload())) + `"}`)
	status, hdr, resp := e.post("/v1/sessions/s1/compact", tokenAcme, map[string]string{"Content-Type": "application/json"}, body)
	if status != http.StatusRequestEntityTooLarge || hdr.Get("Content-Type") != MediaProblem {
		t.Fatalf("status %d %s: %s", status, hdr.Get("Content-Type"), resp)
	}
	t.Logf("%d %s", status, resp)
	status, _, resp = e.post("/v1/sessions/s1/compact", tokenAcme, map[string]string{"Content-Type": "application/json"}, []byte(`{"a":1,"a":2}`))
	if status != http.StatusBadRequest || !strings.Contains(string(resp), `duplicate member name \"a\"`) {
		t.Fatalf("duplicate member: %d %s", status, resp)
	}
}
