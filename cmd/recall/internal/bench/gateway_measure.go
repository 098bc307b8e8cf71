package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/gateway/wire"
)

// gatewayHistory is a Messages request body: calls tool calls with results
// of resultBytes each, ending with a user turn; extra merges into the body.
func gatewayHistory(tag string, calls, resultBytes int, extra map[string]any) []byte {
	msgs := []map[string]any{{"role": "user", "content": "Audit the " + tag + " ledgers."}}
	for i := 1; i <= calls; i++ {
		id := fmt.Sprintf("toolu_%s_%d", tag, i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]string{"command": fmt.Sprintf("cat ledger%d.txt", i)}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id,
				"content": strings.Repeat(fmt.Sprintf("ledger %d entry balanced; ", i), resultBytes/26+1)}}})
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": "Checked."}, map[string]any{"role": "user", "content": "Go on."})
	req := map[string]any{"model": "claude-bench", "max_tokens": 1024, "messages": msgs}
	for k, v := range extra {
		req[k] = v
	}
	b, _ := json.Marshal(req)
	return b
}

// overhead measures n requests that do not compact, each sent directly and
// through the gateway (alternating which goes first), streamed and not,
// then the CPU of n of each on their own.
func (b *gatewayBench) overhead(ctx context.Context, e *env, r *GatewayResult, n int) error {
	plain := gatewayHistory("ov", 12, 2000, nil)
	stream := gatewayHistory("ov", 12, 2000, map[string]any{"stream": true})
	r.Requests, r.RequestBytes = n, len(plain)
	var direct, via, dTTFB, gTTFB latencies
	for i := -20; i < n; i++ { // 20 warm-up pairs
		session := fmt.Sprintf("gwb-%d", (i+20)%16)
		for k := range 2 {
			body, base := plain, b.up
			if (i+k)%2 == 1 {
				base = b.gw
			}
			if i%2 == 1 {
				body = stream
			}
			ttfb, total, status, err := b.call(ctx, base, session, body)
			if err != nil || status != 200 {
				return fmt.Errorf("a request to %s: status %d, %v", base, status, err)
			}
			if i < 0 {
				continue
			}
			switch {
			case base == b.up && i%2 == 0:
				direct = append(direct, total)
			case i%2 == 0:
				via = append(via, total)
			case base == b.up:
				dTTFB = append(dTTFB, ttfb)
			default:
				gTTFB = append(gTTFB, ttfb)
			}
		}
	}
	ms := func(l latencies, p float64) float64 { return l.percentile(p) / 1000 }
	r.DirectP50MS, r.DirectP99MS = f64(round2(ms(direct, 50))), f64(round2(ms(direct, 99)))
	r.OverheadP50MS = f64(round2(ms(via, 50) - ms(direct, 50)))
	r.OverheadP99MS = f64(round2(ms(via, 99) - ms(direct, 99)))
	r.TTFBOverheadP50MS = f64(round2(ms(gTTFB, 50) - ms(dTTFB, 50)))
	cpu, err := b.cpuPerRequest(ctx, plain, n)
	if err != nil {
		return err
	}
	r.CPUUSPerRequest = cpu
	e.progress("   %d requests of %d bytes: direct p50 %.2f ms, overhead p50 %.2f ms p99 %.2f ms, first byte of a stream +%.2f ms p50",
		n, len(plain), *r.DirectP50MS, *r.OverheadP50MS, *r.OverheadP99MS, *r.TTFBOverheadP50MS)
	return nil
}

// cpuPerRequest is the process's CPU of n requests through the gateway
// minus that of n direct ones, per request (µs).
func (b *gatewayBench) cpuPerRequest(ctx context.Context, body []byte, n int) (*float64, error) {
	run := func(base string) (time.Duration, bool, error) {
		p := startPhase()
		for i := range n {
			if _, _, status, err := b.call(ctx, base, fmt.Sprintf("gwb-%d", i%16), body); err != nil || status != 200 {
				return 0, false, fmt.Errorf("a request to %s: status %d, %v", base, status, err)
			}
		}
		_, cpu, ok := p.end()
		return cpu, ok, nil
	}
	dc, ok1, err := run(b.up)
	if err != nil {
		return nil, err
	}
	gc, ok2, err := run(b.gw)
	if err != nil || !ok1 || !ok2 {
		return nil, err
	}
	return f64(round1(float64((gc - dc).Microseconds()) / float64(n))), nil
}

