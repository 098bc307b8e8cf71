package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
)

const (
	// compactBackgroundMessages is the transcript length of each background
	// session.
	compactBackgroundMessages = 8
	// compactUnsummarized is how many records of a measured session follow
	// its last summarized record: the suffix a compaction reads and keeps.
	compactUnsummarized = 48
	// compactContextTokens is the context size the platform reports with
	// its request (platforms know it: it is why they compact).
	compactContextTokens = 160000
)

// benchNotes is a filled memory document of a few KB: the default template
// with every section's description followed by a paragraph.
func benchNotes(g *benchgen.Gen, session string) string {
	var b strings.Builder
	for _, line := range strings.Split(memory.DefaultTemplate, "\n") {
		b.WriteString(line)
		b.WriteByte('\n')
		if memory.IsDescriptionLine(line) {
			for _, blk := range g.Message(session).Content {
				if blk.Type == events.BlockText {
					b.WriteString(blk.Text[:min(len(blk.Text), 400)])
					b.WriteByte('\n')
					break
				}
			}
		}
	}
	return b.String()
}

func runCompaction(ctx context.Context, e *env) error {
	r := &e.res.Compaction
	bg := benchgen.SessionIDs("c", e.sizes.compactSessions)
	measured := make([]string, len(e.sizes.compactSizes))
	for i, n := range e.sizes.compactSizes {
		measured[i] = fmt.Sprintf("big%d", n)
	}
	g := benchgen.New(7)
	seqs, spans, err := fillCompactionSessions(ctx, e, g, bg, measured)
	if err != nil {
		return err
	}
	r.Sessions = len(bg) + len(measured)
	kv, err := writeCompactionMemory(ctx, e, g, append(append([]string(nil), bg...), measured...), seqs)
	if err != nil {
		return err
	}
	cfg := compactorsvc.Config{NATS: natsconn.Config{URL: e.url}, Config: e.provisionConfig()}
	svc, err := startService(ctx, "compactor", func(ctx context.Context) error {
		return compactorsvc.Run(ctx, cfg, e.log.With("service", "compactor"))
	}, func(ctx context.Context) error {
		_, err := compactOnce(ctx, e.nc, measured[0])
		return err
	})
	if err != nil {
		return err
	}
	defer svc.stop()
	fl, err := newFloor(e.nc, e.layout(), kv)
	if err != nil {
		return err
	}
	defer fl.close()
	m, err := measureCompactions(ctx, e, fl, measured)
	if err != nil {
		return err
	}
	summarizeCompactions(e, m)
	return measureConcurrentSteps(ctx, e, fl, bg, spans)
}

// fillCompactionSessions stores compactBackgroundMessages records for every
// background session and the sizes' records for the measured ones, and
// returns every session's stream sequences, in order, and its first and
// last sequence.
func fillCompactionSessions(ctx context.Context, e *env, g *benchgen.Gen, bg, measured []string) (map[string][]uint64, map[string]seqSpan, error) {
	plan := fillPlan{}
	for _, s := range bg {
		plan.sessions = append(plan.sessions, s)
		plan.counts = append(plan.counts, compactBackgroundMessages)
	}
	for i, s := range measured {
		plan.sessions = append(plan.sessions, s)
		plan.counts = append(plan.counts, e.sizes.compactSizes[i])
	}
	seqs := make(map[string][]uint64, len(plan.sessions))
	spans := make(map[string]seqSpan, len(plan.sessions))
	t0 := time.Now()
	if _, err := e.fill(ctx, g, plan, func(s string, seq uint64) {
		spans[s] = spans[s].add(seq)
		seqs[s] = append(seqs[s], seq)
	}); err != nil {
		return nil, nil, err
	}
	e.progress("   pre-filled %d sessions, %d events in %s", len(plan.sessions), plan.total(), time.Since(t0).Round(time.Millisecond))
	return seqs, spans, nil
}

// writeCompactionMemory writes a memory record for every session,
// summarized as an extraction leaves it: up to compactUnsummarized records
// before the end (the measured sessions) or, in a session shorter than
// twice that (the background ones), up to its middle, at an assistant
// answer (turn%4 == 3, a safe point: no open tool_use).
func writeCompactionMemory(ctx context.Context, e *env, g *benchgen.Gen, sessions []string, seqs map[string][]uint64) (jetstream.KeyValue, error) {
	t0 := time.Now()
	kv, err := e.js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", events.BucketMemory, err)
	}
	for _, s := range sessions {
		rec := events.MemoryRecord{Notes: benchNotes(g, s), UpdatedAt: time.Now(), Extractions: 3}
		if l := seqs[s]; len(l) >= 4 {
			turn := max(len(l)-compactUnsummarized, len(l)/2)
			turn -= (turn - 3) % 4 // back to an assistant answer
			rec.LastSummarizedID = fmt.Sprintf("%s-m%06d", s, turn)
			rec.LastSummarizedSeq = l[turn]
			rec.CoveredSeq = l[len(l)-1]
		}
		b, _ := json.Marshal(rec)
		if _, err := kv.Put(ctx, events.MemoryKey(benchTenant, s), b); err != nil {
			return nil, fmt.Errorf("writing memory: %w", err)
		}
	}
	e.progress("   wrote %d memory records in %s", len(sessions), time.Since(t0).Round(time.Millisecond))
	return kv, nil
}

