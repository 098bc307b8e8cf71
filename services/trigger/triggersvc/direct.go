package triggersvc

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/pkg/events"
)

// directBatch is the number of records asked for per Direct Get round trip.
const directBatch = 256

// directRange calls fn for every stored transcript record with
// from <= seq <= to, in order, using batch Direct Get over all subjects, or
// only subject when it is not empty (deleted sequences are stepped over).
func directRange(ctx context.Context, nc *nats.Conn, subject string, from, to uint64, fn func(seq uint64, ts int64, subject string, h nats.Header, data []byte)) error {
	for from <= to {
		req, _ := json.Marshal(struct {
			Seq     uint64 `json:"seq"`
			NextFor string `json:"next_by_subj,omitempty"`
			Batch   int    `json:"batch"`
			UpToSeq uint64 `json:"up_to_seq"`
		}{from, subject, directBatch, to})
		inbox := nc.NewRespInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return fmt.Errorf("reading transcript range: %w", err)
		}
		if err := nc.PublishRequest("$JS.API.DIRECT.GET."+events.StreamTranscript, inbox, req); err != nil {
			_ = sub.Unsubscribe()
			return fmt.Errorf("reading transcript range: %w", err)
		}
		last, n, done, err := readBatch(ctx, sub, to, fn)
		_ = sub.Unsubscribe()
		if err != nil {
			return err
		}
		if done || n == 0 {
			return nil
		}
		from = last + 1
	}
	return nil
}

func readBatch(ctx context.Context, sub *nats.Subscription, to uint64, fn func(uint64, int64, string, nats.Header, []byte)) (last uint64, n int, done bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return last, n, false, fmt.Errorf("reading transcript range: %w", err)
		}
		if st := m.Header.Get("Status"); len(m.Data) == 0 && st != "" {
			switch st {
			case "204":
				pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				return last, n, pending == 0, nil
			case "404":
				return last, n, true, nil
			default:
				return last, n, false, fmt.Errorf("reading transcript range: status %s %s", st, m.Header.Get("Description"))
			}
		}
		seq, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if seq > to {
			continue
		}
		var ts int64
		if t, err := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp")); err == nil {
			ts = t.UnixNano()
		}
		n++
		last = seq
		fn(seq, ts, m.Header.Get("Nats-Subject"), m.Header, m.Data)
	}
}
