package natsperm_test

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/recallhq/recall/internal/natsperm"
	"github.com/recallhq/recall/pkg/events"
)

func allows(r natsperm.Rule, subject string) bool {
	for _, d := range r.Deny {
		if server.SubjectMatchesFilter(subject, d) {
			return false
		}
	}
	for _, a := range r.Allow {
		if server.SubjectMatchesFilter(subject, a) {
			return true
		}
	}
	return false
}

// TestConfigVerb: a tenant user may request its own configuration only;
// the ingest user serves every tenant's and writes RECALL_CONFIG.
func TestConfigVerb(t *testing.T) {
	u, err := natsperm.Tenant("acme", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{events.ConfigOpGet, events.ConfigOpPut, events.ConfigOpPatch, events.ConfigOpHistory} {
		if !allows(u.Permissions.Publish, events.APISubject(events.VerbConfig, "acme", op)) {
			t.Errorf("acme may not request its own config %s", op)
		}
		if allows(u.Permissions.Publish, events.APISubject(events.VerbConfig, "beta", op)) {
			t.Errorf("acme may request beta's config %s", op)
		}
	}
	if allows(u.Permissions.Publish, "$KV."+events.BucketConfig+".tenant.acme") {
		t.Error("acme may write RECALL_CONFIG directly")
	}
	in, _ := natsperm.Service("ingest")
	if !allows(in.Permissions.Subscribe, events.APISubject(events.VerbConfig, "beta", events.ConfigOpPut)) {
		t.Error("ingest cannot serve the config endpoint")
	}
	if !allows(in.Permissions.Publish, "$KV."+events.BucketConfig+".tenant.beta") {
		t.Error("ingest cannot write RECALL_CONFIG")
	}
}
