package ingestsvc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
)

// TestChunkedRequest: a batch sent as a chunked request of 100-byte chunks
// is stored like one sent whole, and its chunks are removed; malformed
// chunk headers are refused with 400, and a last chunk whose predecessors
// were never stored with 503 (send the request again), nothing stored.
func TestChunkedRequest(t *testing.T) {
	e := startEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	subject := events.APISubject(events.VerbIngest, "acme", "s1")
	body := mustMarshal(t, []any{structured("c1", "s1"), structured("c2", "s1"), structured("c3", "s1")})
	m, err := chunked.SendRequestSize(ctx, e.nc, subject, nil, body, 100)
	if err != nil || m.Header.Get("Nats-Service-Error-Code") != "" {
		t.Fatalf("chunked batch: %v %v %s", err, m.Header, m.Data)
	}
	var resp Response
	if err := json.Unmarshal(m.Data, &resp); err != nil || resp.Accepted != 3 {
		t.Fatalf("reply %s: %v", m.Data, err)
	}
	if n := len(e.stored()); n != 3 {
		t.Fatalf("%d events stored, want 3", n)
	}
	obs, err := e.js.ObjectStore(ctx, events.BucketBlobs)
	if err != nil {
		t.Fatal(err)
	}
	if list, _ := obs.List(ctx); len(list) != 0 {
		t.Fatalf("%d chunks left in %s, first %s", len(list), events.BucketBlobs, list[0].Name)
	}

	for _, tc := range []struct {
		name, chunk, chunks, code string
	}{
		{"index past the count", "5", "2", "400"},
		{"not a number", "x", "2", "400"},
		{"too many chunks", "0", "100000", "400"},
		{"predecessors missing", "2", "3", "503"},
	} {
		h := nats.Header{}
		h.Set(chunked.HeaderUpload, "up1")
		h.Set(chunked.HeaderChunk, tc.chunk)
		h.Set(chunked.HeaderChunks, tc.chunks)
		m, err := chunked.Request(ctx, e.nc, subject, h, []byte(`{}`))
		if err != nil || m.Header.Get("Nats-Service-Error-Code") != tc.code {
			t.Errorf("%s: %v, code %q (%s), want %s", tc.name, err, m.Header.Get("Nats-Service-Error-Code"), m.Header.Get("Nats-Service-Error"), tc.code)
		}
		if tc.code == "400" && !strings.Contains(m.Header.Get("Nats-Service-Error"), "chunk") {
			t.Errorf("%s: the refusal does not say what is wrong: %s", tc.name, m.Header.Get("Nats-Service-Error"))
		}
	}
	if n := len(e.stored()); n != 3 {
		t.Fatalf("%d events stored after the refusals, want still 3", n)
	}
}
