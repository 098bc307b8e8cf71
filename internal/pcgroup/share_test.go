package pcgroup

import (
	"context"
	"encoding/json"
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

// startSharingMember starts a keyed member with work sharing on its own
// connection and micro service.
func startSharingMember(t *testing.T, s *natstest.Server, id string, concurrency int, h Handler, opts ...func(*Config)) *member {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	cfg := Config{
		Stream: "PCS", Partitions: 2,
		Filter:        func(p int) string { return fmt.Sprintf("pcs.%d.>", p) },
		Durable:       func(p int) string { return fmt.Sprintf("pcs-%d", p) },
		PriorityGroup: "g", Bucket: "SMEMBERS", Member: id,
		HeartbeatTTL: 2 * time.Second, AckWait: 2 * time.Second, FetchWait: 300 * time.Millisecond, DrainTimeout: 2 * time.Second,
		Concurrency: concurrency, KeyOf: func(subject string) string { return subject }, InFlight: 16,
		Share: "pcs-share",
	}
	for _, o := range opts {
		o(&cfg)
	}
	g, err := New(js, cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := micro.AddService(nc, micro.Config{Name: "pcgroup-share-test", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AddShareEndpoints(svc); err != nil {
		t.Fatal(err)
	}
	m := runMember(t, g, nc, func() { _ = svc.Stop() })
	m.svc = svc
	return m
}

// shareSetup creates the stream and the membership bucket, starts members a
// and b, and returns the partition a owns.
func shareSetup(t *testing.T, s *natstest.Server, js jetstream.JetStream, ha, hb Handler, concurrency int, opts ...func(*Config)) (a, b *member, pa int) {
	t.Helper()
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PCS", Subjects: []string{"pcs.*.*"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "SMEMBERS", LimitMarkerTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	a = startSharingMember(t, s, "a", concurrency, ha, opts...)
	b = startSharingMember(t, s, "b", concurrency, hb, opts...)
	testpoll.Until(t, 15*time.Second, "a and b owning a partition each", func() bool {
		return len(a.g.Owned()) == 1 && len(b.g.Owned()) == 1 && len(a.g.Members()) == 2 && len(b.g.Members()) == 2
	})
	return a, b, a.g.Owned()[0]
}

// reserveBoth reserves the only slot of both members (a and b) through
// request, as a prober of member z would.
func reserveBoth(t *testing.T, request func(subject, body string) (string, []byte)) map[string]grant {
	t.Helper()
	grants := map[string]grant{}
	for tries := 0; len(grants) < 2; tries++ {
		c, data := request("pcs-share", `{"from":"z"}`)
		if c == "503" && len(grants) == 1 && tries < 100 {
			continue // the queue group chose the member already reserved
		}
		if c != "" {
			t.Fatalf("reservation while idle: code %q", c)
		}
		var gr grant
		if err := json.Unmarshal(data, &gr); err != nil {
			t.Fatal(err)
		}
		grants[gr.Member] = gr
	}
	return grants
}

// lentSignal is closed by took (the lender's handler, on each message it
// takes) the first time: the owner's handler may end once its waiting
// message was shared.
func lentSignal() (taken <-chan struct{}, took func()) {
	ch := make(chan struct{})
	return ch, sync.OnceFunc(func() { close(ch) })
}

// waitLent waits for taken or the end of ctx.
func waitLent(ctx context.Context, taken <-chan struct{}) {
	select {
	case <-taken:
	case <-ctx.Done():
	}
}

// publishAndLend publishes a message on each of subjects (two, in member
// a's partition, whose one slot the first takes) and returns the subject
// member b's handler reports on lent: the message a shared.
func publishAndLend(t *testing.T, js jetstream.JetStream, subjects []string, lent <-chan string) string {
	t.Helper()
	for _, subj := range subjects {
		if _, err := js.Publish(context.Background(), subj, []byte("1")); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case s := <-lent:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("member b was never offered a's waiting message")
		return ""
	}
}

// Every message goes to the partition of member a; b owns an idle one. With
// sharing, b runs some of a's waiting messages, while every key still runs
// one message at a time and in order, and every message is acknowledged
// once.
func TestGroupSharesWaitingMessages(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	r := &keyedRecorder{activeKey: map[string]int{}, activePart: map[int]int{}, last: map[string]int{}, handled: map[string]bool{}, handlerTime: 50 * time.Millisecond}
	var mu sync.Mutex
	ranOn := map[string]int{}
	handler := func(member string) Handler {
		h := r.handler(member)
		return func(ctx context.Context, m *Msg) error {
			mu.Lock()
			ranOn[member]++
			mu.Unlock()
			return h(ctx, m)
		}
	}
	_, _, pa := shareSetup(t, s, js, handler("a"), handler("b"), 2)

	const keys, perKey = 12, 4
	for n := 1; n <= perKey; n++ {
		for k := 0; k < keys; k++ {
			if _, err := js.Publish(context.Background(), fmt.Sprintf("pcs.%d.k%d", pa, k), []byte(strconv.Itoa(n))); err != nil {
				t.Fatal(err)
			}
		}
	}
	testpoll.Until(t, 30*time.Second, "every message handled and acknowledged", func() bool {
		r.mu.Lock()
		handled := len(r.handled)
		r.mu.Unlock()
		info, err := js.Stream(context.Background(), "PCS")
		return handled == keys*perKey && err == nil && info.CachedInfo().State.Msgs == 0
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) > 0 {
		t.Fatalf("%d ordering problems, e.g. %s", len(r.problems), r.problems[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if ranOn["b"] == 0 {
		t.Fatalf("member b ran none of a's %d waiting messages (a ran %d)", keys*perKey, ranOn["a"])
	}
	if total := ranOn["a"] + ranOn["b"]; total != keys*perKey {
		t.Fatalf("%d handler runs for %d messages (a %d, b %d): a message ran twice", total, keys*perKey, ranOn["a"], ranOn["b"])
	}
	t.Logf("a ran %d, b ran %d of a's messages", ranOn["a"], ranOn["b"])
}

// A lender that dies while running a shared message: the owner sees it
// leave the group, redelivers the message and runs it itself.
func TestGroupSharedMessageOfALostLender(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	var mu sync.Mutex
	doneBy := map[string]string{} // subject → member whose run succeeded
	hold := make(chan string, 4)
	taken, took := lentSignal()
	ha := func(ctx context.Context, m *Msg) error {
		waitLent(ctx, taken) // a's slot stays busy until the prober found b
		mu.Lock()
		doneBy[m.Subject()] = "a"
		mu.Unlock()
		return nil
	}
	hb := func(ctx context.Context, m *Msg) error {
		took()
		hold <- m.Subject()
		<-ctx.Done() // never finishes on its own
		return ctx.Err()
	}
	_, b, pa := shareSetup(t, s, js, ha, hb, 1)
	subjects := []string{fmt.Sprintf("pcs.%d.k1", pa), fmt.Sprintf("pcs.%d.k2", pa)}
	lent := publishAndLend(t, js, subjects, hold)
	b.nc.Close() // b dies: no result, no more heartbeats
	testpoll.Until(t, 20*time.Second, "both messages run by a", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return doneBy[subjects[0]] == "a" && doneBy[subjects[1]] == "a"
	})
	testpoll.Until(t, 10*time.Second, "both acknowledged", func() bool {
		info, err := js.Stream(context.Background(), "PCS")
		return err == nil && info.CachedInfo().State.Msgs == 0
	})
	t.Logf("b took %s and died; a ran it after b left", strings.TrimPrefix(lent, "pcs."))
}

// A result that never reaches the owner (its delivery gave up: the owner
// could not be reached for a while) must not hold the message, and its key,
// forever: the owner asks the lender, hears it no longer runs the message,
// and redelivers it.
func TestGroupSharedResultLost(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	var mu sync.Mutex
	runs := map[string]int{}
	count := func(m *Msg) {
		mu.Lock()
		runs[m.Subject()]++
		mu.Unlock()
	}
	taken, took := lentSignal()
	ha := func(ctx context.Context, m *Msg) error {
		count(m)
		waitLent(ctx, taken) // a's slot stays busy until the prober found b
		return nil
	}
	lent, release := make(chan string, 4), make(chan struct{})
	hb := func(ctx context.Context, m *Msg) error {
		count(m)
		took()
		select {
		case lent <- m.Subject():
		default:
		}
		<-release
		return nil
	}
	a, b, pa := shareSetup(t, s, js, ha, hb, 1, func(c *Config) { c.ShareCheck = 300 * time.Millisecond })
	subject := publishAndLend(t, js, []string{fmt.Sprintf("pcs.%d.k1", pa), fmt.Sprintf("pcs.%d.k2", pa)}, lent)
	// a cannot take results for a moment: b's delivery finds no responder
	// and gives up, while a stays a member.
	if err := a.svc.Stop(); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 5*time.Second, "a's result endpoint gone", func() bool { // Stop drains
		_, err := a.nc.Request("pcs-share.result.a", []byte(`{}`), time.Second)
		return errors.Is(err, nats.ErrNoResponders)
	})
	close(release)
	testpoll.Until(t, 5*time.Second, "b's delivery of the result given up", func() bool {
		running := 0
		b.g.share.running.Range(func(any, any) bool { running++; return true })
		return running == 0
	})
	svc, err := micro.AddService(a.nc, micro.Config{Name: "pcgroup-share-test", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := a.g.AddShareEndpoints(svc); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 15*time.Second, "both messages acknowledged", func() bool {
		info, err := js.Stream(context.Background(), "PCS")
		return err == nil && info.CachedInfo().State.Msgs == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if runs[subject] < 2 {
		t.Fatalf("%s ran %d times; its lost result should have sent it round again", subject, runs[subject])
	}
}

// Reservations: malformed requests get 400; a reserved slot is held (the
// member's own message waits) until given back; a message for an unknown
// reservation gets 410; with every slot busy a reservation gets 503. None
// of it runs the handler on a shared message.
func TestGroupShareReservations(t *testing.T) {
	s := natstest.Start(t)
	nc, js := s.Connect(t)
	release := make(chan struct{})
	ran := make(chan string, 8)
	h := func(ctx context.Context, m *Msg) error {
		ran <- m.Subject()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	defer close(release)
	a, b, pa := shareSetup(t, s, js, h, h, 1)
	request := func(subject, body string) (code string, data []byte) {
		t.Helper()
		reply, err := nc.Request(subject, []byte(body), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return reply.Header.Get(micro.ErrorCodeHeader), reply.Data
	}
	if c, _ := request("pcs-share", `{"from":`); c != "400" {
		t.Fatalf("malformed reservation request: code %q, want 400", c)
	}
	if c, _ := request("pcs-share.run.a", `{"reservation":"nope","id":"x","from":"z","subject":"pcs.0.k","data":"MQ=="}`); c != "410" {
		t.Fatalf("message for an unknown reservation: code %q, want 410", c)
	}
	grants := reserveBoth(t, request)
	giveBack := func(member string) {
		t.Helper()
		body := `{"reservation":"` + grants[member].Reservation + `","cancel":true}`
		if err := nc.Publish("pcs-share.run."+member, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(context.Background(), fmt.Sprintf("pcs.%d.own", pa), []byte("1")); err != nil {
		t.Fatal(err)
	}
	// a's message waits for a slot: it found none free.
	testpoll.Until(t, 5*time.Second, "a's own message waiting for a slot", func() bool { return a.g.share.waiting.Load() == 1 })
	select {
	case subj := <-ran:
		t.Fatalf("%s ran while every slot was reserved", subj)
	default:
	}
	giveBack("a")
	select {
	case <-ran:
	case <-time.After(time.Second):
		t.Fatal("a's own message did not start after its reservation was given back")
	}
	giveBack("b")
	// b's slot busy too: no member has one.
	if _, err := js.Publish(context.Background(), fmt.Sprintf("pcs.%d.other", 1-pa), []byte("1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("b's message did not start")
	}
	if c, _ := request("pcs-share", `{"from":"z"}`); c != "503" {
		t.Fatalf("reservation with every slot busy: code %q, want 503", c)
	}
	if out, in := a.g.Shared(); out+in != 0 {
		t.Fatalf("a shared %d out, %d in; want none", out, in)
	}
	_ = b
}