// compaction stores a 200k-token session as capture would (records and a
// memory whose notes cover all but the last calls) and measures k
// compact_20260112 requests with pause_after_compaction, answered from
// memory.
func (b *gatewayBench) compaction(ctx context.Context, e *env, r *GatewayResult, k int) error {
	const session = "gwb-compact"
	cm := map[string]any{"edits": []any{map[string]any{"type": "compact_20260112", "pause_after_compaction": true,
		"trigger": map[string]any{"type": "input_tokens", "value": 150000}}}}
	body := gatewayHistory("cp", 100, 8000, map[string]any{"context_management": cm})
	if err := storeGatewaySession(ctx, e, session, body); err != nil {
		return err
	}
	if ok, err := b.compacted(ctx, session, body); err != nil || !ok {
		return skipped(fmt.Sprintf("the gateway did not answer the compaction from memory (%v)", err))
	}
	var lat latencies
	p := startPhase()
	for i := range k {
		_, total, status, err := b.call(ctx, b.gw, session, body)
		if err != nil || status != 200 {
			return fmt.Errorf("compaction request %d: status %d, %v", i, status, err)
		}
		lat = append(lat, total)
	}
	_, cpu, ok := p.end()
	r.CompactTokens, r.CompactRequests = len(body)/4, k
	r.CompactP50MS, r.CompactP99MS = f64(round2(lat.percentile(50)/1000)), f64(round2(lat.percentile(99)/1000))
	r.CompactCPUUS = cpuPerEvent(cpu, ok, k)
	floor, err := compactFloor(ctx, e, session, int64(len(body)/4), k)
	if err != nil {
		return err
	}
	r.CompactFloorCPUUS = floor
	e.progress("   %d compactions of a %d-token history from memory: p50 %.2f ms, p99 %.2f ms; CPU %s us each, %s us of it the compactor's (floor)",
		k, len(body)/4, *r.CompactP50MS, *r.CompactP99MS, fmtUS(r.CompactCPUUS), fmtUS(floor))
	return nil
}

// compactFloor is the process's CPU per compaction of session asked of
// the compactor directly, as the gateway asks it (a preview over the
// edit's trigger), k times.
func compactFloor(ctx context.Context, e *env, session string, tokens int64, k int) (*float64, error) {
	cl, err := client.New(e.js, benchTenant)
	if err != nil {
		return nil, err
	}
	req := events.CompactRequest{Preview: true, Trigger: events.TriggerManual, AutoCompactThreshold: 150000, ContextTokens: tokens}
	p := startPhase()
	for i := range k {
		rep, err := cl.Compact(ctx, session, req)
		if err != nil || !rep.Served {
			return nil, fmt.Errorf("floor compaction %d: %v (served %v)", i, err, rep != nil && rep.Served)
		}
	}
	_, cpu, ok := p.end()
	return cpuPerEvent(cpu, ok, k), nil
}

func fmtUS(v *float64) string {
	if v == nil {
		return "?"
	}
	return fmt.Sprintf("%.0f", *v)
}

// compacted reports whether the gateway answers body with a compaction
// block.
func (b *gatewayBench) compacted(ctx context.Context, session string, body []byte) (bool, error) {
	req, _ := newBenchRequest(ctx, b.gw+"/v1/messages", session, body)
	resp, err := b.hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return bytes.Contains(buf.Bytes(), []byte(`"type":"compaction"`)), nil
}

// storeGatewaySession publishes the request's messages as capture stores
// them (wire.RecordIDs) and a memory covering all but the last 10 calls.
func storeGatewaySession(ctx context.Context, e *env, session string, body []byte) error {
	req, err := wire.DecodeMessages(body)
	if err != nil {
		return err
	}
	ids := wire.RecordIDs(session, req.Messages)
	s := eventtest.NewSession(benchTenant, session)
	evs := make([]event.Event, 0, len(ids))
	for i := range req.Messages {
		m := req.Messages[i].Message
		m.UUID = ids[i]
		evs = append(evs, s.Message(ids[i], m))
	}
	cl, err := client.New(e.js, benchTenant)
	if err != nil {
		return err
	}
	if _, err := cl.PublishBatch(ctx, evs); err != nil {
		return fmt.Errorf("storing the session: %w", err)
	}
	notes := strings.Replace(memory.DefaultTemplate, "# Current State\n", "# Current State\nAuditing ledgers 1 to 90; next: 91.\n", 1)
	rec, _ := json.Marshal(events.MemoryRecord{Notes: notes, LastSummarizedID: ids[len(ids)-23], UpdatedAt: time.Now()})
	kv, err := e.js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, events.MemoryKey(benchTenant, session), rec)
	return err
}
