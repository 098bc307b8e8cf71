package pcgroup

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
)

// keyedRecorder checks keyed mode: never two handlers of one key at once,
// a key's messages in order, and how many handlers of one partition ran at
// once.
type keyedRecorder struct {
	mu          sync.Mutex
	activeKey   map[string]int
	activePart  map[int]int
	maxPart     int
	last        map[string]int
	handled     map[string]bool
	problems    []string
	handlerTime time.Duration
}

func (r *keyedRecorder) handler(member string) Handler {
	return func(ctx context.Context, m *Msg) error {
		key := strings.Split(m.Subject(), ".")[2] // pck.<p>.<key>
		n, _ := strconv.Atoi(string(m.Data()))
		r.mu.Lock()
		if r.activeKey[key] > 0 {
			r.problems = append(r.problems, fmt.Sprintf("key %s: two handlers at once (%s)", key, member))
		}
		r.activeKey[key]++
		r.activePart[m.Partition]++
		r.maxPart = max(r.maxPart, r.activePart[m.Partition])
		if n < r.last[key] {
			r.problems = append(r.problems, fmt.Sprintf("key %s: %d after %d", key, n, r.last[key]))
		}
		r.last[key] = n
		r.mu.Unlock()
		select {
		case <-time.After(r.handlerTime):
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.activeKey[key]--
		r.activePart[m.Partition]--
		r.handled[fmt.Sprintf("%s/%d", key, n)] = true
		r.mu.Unlock()
		return nil
	}
}

func startKeyedMember(t *testing.T, s *natstest.Server, id string, r *keyedRecorder) *member {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	g, err := New(js, Config{
		Stream: "PCK", Partitions: 2,
		Filter:        func(p int) string { return fmt.Sprintf("pck.%d.>", p) },
		Durable:       func(p int) string { return fmt.Sprintf("pck-%d", p) },
		PriorityGroup: "g", Bucket: "KMEMBERS", Member: id,
		HeartbeatTTL: 2 * time.Second, AckWait: 2 * time.Second, FetchWait: 300 * time.Millisecond, DrainTimeout: 2 * time.Second,
		Concurrency: 16, KeyOf: func(subject string) string { return subject }, InFlight: 8,
	}, r.handler(id))
	if err != nil {
		t.Fatal(err)
	}
	return runMember(t, g, nc)
}

// Keyed mode: a partition runs different keys at once, one key's messages
// one at a time and in order — across a clean hand-off and a join too.
func TestGroupKeyedConcurrency(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PCK", Subjects: []string{"pck.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "KMEMBERS", LimitMarkerTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	r := &keyedRecorder{activeKey: map[string]int{}, activePart: map[int]int{}, last: map[string]int{}, handled: map[string]bool{}, handlerTime: 20 * time.Millisecond}
	a := startKeyedMember(t, s, "a", r)
	b := startKeyedMember(t, s, "b", r)
	testpoll.Until(t, 15*time.Second, "two members sharing both partitions", func() bool { return owned(a, b) == 2 && len(a.g.Members()) == 2 })

	const keys, perKey = 16, 30
	publish := func(from, to int) {
		for n := from; n <= to; n++ {
			for k := 0; k < keys; k++ {
				if _, err := js.Publish(ctx, fmt.Sprintf("pck.%d.k%d", k%2, k), []byte(strconv.Itoa(n))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	publish(1, 10)
	testpoll.Until(t, 15*time.Second, "the first messages handled", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.handled) >= keys*5
	})
	b.cancel() // a clean stop while holding several keys' messages
	<-b.done
	testpoll.Until(t, 15*time.Second, "one member with both partitions", func() bool { return owned(a) == 2 })
	publish(11, 20)
	c := startKeyedMember(t, s, "c", r)
	testpoll.Until(t, 15*time.Second, "two members after a join", func() bool { return owned(a, c) == 2 && len(c.g.Members()) == 2 })
	publish(21, perKey)
	testpoll.Until(t, 30*time.Second, "every message handled", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.handled) == keys*perKey
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) > 0 {
		t.Fatalf("%d ordering problems, e.g. %s", len(r.problems), r.problems[0])
	}
	if r.maxPart < 2 {
		t.Fatalf("at most %d handler(s) of one partition ran at once; keyed mode should run several keys together", r.maxPart)
	}
	t.Logf("up to %d handlers of one partition at once", r.maxPart)
}
