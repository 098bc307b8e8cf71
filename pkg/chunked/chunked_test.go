package chunked

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/natstest"
)

func TestRoundTrip(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	srv, _ := s.Connect(t)
	big := make([]byte, 3*int(nc.MaxPayload())+12345)
	rand.New(rand.NewSource(1)).Read(big)
	cases := map[string][]byte{"small": []byte(`{"ok":true}`), "empty": nil, "big": big}
	_, err := srv.Subscribe("svc.*", func(m *nats.Msg) {
		h := nats.Header{}
		h.Set("X-Kind", m.Subject)
		_ = Respond(srv, m.Reply, h, cases[m.Subject[4:]])
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Flush()
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			m, err := Request(ctx, nc, "svc."+name, nil, []byte("q"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Data, want) {
				t.Fatalf("reassembled %d bytes, want %d identical bytes", len(m.Data), len(want))
			}
			if m.Header.Get("X-Kind") != "svc."+name {
				t.Fatalf("first-chunk headers lost: %v", m.Header)
			}
			if m.Header.Get(HeaderChunks) != "" {
				t.Fatal("chunk headers leaked to the caller")
			}
		})
	}
}

func TestSmallChunksExact(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	data := bytes.Repeat([]byte("0123456789"), 1000)
	_, _ = nc.Subscribe("svc", func(m *nats.Msg) { _ = RespondSize(nc, m.Reply, nil, data, 333) })
	m, err := Request(context.Background(), nc, "svc", nil, nil)
	if err != nil || !bytes.Equal(m.Data, data) {
		t.Fatalf("got %d bytes, err %v", len(m.Data), err)
	}
}

func TestNoResponders(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	_, err := Request(context.Background(), nc, "nobody.home", nil, nil)
	if !errors.Is(err, ErrNoResponders) {
		t.Fatalf("err = %v, want ErrNoResponders", err)
	}
}

func TestMissingChunkIsAnError(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	_, _ = nc.Subscribe("svc", func(m *nats.Msg) {
		h := nats.Header{}
		h.Set(HeaderChunks, "3")
		h.Set(HeaderChunk, "0")
		_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: h, Data: []byte("a")})
		h2 := nats.Header{}
		h2.Set(HeaderChunks, "3")
		h2.Set(HeaderChunk, "2") // chunk 1 never sent
		_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: h2, Data: []byte("c")})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Request(ctx, nc, "svc", nil, nil)
	if !errors.Is(err, ErrBrokenReply) {
		t.Fatalf("err = %v, want ErrBrokenReply", err)
	}
}
