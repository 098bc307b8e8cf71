package main

import (
	"strings"
	"testing"

	"github.com/recallhq/recall/services/stack"
)

// TestPrintAuthHidesPasswords: `recall up` names the NATS users and the
// 0600 file holding their passwords, never a password.
func TestPrintAuthHidesPasswords(t *testing.T) {
	a := &stack.Auth{Path: "/data/nats-users.json", Users: []stack.User{
		{Name: "tenant-acme", Password: "pw-tenant-secret", Tenant: "acme", InboxPrefix: "_INBOX_acme"},
		{Name: "admin", Password: "pw-admin-secret"},
		{Name: "svc-ingest", Password: "pw-service-secret", Service: "ingest"},
	}}
	var out strings.Builder
	printAuth(&out, a)
	if strings.Contains(out.String(), "pw-") || !strings.Contains(out.String(), a.Path) || !strings.Contains(out.String(), "tenant-acme") {
		t.Fatalf("printed:\n%s", out.String())
	}
}
