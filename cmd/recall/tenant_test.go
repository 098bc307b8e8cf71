package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

func TestTenantValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"minimum_tokens_between_update": -1, "retention": {"session_max_age": "1s"}, "nope": 1}`), 0o600)
	var out bytes.Buffer
	err := run(context.Background(), []string{"tenant", "validate", bad}, &out)
	if !errors.Is(err, errInvalidConfig) {
		t.Fatalf("invalid file: %v", err)
	}
	if want := "nope: unknown field\n"; out.String() != want {
		t.Fatalf("output %q, want %q", out.String(), want)
	}
	_ = os.WriteFile(bad, []byte(`{"minimum_tokens_between_update": -1, "retention": {"session_max_age": "1s"}}`), 0o600)
	out.Reset()
	if err := run(context.Background(), []string{"tenant", "validate", bad}, &out); !errors.Is(err, errInvalidConfig) ||
		!strings.Contains(out.String(), "minimum_tokens_between_update: must be ≥ 0\n") || !strings.Contains(out.String(), "retention.session_max_age: must be") {
		t.Fatalf("every field: %v %q", err, out.String())
	}
	good := filepath.Join(dir, "good.json")
	_ = os.WriteFile(good, []byte(`{"session_memory": true}`), 0o600)
	out.Reset()
	if err := run(context.Background(), []string{"tenant", "validate", good}, &out); err != nil || out.String() != "valid\n" {
		t.Fatalf("valid file: %v %q", err, out.String())
	}
}

// TestTenantValidateBounds: validate refuses what the API refuses — a
// configuration over the size bound, a budget over the operator's ceiling
// (RECALL_TENANT_MAX_*, read as the ingest service reads it) — naming the
// bound.
func TestTenantValidateBounds(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	_ = os.WriteFile(big, []byte(`{"template": "`+strings.Repeat("t", 1100<<10)+`"}`), 0o600)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"tenant", "validate", big}, &out); !errors.Is(err, errInvalidConfig) || !strings.Contains(out.String(), "at most 262144 allowed") {
		t.Fatalf("a 1.1 MB configuration: %v %q", err, out.String())
	}
	budget := filepath.Join(dir, "budget.json")
	_ = os.WriteFile(budget, []byte(`{"query_max_budget_tokens": 300000}`), 0o600)
	out.Reset()
	if err := run(context.Background(), []string{"tenant", "validate", budget}, &out); !errors.Is(err, errInvalidConfig) || !strings.Contains(out.String(), "at most 200000") {
		t.Fatalf("a budget over the default ceiling: %v %q", err, out.String())
	}
	t.Setenv("RECALL_TENANT_MAX_QUERY_BUDGET_TOKENS", "400000")
	out.Reset()
	if err := run(context.Background(), []string{"tenant", "validate", budget}, &out); err != nil {
		t.Fatalf("under a raised ceiling: %v %q", err, out.String())
	}
}

// TestTenantCommands runs set, get, edit and history against a real
// ingest service, as an operator naming the tenant.
func TestTenantCommands(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := ingestsvc.Start(ctx, ingestsvc.Config{
		NATS: natsconn.Config{URL: s.ClientURL()}, Config: provision.Config{Partitions: 1, MemoryStorage: true},
		HTTPAddr: "127.0.0.1:0", Tenants: "acme:" + ingestsvc.HashToken("t-acme"), OperatorTokens: ingestsvc.HashToken("t-op"),
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Shutdown(context.Background()) }()
	flags := []string{"--recall-url", "http://" + svc.Addr(), "--token", "t-op", "--tenant", "acme"}
	tenant := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(append([]string{"tenant"}, args...), flags...), &out)
		return out.String(), err
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "c.json")
	_ = os.WriteFile(file, []byte(`{"min_new_user_messages": 9}`), 0o600)
	if out, err := tenant("set", file); err != nil || !strings.Contains(out, "stored revision") {
		t.Fatalf("set: %v %q", err, out)
	}
	if out, err := tenant("get"); err != nil || !strings.Contains(out, `"min_new_user_messages": 9`) {
		t.Fatalf("get: %v %q", err, out)
	}
	t.Setenv("VISUAL", "")
	t.Setenv("EDITOR", `sed -i.bak -e 's/: 9/: 11/'`)
	if out, err := tenant("edit"); err != nil || !strings.Contains(out, "stored revision") {
		t.Fatalf("edit: %v %q", err, out)
	}
	out, err := tenant("history")
	if err != nil || !strings.Contains(out, "min_new_user_messages: 9 → 11") || strings.Count(out, "operator via http") != 2 {
		t.Fatalf("history: %v %q", err, out)
	}
	_ = os.WriteFile(file, []byte(`{"min_new_user_messages": 1}`), 0o600)
	if out, err := tenant("set", file, "--if-match", "1"); err == nil || !strings.Contains(err.Error(), "412") {
		t.Fatalf("stale --if-match: %v %q", err, out)
	}
}
