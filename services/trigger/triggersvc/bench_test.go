package triggersvc

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// benchStream stores n small records over sessions sessions.
func benchStream(b *testing.B, n, sessions int) (*natstest.Server, jetstream.JetStream) {
	s := natstest.Start(b)
	nc, js := s.Connect(b)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4}); err != nil {
		b.Fatal(err)
	}
	layout := serverLayout(b, js)
	var futs []jetstream.PubAckFuture
	for i := 0; i < n; i++ {
		sess := fmt.Sprintf("s%d", i%sessions)
		m := events.Message{UUID: fmt.Sprintf("u%d", i), Role: events.RoleUser, Content: events.Content{{Type: "text", Text: "hello there, this is a short message of a typical size"}}}
		if i%2 == 1 {
			m.Role, m.MessageID, m.StopReason = events.RoleAssistant, fmt.Sprintf("m%d", i), "end_turn"
			m.Usage = &events.Usage{InputTokens: int64(1000 + (i/sessions)*50), OutputTokens: 10}
		}
		data, _ := json.Marshal(m)
		e := event.New()
		e.SetID(m.UUID)
		e.SetSource("/bench")
		e.SetType(events.TypeMessage)
		e.SetSubject(sess)
		e.SetExtension(events.ExtTenant, "acme")
		_ = e.SetData(event.ApplicationJSON, data)
		msg := natsce.NewMsg(layout.Subject("acme", sess), &e)
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			b.Fatal(err)
		}
		futs = append(futs, f)
		if len(futs) >= 4000 {
			<-js.PublishAsyncComplete()
			futs = futs[:0]
		}
	}
	<-js.PublishAsyncComplete()
	_ = nc
	return s, js
}

// rawRuns numbers the raw consumers of BenchmarkTriggerThroughput.
var rawRuns atomic.Int64

func BenchmarkTriggerThroughput(b *testing.B) {
	const n, sessions = 50000, 10000
	s, js := benchStream(b, n, sessions)
	b.Run("raw", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			// A new durable per run: the benchmark runs this body more than
			// once with the same i, and a reused durable has nothing left.
			durable := fmt.Sprintf("raw%d", rawRuns.Add(1))
			start := time.Now()
			if err := rawConsume(js, serverLayout(b, js).Streams(), durable, n); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
		}
	})
	b.Run("trigger", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			nc, _ := s.Connect(b)
			for _, name := range serverLayout(b, js).Streams() {
				_ = js.DeleteConsumer(context.Background(), name, events.DurableTrigger)
			}
			tr, err := New(nc, Config{}, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- tr.Run(ctx) }()
			deadline := time.Now().Add(2 * time.Minute)
			wait := func(done func() bool, pause time.Duration) {
				for !done() {
					select {
					case err := <-errc:
						b.Fatalf("Run returned %v after %d records", err, tr.Stats().Records)
					default:
					}
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d records after 2m", tr.Stats().Records, n)
					}
					time.Sleep(pause)
				}
			}
			wait(func() bool { return tr.Stats().Records > 0 }, 100*time.Microsecond)
			start := time.Now()
			wait(func() bool { return tr.Stats().Records >= n }, time.Millisecond)
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
			st := tr.Stats()
			b.ReportMetric(float64(st.BytesPerSession), "bytes/session")
			b.ReportMetric(float64(st.Decisions), "decisions")
			cancel()
		}
	})
}

// rawConsume reads n records from streams with one AckAll durable per
// stream, acknowledging every 1000th record of each (the trigger's
// AckEvery), and deletes the durables.
func rawConsume(js jetstream.JetStream, streams []string, durable string, n int) error {
	ctx := context.Background()
	var got atomic.Int64
	done := make(chan struct{})
	for _, stream := range streams {
		cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable: durable, AckPolicy: jetstream.AckAllPolicy, MaxAckPending: 200000})
		if err != nil {
			return err
		}
		defer js.DeleteConsumer(ctx, stream, durable)
		count := 0
		cc, err := cons.Consume(func(m jetstream.Msg) {
			count++
			if count%1000 == 0 {
				_ = m.Ack()
			}
			if got.Add(1) == int64(n) {
				close(done)
			}
		}, jetstream.PullMaxMessages(2000))
		if err != nil {
			return err
		}
		defer cc.Stop()
	}
	select {
	case <-done:
		return nil
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("the raw consumers got %d of %d records in 2m", got.Load(), n)
	}
}
