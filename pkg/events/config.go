package events

import (
	"encoding/json"
	"time"
)

// VerbConfig reads and writes a tenant's configuration (TenantConfig in
// BucketConfig). Its subject is APISubject(VerbConfig, tenant, op) with op
// one of the ConfigOp constants: the session token names the operation.
// Over HTTP the same operations are GET, PUT and PATCH /v1/config and GET
// /v1/config/history.
const VerbConfig = "config"

// Operations of VerbConfig, the last token of its subject.
const (
	// ConfigOpGet answers a ConfigReply (no body).
	ConfigOpGet = "get"
	// ConfigOpPut replaces the configuration (ConfigWrite → ConfigReply).
	ConfigOpPut = "put"
	// ConfigOpPatch applies a JSON merge patch (RFC 7396) to it
	// (ConfigWrite → ConfigReply).
	ConfigOpPatch = "patch"
	// ConfigOpHistory lists a page of the stored revisions (an optional
	// ConfigHistoryRequest → ConfigHistory).
	ConfigOpHistory = "history"
)

// Actors of a configuration revision (ConfigMeta.Actor).
const (
	ConfigActorTenant   = "tenant"
	ConfigActorOperator = "operator"
)

// ConfigMeta says who wrote a configuration revision and when. It is stored
// with the configuration as the "_meta" member of the value; values written
// before it existed have none.
type ConfigMeta struct {
	// Actor is ConfigActorTenant or ConfigActorOperator.
	Actor string    `json:"actor"`
	At    time.Time `json:"at"`
	// Via is the interface the change came through: "http" or "nats"
	// (empty: written by a Go program, a test or the bench).
	Via string `json:"via,omitempty"`
}

// ConfigWrite is the request body of ConfigOpPut and ConfigOpPatch over
// NATS: the new configuration (put) or the merge patch (patch), and the
// revision it must replace (0: any; IfNone: only when none is stored).
type ConfigWrite struct {
	Config     json.RawMessage `json:"config"`
	IfRevision uint64          `json:"if_revision,omitempty"`
	IfNone     bool            `json:"if_none,omitempty"`
}

// ConfigReply is a tenant's configuration at one revision (0: none stored;
// the service defaults apply).
type ConfigReply struct {
	Tenant   string       `json:"tenant"`
	Revision uint64       `json:"revision"`
	Config   TenantConfig `json:"config"`
	Meta     *ConfigMeta  `json:"meta,omitempty"`
}

// ConfigFieldError is one invalid field of a configuration: its JSON path
// ("context_management.edits[1].keep") and what is wrong with it.
type ConfigFieldError struct {
	Field string `json:"field"`
	Error string `json:"error"`
}

// ConfigChange is one field that differs between two revisions; Old or New
// is absent when the field was unset.
type ConfigChange struct {
	Field string          `json:"field"`
	Old   json.RawMessage `json:"old,omitempty"`
	New   json.RawMessage `json:"new,omitempty"`
}

// ConfigRevision is one stored revision of a tenant's configuration, with
// the fields it changed from the revision before it (all of its set fields
// for the oldest one kept).
type ConfigRevision struct {
	Revision uint64    `json:"revision"`
	At       time.Time `json:"at"`
	// Op is "put" or "delete".
	Op string `json:"op"`
	// Actor is ConfigMeta.Actor (empty for revisions stored without one).
	Actor   string         `json:"actor,omitempty"`
	Via     string         `json:"via,omitempty"`
	Changes []ConfigChange `json:"changes"`
}

// ConfigHistoryRequest asks for a page of the history (HTTP: ?before=
// and ?limit=): the newest Limit revisions (default 16, at most 64) older
// than Before (0: from the newest).
type ConfigHistoryRequest struct {
	Before uint64 `json:"before,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// ConfigHistory answers ConfigOpHistory: a page of the kept revisions,
// oldest first, of at most 1 MiB of JSON. RECALL_CONFIG keeps the last
// 64 of each tenant. Next, when not 0, is the Before of the page of older
// revisions.
type ConfigHistory struct {
	Tenant    string           `json:"tenant"`
	Revisions []ConfigRevision `json:"revisions"`
	Next      uint64           `json:"next,omitempty"`
}