// compactionSamples are the measured latencies of each size, and of its
// floor, and how many records the last compaction kept.
type compactionSamples struct {
	lat, floor []latencies
	kept       []int
}

// measureCompactions compacts the measured sessions round-robin (after a
// tenth as many warm-up rounds), each followed by its floor.
func measureCompactions(ctx context.Context, e *env, fl *floor, measured []string) (compactionSamples, error) {
	m := compactionSamples{lat: make([]latencies, len(measured)), floor: make([]latencies, len(measured)), kept: make([]int, len(measured))}
	warm := e.sizes.compactRequests / 10
	t0 := time.Now()
	for i := 0; i < e.sizes.compactRequests+warm; i++ {
		if i == warm {
			e.progress("   %d warm-up rounds took %s", warm, time.Since(t0).Round(time.Millisecond))
		}
		for k := range measured { // round-robin from a rotating start: noise and order hit every size alike
			j := (k + i) % len(measured)
			s := measured[j]
			rep, size, d, err := compactOnceSized(ctx, e.nc, s)
			if err != nil {
				return m, fmt.Errorf("compacting %s: %w", s, err)
			}
			if !rep.Served {
				return m, fmt.Errorf("compacting %s: not served: outcome %s: %s", s, rep.Outcome, rep.Reason)
			}
			m.kept[j] = rep.KeptCount
			fd, err := fl.once(ctx, s, rep.FirstKeptSeq, rep.LastSeq, size)
			if err != nil {
				return m, err
			}
			if i >= warm {
				m.lat[j] = append(m.lat[j], d)
				m.floor[j] = append(m.floor[j], fd)
			}
		}
	}
	return m, nil
}

// summarizeCompactions fills the compaction result from the samples: each
// size against its floor, the worst ratios, the flatness.
func summarizeCompactions(e *env, m compactionSamples) {
	r := &e.res.Compaction
	for j, n := range e.sizes.compactSizes {
		sz := CompactionSize{TranscriptMessages: n, Requests: len(m.lat[j]),
			P50US: round1(m.lat[j].percentile(50)), P99US: round1(m.lat[j].percentile(99)), KeptMessages: m.kept[j],
			FloorP50US: round1(m.floor[j].percentile(50)), FloorP99US: round1(m.floor[j].percentile(99))}
		sz.RatioP50VsFloor = round3(sz.P50US / sz.FloorP50US)
		sz.RatioP99VsFloor = round3(sz.P99US / sz.FloorP99US)
		r.BySize = append(r.BySize, sz)
		e.progress("   compaction of a %d-message transcript: p50 %.0f us, p99 %.0f us, %d kept; floor p50 %.0f us, p99 %.0f us (%.2f× / %.2f×)",
			n, sz.P50US, sz.P99US, m.kept[j], sz.FloorP50US, sz.FloorP99US, sz.RatioP50VsFloor, sz.RatioP99VsFloor)
	}
	for _, sz := range r.BySize { // the worst size decides
		r.RatioP50VsFloor = f64(max(deref(r.RatioP50VsFloor), sz.RatioP50VsFloor))
		r.RatioP99VsFloor = f64(max(deref(r.RatioP99VsFloor), sz.RatioP99VsFloor))
	}
	e.res.Raw.CompactionFloorP50US = f64(r.BySize[len(r.BySize)-1].FloorP50US)
	e.res.Raw.CompactionFloorP99US = f64(r.BySize[len(r.BySize)-1].FloorP99US)
	largest := r.BySize[len(r.BySize)-1].P99US
	if raw := e.res.Raw; raw.RequestReplyP99US != nil && raw.KVGetP99US != nil {
		r.RatioP99VsRaw = f64(round3(largest / (*raw.RequestReplyP99US + *raw.KVGetP99US)))
	}
	r.Flatness = f64(round3(largest / r.BySize[0].P99US))
}

