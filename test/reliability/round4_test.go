package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// Tests of security round 4 (issue 43): acme (tenantA) attacks, globex
// (tenantB) is the victim, against the real ingest service on one
// embedded NATS server. Each fails on the code before its fix.

// inboxConn is a connection whose replies arrive in tenant's reply space,
// as a tenant's NATS user's do.
func inboxConn(t *testing.T, h *harness, tenant string) *nats.Conn {
	t.Helper()
	nc, _ := h.srv.Connect(t, nats.CustomInboxPrefix(events.InboxPrefix(tenant)))
	return nc
}

// writeBigConfigs stores n revisions of acme's configuration, each with a
// prompt of size bytes (under the configuration's size bound).
func writeBigConfigs(t *testing.T, base string, n, size int) {
	t.Helper()
	for i := range n {
		doc, _ := json.Marshal(map[string]any{"prompt": fmt.Sprintf("%d %s", i, strings.Repeat("p", size))})
		if st, b := httpDo(t, "PUT", base+"/v1/config", tokenA, "application/json", doc); st != 200 {
			t.Fatalf("revision %d: %d %.200s", i, st, b)
		}
	}
}

// TestConfigHistoryIsPaged (F1): acme stores 24 revisions of a 200 KB
// configuration (each revision's diff holds 400 KB). GET
// /v1/config/history answers a page of at most 1 MiB with a cursor, the
// pages together list every revision, and the NATS config endpoint
// answers the same page (before: one 9.6 MB answer over HTTP, none at all
// over NATS: the reply was over max_payload).
func TestConfigHistoryIsPaged(t *testing.T) {
	h := newHarness(t)
	base := h.startIngest()
	writeBigConfigs(t, base, 24, 200<<10)

	var revisions, pages int
	cursor := ""
	for page := 0; ; page++ {
		pages++
		st, b := httpDo(t, "GET", base+"/v1/config/history"+cursor, tokenA, "", nil)
		if st != 200 {
			t.Fatalf("page %d: %d %.200s", page, st, b)
		}
		if len(b) > 1<<20+4<<10 {
			t.Fatalf("page %d is %d bytes, over 1 MiB", page, len(b))
		}
		var hist events.ConfigHistory
		if err := json.Unmarshal(b, &hist); err != nil || len(hist.Revisions) == 0 {
			t.Fatalf("page %d: %v %.200s", page, err, b)
		}
		revisions += len(hist.Revisions)
		if hist.Next == 0 {
			break
		}
		cursor = fmt.Sprintf("?before=%d", hist.Next)
	}
	if revisions != 24 {
		t.Fatalf("the pages list %d revisions, want 24", revisions)
	}

	nc := inboxConn(t, h, tenantA)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := chunked.Request(ctx, nc, events.APISubject(events.VerbConfig, tenantA, events.ConfigOpHistory), nil, []byte(`{"limit": 64}`))
	if err != nil {
		t.Fatalf("the NATS history was not answered: %v", err)
	}
	var hist events.ConfigHistory
	if err := json.Unmarshal(m.Data, &hist); err != nil || len(hist.Revisions) == 0 || hist.Next == 0 || len(m.Data) > 1<<20+4<<10 {
		t.Fatalf("NATS history: %d bytes, %v, %d revisions, next %d", len(m.Data), err, len(hist.Revisions), hist.Next)
	}
	t.Logf("RELIABILITY config history: %d revisions of 200 KB in %d HTTP pages; the NATS page holds %d revisions, %d bytes", revisions, pages, len(hist.Revisions), len(m.Data))
}

// TestConfigSizeAndCeilings (F3, F5): a configuration over the size bound
// is refused naming the bound (before: 200 up to the store's limit, then
// 503 "unavailable"), and a budget over the operator's ceiling is refused
// naming the ceiling (before: query_max_budget_tokens 2^63-1 accepted),
// over HTTP and NATS alike.
func TestConfigSizeAndCeilings(t *testing.T) {
	h := newHarness(t)
	base := h.startIngest()
	big, _ := json.Marshal(map[string]any{"template": strings.Repeat("t", 300<<10)})
	for _, tc := range []struct {
		name string
		doc  []byte
		says string
	}{
		{"300 KB configuration", big, "262144"},
		{"query budget 2^63-1", []byte(`{"query_max_budget_tokens": 9223372036854775807}`), "RECALL_TENANT_MAX_QUERY_BUDGET_TOKENS"},
		{"33 custom memory types", customTypes(33), "RECALL_TENANT_MAX_CUSTOM_MEMORY_TYPES"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, method := range []string{"PUT", "PATCH"} {
				st, b := httpDo(t, method, base+"/v1/config", tokenA, "application/json", tc.doc)
				if (st != 413 && st != 422) || !strings.Contains(string(b), tc.says) {
					t.Fatalf("%s: %d %.300s", method, st, b)
				}
			}
			nc := inboxConn(t, h, tenantA)
			body, _ := json.Marshal(events.ConfigWrite{Config: tc.doc})
			m, err := nc.Request(events.APISubject(events.VerbConfig, tenantA, events.ConfigOpPut), body, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code := m.Header.Get("Nats-Service-Error-Code"); code != "422" || !strings.Contains(string(m.Data), tc.says) {
				t.Fatalf("NATS put: code %q %.300s", code, m.Data)
			}
		})
	}
	if st, b := httpDo(t, "GET", base+"/v1/config", tokenA, "", nil); st != 200 || strings.Contains(string(b), "tttt") {
		t.Fatalf("a refused configuration was stored: %d %.200s", st, b)
	}
}

