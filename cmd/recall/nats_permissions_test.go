package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/natsperm"
)

func TestNATSPermissionsCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"nats-permissions", "--tenant", "acme", "--format", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var u natsperm.User
	if err := json.Unmarshal(out.Bytes(), &u); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if u.Tenant != "acme" || u.InboxPrefix != "_INBOX_TENANT.acme" || len(u.Permissions.Publish.Allow) == 0 {
		t.Fatalf("user %+v", u)
	}

	out.Reset()
	if err := run(context.Background(), []string{"nats-permissions", "--tenant", "acme", "--nkey", "UABC"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `nkey: "UABC"`) || strings.Contains(out.String(), "password") {
		t.Fatalf("conf with nkey:\n%s", out.String())
	}

	out.Reset()
	if err := run(context.Background(), []string{"nats-permissions", "--service", "all", "--format", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var us []natsperm.User
	if err := json.Unmarshal(out.Bytes(), &us); err != nil || len(us) != len(natsperm.Services) {
		t.Fatalf("services: %v %d", err, len(us))
	}

	for _, args := range [][]string{
		{"nats-permissions"},
		{"nats-permissions", "--tenant", "a.b"},
		{"nats-permissions", "--tenant", "a", "--service", "ingest"},
		{"nats-permissions", "--service", "nope"},
		{"nats-permissions", "--tenant", "a", "--format", "yaml"},
	} {
		if err := run(context.Background(), args, &out); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
