package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/pkg/events"
)

// TestConsoleParkedWithoutTenant: a parked request whose record lacks its
// tenant and session (an invalid.<seq> key) is listed under the tenant and
// session its subject names, marked invalid, to that tenant and to
// operators, and to no other tenant.
func TestConsoleParkedWithoutTenant(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	kv, err := f.js.KeyValue(ctx, events.BucketParked)
	if err != nil {
		t.Fatal(err)
	}
	for i, session := range []string{"s8", "s9"} {
		p := &parked.Parked{Request: events.ExtractionRequested{UpToSeq: 3}, Reason: "invalid", Error: "no tenant",
			Subject: events.SubjectExtractPartitioned + ".0.acme." + session, StreamSeq: uint64(40 + i), ParkedAt: time.Now()}
		if err := parked.Put(ctx, kv, p); err != nil {
			t.Fatal(err)
		}
	}
	type row struct {
		Key, Tenant, Session string
		Derived, Invalid     bool
	}
	var got struct{ Parked []row }
	if f.get(t, "GET", "/console/api/parked", "a", "", &got); len(got.Parked) != 2 || got.Parked[0].Tenant != "acme" || got.Parked[0].Session != "s8" ||
		!got.Parked[0].Derived || !got.Parked[0].Invalid || got.Parked[0].Key != "invalid.40" {
		t.Fatalf("acme's parked list: %+v", got)
	}
	if f.get(t, "GET", "/console/api/parked", "op", "", &got); len(got.Parked) != 2 {
		t.Fatalf("the operator's parked list: %+v", got)
	}
	if f.get(t, "GET", "/console/api/parked", "b", "", &got); len(got.Parked) != 0 {
		t.Fatalf("beta's parked list: %+v", got)
	}
}
