package triggersvc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// sessionKey returns "<tenant>.<session>" of a transcript subject
// (recall.transcript.<shard>.<tenant>.<session>) and the index of the dot
// that separates tenant and session.
func sessionKey(subject string) (key string, dot int, ok bool) {
	if key, ok = strings.CutPrefix(subject, events.SubjectTranscriptRoot+"."); !ok {
		return "", 0, false
	}
	if _, key, ok = strings.Cut(key, "."); !ok { // the shard
		return "", 0, false
	}
	dot = strings.IndexByte(key, '.')
	if dot <= 0 || dot == len(key)-1 {
		return "", 0, false
	}
	return key, dot, true
}

// recordOf reduces a transcript record read by Direct Get.
func recordOf(r *transcript.Record) memory.TriggerRecord {
	ts := r.Time.UnixNano()
	if r.Time.IsZero() {
		ts = 0
	}
	switch {
	case r.Message != nil:
		return memory.MessageRecord(r.Seq, ts, r.Message)
	case r.Compacting != nil:
		return memory.TriggerRecord{Seq: r.Seq, Time: ts, Kind: memory.RecCompacting}
	case r.Compacted != nil:
		return memory.TriggerRecord{Seq: r.Seq, Time: ts, Kind: memory.RecCompacted, PostTokens: r.Compacted.PostTokens}
	case r.Ended != nil:
		return memory.TriggerRecord{Seq: r.Seq, Time: ts, Kind: memory.RecEnded}
	}
	return memory.TriggerRecord{Seq: r.Seq, Time: ts, Kind: memory.RecOther}
}

// decodeRecord reduces a stored message to a TriggerRecord, reading the
// type from the ce-type header before touching the body.
func decodeRecord(seq uint64, ts int64, h nats.Header, data []byte) (memory.TriggerRecord, error) {
	typ := headerGet(h, "ce-type")
	if typ == "" { // structured mode
		r, err := transcript.Decode(h, data)
		if err != nil {
			return memory.TriggerRecord{}, err
		}
		r.Seq = seq
		rec := recordOf(&r)
		rec.Time = ts
		return rec, nil
	}
	switch typ {
	case events.TypeMessage:
		rec, err := memory.DecodeTriggerMessage(seq, ts, data)
		if err != nil {
			return memory.TriggerRecord{}, fmt.Errorf("decoding message: %w", err)
		}
		// A claim-checked record's data is a preview: its stub carries the
		// whole message's estimate, so the body is never fetched here.
		if v := headerGet(h, "ce-"+events.ExtBlobTokens); v != "" {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				rec.Estimate = n
			}
		}
		return rec, nil
	case events.TypeSessionCompacting:
		return memory.TriggerRecord{Seq: seq, Time: ts, Kind: memory.RecCompacting}, nil
	case events.TypeSessionCompacted:
		var c events.SessionCompacted
		if err := json.Unmarshal(data, &c); err != nil {
			return memory.TriggerRecord{}, fmt.Errorf("decoding compacted: %w", err)
		}
		return memory.TriggerRecord{Seq: seq, Time: ts, Kind: memory.RecCompacted, PostTokens: c.PostTokens}, nil
	case events.TypeSessionEnded:
		return memory.TriggerRecord{Seq: seq, Time: ts, Kind: memory.RecEnded}, nil
	}
	return memory.TriggerRecord{Seq: seq, Time: ts, Kind: memory.RecOther}, nil
}

// decodeOrSkip is decodeRecord that turns an undecodable record into one
// that counts nothing (the record stays in the transcript).
func decodeOrSkip(seq uint64, ts int64, h nats.Header, data []byte) (memory.TriggerRecord, error) {
	rec, err := decodeRecord(seq, ts, h, data)
	if err != nil {
		return memory.TriggerRecord{Seq: seq, Kind: memory.RecOther}, err
	}
	return rec, nil
}

// headerGet is a case-insensitive header lookup that tries the common
// spellings before scanning.
func headerGet(h nats.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// hashKey is FNV-1a 64 of a session key (for the evicted set).
func hashKey(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