// compactOutcome is what the bench reads of a compaction reply; the kept
// events and the summary are skipped, not decoded (the floor does not decode
// what it reads either, and a platform's decoding is the platform's cost).
type compactOutcome struct {
	Outcome      string `json:"outcome"`
	Served       bool   `json:"served"`
	Reason       string `json:"reason"`
	KeptCount    int    `json:"kept_count"`
	FirstKeptSeq uint64 `json:"first_kept_seq"`
	LastSeq      uint64 `json:"last_seq"`
}

// compactOnce asks the compactor to compact session, as a platform would
// when its context is full, and decodes the reply's outcome.
func compactOnce(ctx context.Context, nc *nats.Conn, session string) (*compactOutcome, error) {
	rep, _, _, err := compactOnceSized(ctx, nc, session)
	return rep, err
}

// compactOnceSized is compactOnce that also returns the reply's size in
// bytes (reassembled) and the round trip: from the request to the reply's
// last byte, before the caller decodes it (the floor does not decode its
// reply either).
func compactOnceSized(ctx context.Context, nc *nats.Conn, session string) (*compactOutcome, int, time.Duration, error) {
	wait := int64(0)
	body, _ := json.Marshal(events.CompactRequest{ContextTokens: compactContextTokens, WaitTimeoutMS: &wait})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t0 := time.Now()
	m, err := chunked.Request(rctx, nc, events.APISubject(events.VerbCompact, benchTenant, session), nil, body)
	d := time.Since(t0)
	if err != nil {
		return nil, 0, d, err
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code == "429" {
		return nil, 0, d, fmt.Errorf("compactor %w: %s", errRefused, m.Header.Get("Nats-Service-Error"))
	} else if code != "" {
		return nil, 0, d, fmt.Errorf("compactor error %s: %s", code, m.Header.Get("Nats-Service-Error"))
	}
	var rep compactOutcome
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return nil, 0, d, fmt.Errorf("decoding the compact reply: %w", err)
	}
	return &rep, len(m.Data), d, nil
}

// floor is the raw I/O a compaction cannot avoid, measured on the same
// server: one KV get of the session's memory, one batch Direct Get of the
// records the compaction kept, and a request whose reply has the
// compaction reply's size (answered by a plain subscriber).
type floor struct {
	nc      *nats.Conn
	layout  events.Layout
	kv      jetstream.KeyValue
	echo    *nats.Subscription
	replies map[int][]byte
}

const floorSubject = "bench.floor.reply"

func newFloor(nc *nats.Conn, layout events.Layout, kv jetstream.KeyValue) (*floor, error) {
	f := &floor{nc: nc, layout: layout, kv: kv, replies: map[int][]byte{}}
	var mu sync.Mutex
	sub, err := nc.Subscribe(floorSubject, func(m *nats.Msg) {
		n, _ := strconv.Atoi(string(m.Data))
		mu.Lock()
		b, ok := f.replies[n]
		if !ok {
			b = bytes.Repeat([]byte("x"), n)
			f.replies[n] = b
		}
		mu.Unlock()
		_ = m.Respond(b)
	})
	if err != nil {
		return nil, err
	}
	f.echo = sub
	return f, nc.Flush()
}

func (f *floor) close() { _ = f.echo.Unsubscribe() }

// once measures the floor of a compaction of session whose reply kept
// records first..last and was size bytes long.
func (f *floor) once(ctx context.Context, session string, first, last uint64, size int) (time.Duration, error) {
	t0 := time.Now()
	if err := f.reads(ctx, session, first, last); err != nil {
		return 0, err
	}
	if _, err := f.nc.RequestWithContext(ctx, floorSubject, []byte(strconv.Itoa(size))); err != nil {
		return 0, fmt.Errorf("floor: reply of %d bytes: %w", size, err)
	}
	return time.Since(t0), nil
}

// reads are the reads of a compaction of session that kept records
// first..last: the KV get of its memory and one batch Direct Get of the
// records. They may take a minute: the floor has no admission, so at 256
// at once all 256 wait on the server (the compactor admits 64 and refuses
// the rest), and on a loaded machine they outlast the KV's default 5 s and
// a compaction request's 10 s.
func (f *floor) reads(ctx context.Context, session string, first, last uint64) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := f.kv.Get(ctx, events.MemoryKey(benchTenant, session)); err != nil {
		return fmt.Errorf("floor: reading memory: %w", err)
	}
	n := 0
	err := transcript.ScanRaw(ctx, f.nc, f.layout.Stream(benchTenant, session), f.layout.Subject(benchTenant, session), first, last, int(last-first+1), func(transcript.Raw) bool {
		n++
		return true
	})
	if err != nil {
		return fmt.Errorf("floor: reading records: %w", err)
	}
	return nil
}
