package pcgroup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
)

const parts = 6

type recorder struct {
	mu       sync.Mutex
	active   map[int]int
	last     map[string]int
	handled  map[string]bool
	problems []string
}

func (r *recorder) handler(member string) Handler {
	return func(ctx context.Context, m *Msg) error {
		tok := strings.Split(m.Subject(), ".") // pct.<p>.<key>
		key := tok[2]
		n, _ := strconv.Atoi(string(m.Data()))
		r.mu.Lock()
		if r.active[m.Partition] > 0 {
			r.problems = append(r.problems, fmt.Sprintf("partition %d: two handlers at once (%s)", m.Partition, member))
		}
		r.active[m.Partition]++
		if n < r.last[key] {
			r.problems = append(r.problems, fmt.Sprintf("key %s: %d after %d", key, n, r.last[key]))
		}
		r.last[key] = n
		r.mu.Unlock()
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.active[m.Partition]--
		r.handled[fmt.Sprintf("%s/%d", key, n)] = true
		r.mu.Unlock()
		return nil
	}
}

type member struct {
	g      *Group
	nc     *nats.Conn
	svc    micro.Service // the share endpoints' service, when sharing
	cancel context.CancelFunc
	done   chan error
}

func startMember(t *testing.T, s *natstest.Server, id string, r *recorder) *member {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	g, err := New(js, Config{
		Stream: "PCT", Partitions: parts,
		Filter:        func(p int) string { return fmt.Sprintf("pct.%d.>", p) },
		Durable:       func(p int) string { return fmt.Sprintf("pct-%d", p) },
		PriorityGroup: "g", Bucket: "MEMBERS", Member: id,
		HeartbeatTTL: 2 * time.Second, AckWait: 2 * time.Second, FetchWait: 300 * time.Millisecond, DrainTimeout: 2 * time.Second,
	}, r.handler(id))
	if err != nil {
		t.Fatal(err)
	}
	return runMember(t, g, nc)
}

// runMember runs g until the test ends, then stops it, runs the extra
// cleanups and closes nc.
func runMember(t *testing.T, g *Group, nc *nats.Conn, cleanups ...func()) *member {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{g: g, nc: nc, cancel: cancel, done: make(chan error)}
	go func() {
		if err := g.Run(ctx); err != nil {
			t.Errorf("member %s: %v", g.Member(), err)
		}
		close(m.done)
	}()
	t.Cleanup(func() {
		m.cancel()
		<-m.done
		for _, c := range cleanups {
			c()
		}
		nc.Close()
	})
	return m
}

func owned(ms ...*member) int {
	n := 0
	for _, m := range ms {
		n += len(m.g.Owned())
	}
	return n
}

func TestGroupHandOff(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PCT", Subjects: []string{"pct.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "MEMBERS", LimitMarkerTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	r := &recorder{active: map[int]int{}, last: map[string]int{}, handled: map[string]bool{}}
	a := startMember(t, s, "a", r)
	b := startMember(t, s, "b", r)
	c := startMember(t, s, "c", r)
	testpoll.Until(t, 15*time.Second, "three members sharing all partitions", func() bool {
		return owned(a, b, c) == parts && len(a.g.Members()) == 3 && len(c.g.Members()) == 3
	})

	for _, m := range []*member{a, b, c} {
		if n := len(m.g.Owned()); n != parts/3 {
			t.Fatalf("member %s owns %d partitions, want %d", m.g.Member(), n, parts/3)
		}
	}

	const keys, perKey = 12, 40
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for n := 1; n <= perKey; n++ {
			for k := 0; k < keys; k++ {
				subj := fmt.Sprintf("pct.%d.k%d", k%parts, k)
				if _, err := js.Publish(ctx, subj, []byte(strconv.Itoa(n))); err != nil {
					t.Error(err)
					return
				}
			}
			time.Sleep(10 * time.Millisecond) // a steady stream: the membership changes below happen under traffic
		}
	}()

	testpoll.Until(t, 15*time.Second, "handling under way", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.handled) >= keys
	})
	// A clean stop: its key is deleted, so the others take over well
	// before its heartbeat TTL.
	b.cancel()
	<-b.done
	// Run deleted the membership key before returning (no wait for its
	// TTL), which is what lets the others take over at once.
	kv, err := js.KeyValue(ctx, "MEMBERS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "b"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("membership key after a clean stop: %v, want it deleted", err)
	}
	testpoll.Until(t, 15*time.Second, "two members after a clean stop", func() bool { return owned(a, c) == parts && len(a.g.Members()) == 2 })
	// A crash: nothing is cleaned up; the TTL expires.
	c.nc.Close()
	c.cancel()
	<-c.done
	testpoll.Until(t, 15*time.Second, "one member after a crash", func() bool { return owned(a) == parts && len(a.g.Members()) == 1 })
	d := startMember(t, s, "d", r)
	testpoll.Until(t, 15*time.Second, "two members after a join", func() bool { return owned(a, d) == parts && len(d.g.Members()) == 2 })
	<-pubDone
	testpoll.Until(t, 15*time.Second, "every message handled", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.handled) == keys*perKey
	})

	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) > 0 {
		t.Fatalf("%d ordering problems, e.g. %s", len(r.problems), r.problems[0])
	}
}
