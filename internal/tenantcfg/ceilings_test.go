package tenantcfg

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// TestCeilingsRefuse: a value over an operator's ceiling is refused by
// Parse, Validate, Write and Patch alike, naming the field and the
// ceiling; a raised ceiling admits it; what is stored decodes whatever
// the ceilings (readers cap at use).
func TestCeilingsRefuse(t *testing.T) {
	big := `{"template": "` + strings.Repeat("x", 300<<10) + `"}`
	for _, tc := range []struct {
		name, doc, field, says string
	}{
		{"query budget", `{"query_max_budget_tokens": 9223372036854775807}`, "query_max_budget_tokens", "at most 200000"},
		{"size", big, "", "at most 262144 allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Errors[0].Field != tc.field || !strings.Contains(ie.Errors[0].Error, tc.says) {
				t.Fatalf("Parse: %v", err)
			}
		})
	}
	var types []string
	for i := range 33 {
		types = append(types, `{"name":"t`+string(rune('a'+i%26))+strings.Repeat("x", i/26)+`","prompt":"p"}`)
	}
	doc := `{"custom_memory_types": [` + strings.Join(types, ",") + `]}`
	if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "33 types, at most 32") {
		t.Fatalf("33 memory types: %v", err)
	}
	if _, err := (Ceilings{CustomMemoryTypes: 40}).Parse([]byte(doc)); err != nil {
		t.Fatalf("33 types under a ceiling of 40: %v", err)
	}
	raised := Ceilings{QueryBudgetTokens: 1 << 40}
	if _, err := raised.Parse([]byte(`{"query_max_budget_tokens": 1000000}`)); err != nil {
		t.Fatalf("a raised ceiling: %v", err)
	}
	if (Ceilings{ConfigBytes: 1 << 30}).Resolved().ConfigBytes != MaxConfigBytes {
		t.Fatal("ConfigBytes is not capped below the store's limit")
	}

	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(ctx, events.BucketConfig)
	if _, err := Write(ctx, kv, "a", events.TenantConfig{QueryMaxBudgetTokens: 1 << 62}, events.ConfigMeta{}, Precondition{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Write over the ceiling: %v", err)
	}
	if _, err := Patch(ctx, kv, "a", []byte(big), events.ConfigMeta{}, Precondition{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Patch over the size: %v", err)
	}
	if _, err := raised.Write(ctx, kv, "a", events.TenantConfig{QueryMaxBudgetTokens: 1000000}, events.ConfigMeta{}, Precondition{}); err != nil {
		t.Fatal(err)
	}
	if e, err := Read(ctx, kv, "a"); err != nil || e.Config.QueryMaxBudgetTokens != 1000000 {
		t.Fatalf("a value above the default ceiling does not read back: %+v %v", e, err)
	}
}

// TestHistoryPages: history answers pages of at most Limit revisions and
// MaxBytes, newest first across pages, each page oldest first, and the
// pages together are the whole history with the same diffs.
func TestHistoryPages(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(ctx, events.BucketConfig)
	pad := strings.Repeat("p", 20<<10)
	for i := range 20 {
		c := events.TenantConfig{MinimumTokensBetweenUpdate: int64(100 + i), Prompt: pad + string(rune('a'+i))}
		if _, err := Write(ctx, kv, "a", c, events.ConfigMeta{Actor: "tenant"}, Precondition{}); err != nil {
			t.Fatal(err)
		}
	}
	all, next, err := History(ctx, kv, "a", Page{Limit: 64})
	if err != nil || len(all) != 20 || next != 0 {
		t.Fatalf("whole history: %d revisions, next %d, %v", len(all), next, err)
	}
	var paged []events.ConfigRevision
	before := uint64(0)
	for pages := 0; ; pages++ {
		page, next, err := History(ctx, kv, "a", Page{Before: before, Limit: 64, MaxBytes: 100 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(page); len(b) > 110<<10 || len(page) == 0 {
			t.Fatalf("page %d: %d revisions, %d bytes", pages, len(page), len(b))
		}
		paged = append(page, paged...)
		if next == 0 {
			break
		}
		before = next
	}
	a, _ := json.Marshal(all)
	b, _ := json.Marshal(paged)
	if string(a) != string(b) {
		t.Fatalf("the pages differ from the whole history:\n%.300s\n%.300s", a, b)
	}
	if page, next, _ := History(ctx, kv, "a", Page{Limit: 3}); len(page) != 3 || next != page[0].Revision || page[2].Revision != all[19].Revision {
		t.Fatalf("limit 3: %d revisions, next %d", len(page), next)
	}
}
