package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/pkg/events"
)

// TestConsoleTranscriptPages: the transcript viewer's pages follow the
// stream sequence (next_after), each record with its role, blocks and
// estimated tokens; another tenant's token is refused.
func TestConsoleTranscriptPages(t *testing.T) {
	f := start(t)
	for _, id := range []string{"m1", "m2", "m3"} {
		f.say(t, "acme", "s1", id, "say "+id)
	}
	type page struct {
		Records []struct {
			Seq    uint64
			Kind   string
			Role   string
			Tokens int64
			Blocks []struct{ Type, Text string }
		}
		NextAfter uint64 `json:"next_after"`
	}
	var p page
	if code := f.get(t, "GET", "/console/api/tenants/acme/sessions/s1/transcript?limit=2", "a", "", &p); code != 200 || len(p.Records) != 2 || p.NextAfter != p.Records[1].Seq ||
		p.Records[0].Kind != "message" || p.Records[0].Role != events.RoleUser || p.Records[0].Tokens == 0 || p.Records[0].Blocks[0].Text != "say m1" {
		t.Fatalf("first page: %d %+v", code, p)
	}
	after := p.NextAfter
	p = page{}
	if f.get(t, "GET", "/console/api/tenants/acme/sessions/s1/transcript?limit=2&after="+itoa(after), "a", "", &p); len(p.Records) != 1 || p.NextAfter != 0 || p.Records[0].Blocks[0].Text != "say m3" {
		t.Fatalf("second page: %+v", p)
	}
	if code := f.get(t, "GET", "/console/api/tenants/acme/sessions/s1/transcript", "b", "", nil); code != http.StatusForbidden {
		t.Fatalf("beta reading acme's transcript: %d", code)
	}
	if code := f.get(t, "GET", "/console/api/tenants/acme/sessions/s1/transcript?after=x", "a", "", nil); code != http.StatusBadRequest {
		t.Fatalf("after=x: %d", code)
	}
}

// TestConsoleUserMemoryAndOverview: a user's long-term memory documents
// with their revisions; the overview counts every tenant's sessions,
// records and parked requests, for operators only; the sessions search
// finds text in the memory and quotes it.
func TestConsoleUserMemoryAndOverview(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	f.say(t, "acme", "s1", "m1", "hello")
	f.say(t, "beta", "s1", "m1", "hello")
	f.say(t, "beta", "s2", "m1", "hello")
	ltm, err := f.js.KeyValue(ctx, events.BucketLTM)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"v1", "v2"} {
		b, _ := json.Marshal(events.StoredMemoryDocument{Content: c, UpdatedAt: time.Now(), Session: "s1"})
		if _, err := ltm.Put(ctx, events.LTMKey("acme", "u1", "", "profile"), b); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(events.StoredMemoryDocument{Content: "p", UpdatedAt: time.Now()})
	if _, err := ltm.Put(ctx, events.LTMKey("acme", "u1", "bob", "facts"), b); err != nil {
		t.Fatal(err)
	}
	var mem struct {
		Documents []struct {
			Key, Peer, Type string
			Revisions       []struct{ Content string }
		}
	}
	if code := f.get(t, "GET", "/console/api/tenants/acme/users/u1/memory", "a", "", &mem); code != 200 || len(mem.Documents) != 2 ||
		mem.Documents[0].Peer != "bob" || mem.Documents[0].Type != "facts" || mem.Documents[1].Type != "profile" || len(mem.Documents[1].Revisions) != 2 || mem.Documents[1].Revisions[1].Content != "v2" {
		t.Fatalf("u1's memory: %d %+v", code, mem)
	}
	if code := f.get(t, "GET", "/console/api/tenants/acme/users/u1/memory", "b", "", nil); code != http.StatusForbidden {
		t.Fatalf("beta reading acme's user: %d", code)
	}
	var ov struct {
		Tenants []struct {
			Tenant   string
			Sessions int
			Records  uint64
		}
	}
	if code := f.get(t, "GET", "/console/api/overview", "op", "", &ov); code != 200 || len(ov.Tenants) != 2 || ov.Tenants[1].Tenant != "beta" || ov.Tenants[1].Sessions != 2 || ov.Tenants[0].Records != 1 {
		t.Fatalf("overview: %d %+v", code, ov)
	}
	if code := f.get(t, "GET", "/console/api/overview", "a", "", nil); code != http.StatusForbidden {
		t.Fatalf("a tenant's overview: %d", code)
	}
	kv, _ := f.js.KeyValue(ctx, events.BucketMemory)
	if _, err := kv.Put(ctx, "acme.s1", []byte(`{"notes":"# Notes\n- the parser streams tokens now","last_summarized_seq":1,"covered_seq":1,"extractions":1}`)); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Sessions []struct{ Session, Match string }
	}
	if f.get(t, "GET", "/console/api/tenants/acme/sessions?q=streams+tokens", "a", "", &list); len(list.Sessions) != 1 || !strings.Contains(list.Sessions[0].Match, "the parser streams tokens now") {
		t.Fatalf("memory search: %+v", list)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