// customTypes is a configuration declaring n custom memory types.
func customTypes(n int) []byte {
	var ts []map[string]string
	for i := range n {
		ts = append(ts, map[string]string{"name": fmt.Sprintf("type%d", i), "prompt": "extract it"})
	}
	b, _ := json.Marshal(map[string]any{"custom_memory_types": ts})
	return b
}

// TestNATSEndpointsFairPerTenant (F2): acme floods the NATS erase
// endpoint (40 erases at once, each at least its 500 ms drain) and the
// config endpoint (40 history pages of 200 KB revisions); globex's erase
// and config.get over NATS answer within 3 s meanwhile, acme's excess is
// refused at once with 429 (before: every tenant's requests waited in one
// queue per endpoint — globex's erase 30 s, its config.get 41 s).
func TestNATSEndpointsFairPerTenant(t *testing.T) {
	h := newHarness(t)
	base := h.startIngest()
	writeBigConfigs(t, base, 16, 200<<10)
	attacker, victim := inboxConn(t, h, tenantA), inboxConn(t, h, tenantB)

	// The flood is published and flushed before globex asks: on the
	// server, globex's requests arrive behind all of acme's.
	inbox := events.InboxPrefix(tenantA) + ".flood"
	replies, err := attacker.SubscribeSync(inbox + ".*")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		_ = attacker.PublishRequest(events.APISubject(events.VerbErase, tenantA, fmt.Sprintf("s%d", i)), fmt.Sprintf("%s.e%d", inbox, i), nil)
		_ = attacker.PublishRequest(events.APISubject(events.VerbConfig, tenantA, events.ConfigOpHistory), fmt.Sprintf("%s.h%d", inbox, i), []byte(`{"limit": 64}`))
	}
	if err := attacker.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, req := range []struct{ name, subject string }{
		{"erase", events.APISubject(events.VerbErase, tenantB, "b1")},
		{"config.get", events.APISubject(events.VerbConfig, tenantB, events.ConfigOpGet)},
	} {
		start := time.Now()
		m, err := victim.Request(req.subject, nil, 3*time.Second)
		took := time.Since(start)
		if err != nil {
			t.Errorf("globex's %s under acme's flood: %v after %v", req.name, err, took)
			continue
		}
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
			t.Errorf("globex's %s: error %s %s", req.name, code, m.Header.Get("Nats-Service-Error"))
		}
		t.Logf("RELIABILITY NATS fairness: globex's %s answered in %v during acme's flood", req.name, took)
	}
	refused, answered := 0, 0
	for seen := map[string]bool{}; len(seen) < 80; {
		m, err := replies.NextMsg(60 * time.Second)
		if err != nil {
			break // a request never answered (before: history pages over max_payload)
		}
		if seen[m.Subject] {
			continue // a further chunk of a large page
		}
		seen[m.Subject] = true
		if m.Header.Get("Nats-Service-Error-Code") == "429" {
			refused++
		} else {
			answered++
		}
	}
	if refused == 0 {
		t.Errorf("acme's 80 requests at once were never refused over its share (%d answered)", answered)
	}
	t.Logf("RELIABILITY NATS fairness: acme's 80 requests: %d refused 429 at once, %d answered", refused, answered)
}

// TestDuplicateStoresNothing (F6): an event id posted twice with
// different 600 KB bodies is stored once and leaves one claim-check
// object (before: the duplicate's body stayed as an object no record
// names); the same body posted twice at once keeps the one object its
// record names.
func TestDuplicateStoresNothing(t *testing.T) {
	h := newHarness(t)
	base := h.startIngest()
	post := func(size int) ingestsvc.Response {
		st, b := httpDo(t, "POST", base+"/v1/events", tokenA, "application/cloudevents+json", structured(t, transcriptEvent(tenantA, "dup", 1, size)))
		var r ingestsvc.Response
		if err := json.Unmarshal(b, &r); err != nil || st != 202 || len(r.Results) != 1 {
			t.Fatalf("post: %d %.300s", st, b)
		}
		return r
	}
	if r := post(600 << 10); r.Results[0].Duplicate {
		t.Fatalf("the first post is a duplicate: %+v", r)
	}
	if r := post(610 << 10); !r.Results[0].Duplicate {
		t.Fatalf("the second post is not a duplicate: %+v", r)
	}
	var wg sync.WaitGroup
	for range 2 { // the same body twice at once: one is stored, one a duplicate
		wg.Add(1)
		go func() {
			defer wg.Done()
			httpDo(t, "POST", base+"/v1/events", tokenA, "application/cloudevents+json", structured(t, transcriptEvent(tenantA, "same", 1, 600<<10)))
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obs, err := h.js.ObjectStore(ctx, events.BucketBlobs)
	if err != nil {
		t.Fatal(err)
	}
	list, err := obs.List(ctx)
	if err != nil && err != jetstream.ErrNoObjectsFound {
		t.Fatal(err)
	}
	by := map[string]int{}
	for _, o := range list {
		by[strings.SplitN(o.Name, "/", 3)[1]]++
	}
	if by["dup"] != 1 || by["same"] != 1 {
		t.Fatalf("claim-check objects by session: %v, want one each (%d objects)", by, len(list))
	}
	// The object of "same" is the one its record names.
	m, err := h.admin.Request("$JS.API.DIRECT.GET."+h.prov.Layout().Stream(tenantA, "same"), []byte(`{"last_by_subj":"`+h.prov.Layout().Subject(tenantA, "same")+`"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	named := m.Header.Get("ce-" + events.ExtBlob)
	if _, err := obs.GetInfo(ctx, named); named == "" || err != nil {
		t.Fatalf("the record of \"same\" names %q: %v", named, err)
	}
}
