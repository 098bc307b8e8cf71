// Package natsperm generates the NATS permissions of Recall's users: one
// platform user per tenant, confined to that tenant's subjects, and the
// service users (ingest, trigger, extractor, compactor, indexer, longterm, gateway)
// as a reference.
//
// A tenant user may:
//   - send requests to the API of its own sessions
//     (recall.api.<verb>.<tenant>.<session>), its events included: they
//     enter through the ingest endpoint (recall.api.ingest.<tenant>.<session>),
//     which stamps the tenant and sets the deduplication id;
//   - subscribe to its own lifecycle notifications (recall.events.<kind>.<tenant>.<session>);
//   - subscribe to its own inbox prefix, "_INBOX_TENANT.<tenant>.>".
//
// Everything else is denied: other tenants' subjects, the transcript stream's
// subjects (a tenant publishing there would choose its own Nats-Msg-Id, and
// the stream's deduplication is stream-wide: it could make another tenant's
// event a "duplicate"), the $JS and $KV APIs (so no stream, consumer or
// bucket can be read or changed), the system account, service discovery
// ($SRV, for operators) and the shared "_INBOX.>" — a user allowed to
// subscribe there could read every reply on the server, other tenants'
// compaction answers and the services' KV reads included. Tenant clients
// must therefore connect with nats.CustomInboxPrefix(InboxPrefix(tenant));
// without it their replies cannot reach them.
//
// The service users get what the services use: the $JS API (stream
// deletion and purging excepted — Recall never deletes a stream; the
// ingest user, which erases sessions and users, may purge the streams of
// ErasePurges, subject by subject), the $KV
// subjects of the buckets they write, the subjects they publish and serve,
// the shared inbox (replies to their own requests, service discovery), and
// the tenants' reply spaces "_INBOX_TENANT.*.>" (answers to API requests;
// internal/replyspace keeps each answer in the requesting tenant's own).
// They get no allow_responses: a response permission lets a reply pass the
// publish deny list, so a requester choosing the reply subject could make a
// service publish anywhere. Every service may read the per-tenant
// configuration through the $JS API.
package natsperm

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/recallhq/recall/pkg/events"
)

// ErrUnknownService is returned by Service for a name that is not one of
// Services.
var ErrUnknownService = errors.New("unknown service")

// Rule lists the subjects of one direction (publish or subscribe). When
// Allow is non-empty everything not in it is denied; Deny wins over Allow.
type Rule struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Responses lets a user publish to the reply subject of a message it
// received: MaxMsgs replies (negative: unlimited) within Expires. Recall's
// generated users never carry it: a response bypasses the publish deny list.
type Responses struct {
	MaxMsgs int           `json:"max"`
	Expires time.Duration `json:"ttl"`
}

// Permissions are one NATS user's permissions.
type Permissions struct {
	Publish   Rule       `json:"publish"`
	Subscribe Rule       `json:"subscribe"`
	Responses *Responses `json:"allow_responses,omitempty"`
}

// User is a NATS user with Recall's permissions.
type User struct {
	// Name is the NATS user name.
	Name string `json:"user"`
	// Tenant is set for tenant users.
	Tenant string `json:"tenant,omitempty"`
	// Service is set for service users.
	Service string `json:"service,omitempty"`
	// InboxPrefix is the inbox prefix the user's clients must use
	// (nats.CustomInboxPrefix); "_INBOX" for service users.
	InboxPrefix string      `json:"inbox_prefix"`
	Permissions Permissions `json:"permissions"`
}

// TenantReplies matches every tenant's reply space (events.InboxPrefix).
const TenantReplies = events.InboxRoot + ".*.>"

// Services are the service names Service knows, in pipeline order.
var Services = []string{"ingest", "trigger", "extractor", "compactor", "indexer", "longterm", "gateway"}

// InboxPrefix is the inbox prefix of tenant's clients: "_INBOX_<tenant>".
// Tenant ids cannot contain '.', so no tenant's prefix covers another's.
func InboxPrefix(tenant string) string { return events.InboxPrefix(tenant) }

// Tenant returns the platform user of tenant (named user, or
// "tenant-<tenant>" when user is empty). The tenant must be a valid id.
func Tenant(tenant, user string) (User, error) {
	if err := events.ValidateID(tenant); err != nil {
		return User{}, fmt.Errorf("tenant: %w", err)
	}
	if user == "" {
		user = "tenant-" + tenant
	}
	if err := checkUserName(user); err != nil {
		return User{}, err
	}
	inbox := InboxPrefix(tenant)
	return User{
		Name:        user,
		Tenant:      tenant,
		InboxPrefix: inbox,
		Permissions: Permissions{
			Publish: Rule{
				Allow: []string{
					events.APISubject("*", tenant, "*"),
				},
				// Explicit denials keep the user confined even if an
				// operator merges a broader allow into this block.
				Deny: []string{"$JS.>", "$KV.>", "$SYS.>", "$SRV.>", "_INBOX.>", events.InboxRoot + ".>",
					events.SubjectTranscriptRoot + ".>", events.SubjectExtractRoot + ".>", events.SubjectEventsRoot + ".>",
					events.SubjectCommitRoot + ".>", events.SubjectCommitPartitioned + ".>"},
			},
			Subscribe: Rule{
				Allow: []string{
					inbox + ".>",
					events.EventsSubject("*", tenant, "*"),
				},
				Deny: []string{"$JS.>", "$KV.>", "$SYS.>", "$SRV.>", "_INBOX.>",
					events.SubjectTranscriptRoot + ".>", events.SubjectAPIRoot + ".>", events.SubjectExtractRoot + ".>"},
			},
		},
	}, nil
}

// serviceCommon is what every service user may do. Every service answers
// API requests in the tenants' reply spaces (replyspace.Guard picks the
// requester's own); no allow_responses.
func serviceCommon() Permissions {
	return Permissions{
		Publish: Rule{
			Allow: []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$SRV.>", "_INBOX.>", TenantReplies},
			Deny:  []string{"$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>", "$SYS.>"},
		},
		Subscribe: Rule{
			Allow: []string{"_INBOX.>", "$SRV.>"},
			Deny:  []string{"$SYS.>"},
		},
	}
}

// kv is the subjects of the named KV buckets.
func kv(buckets ...string) []string {
	out := make([]string, len(buckets))
	for i, b := range buckets {
		out[i] = "$KV." + b + ".>"
	}
	return out
}

// Service returns the reference user of one service (one of Services),
// named "recall-<service>".
func Service(name string) (User, error) {
	perms, ok := servicePermissions[name]
	if !ok {
		return User{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownService, name, strings.Join(Services, ", "))
	}
	pub, sub := perms()
	common := serviceCommon()
	p := common
	if name == "ingest" {
		p.Publish.Deny = ingestDeny()
	}
	p.Publish.Allow = append(append([]string(nil), common.Publish.Allow...), pub...)
	p.Subscribe.Allow = append(append([]string(nil), common.Subscribe.Allow...), sub...)
	return User{Name: "recall-" + name, Service: name, InboxPrefix: "_INBOX", Permissions: p}, nil
}

// Subjects several services' permissions name.
var (
	transcript = events.AllTranscripts
	extract    = events.ExtractSubject("*", "*")
	notify     = events.EventsSubject("*", "*", "*")
)

// apiAll is the subject of verb's endpoint for every tenant and session.
func apiAll(verb string) string { return events.APISubject(verb, "*", "*") }

// servicePermissions holds, per service, what it publishes and subscribes
// to beside what every service may (serviceCommon).
var servicePermissions = map[string]func() (pub, sub []string){
	"ingest":    ingestPermissions,
	"trigger":   triggerPermissions,
	"extractor": extractorPermissions,
	"compactor": compactorPermissions,
	"indexer":   indexerPermissions,
	"longterm":  longtermPermissions,
	"gateway":   gatewayPermissions,
}

func ingestPermissions() (pub, sub []string) {
	// Serves the NATS ingest endpoint, stores events, and forwards the
	// HTTP session API to the services that serve it, receiving their
	// answers in the tenant's reply space.
	// Serves the operator console: reads the buckets and streams,
	// follows the notifications, and replays parked extractions.
	// Stores the bodies of events too large for one message in the
	// claim-check object store.
	// Replays parked long-term commits from the console: re-queues the
	// commit and clears its parked record.
	// Erases sessions and users (ErasePurges): writes tombstones,
	// purges the erased subjects and announces the erase.
	// Serves tenant configuration (VerbConfig): writes RECALL_CONFIG.
	pub = append([]string{transcript, events.SubjectAPIRoot + ".>", extract, "$O." + events.BucketBlobs + ".>", events.CommitSubject("*", "*"), notify},
		kv(events.BucketParked, events.BucketLTMState, events.BucketTombstones, events.BucketMemory, events.BucketStatus,
			events.BucketTriggerState, events.BucketIndex, events.BucketLTM, events.BucketConfig)...)
	sub = []string{apiAll(events.VerbIngest), apiAll(events.VerbErase), apiAll(events.VerbConfig), TenantReplies, notify}
	return pub, sub
}

func triggerPermissions() (pub, sub []string) {
	// Consumes the transcript, queues extraction requests, announces
	// them, serves manual extraction (waiting for the outcome on the
	// notification subjects), reads memory records, keeps its
	// membership of the partitioned trigger and snapshots of long
	// sessions' state.
	pub = append([]string{extract, notify}, kv(events.BucketMemory, events.BucketTriggers, events.BucketTriggerState)...)
	sub = []string{apiAll(events.VerbExtract), notify}
	return pub, sub
}

func extractorPermissions() (pub, sub []string) {
	// Works the extraction partitions, writes memory, status, membership
	// and parked records, announces outcomes, replays parked requests
	// and serves memory reads; offers waiting requests to the other
	// workers and runs theirs (work sharing).
	share := []string{events.SubjectExtractShare, events.SubjectExtractShare + ".run.*", events.SubjectExtractShare + ".result.*", events.SubjectExtractShare + ".status.*"}
	pub = append(append([]string{extract, notify}, share...),
		kv(events.BucketMemory, events.BucketStatus, events.BucketWorkers, events.BucketParked)...)
	sub = append([]string{apiAll(events.VerbMemory)}, share...)
	return pub, sub
}

func compactorPermissions() (pub, sub []string) {
	// Serves compaction and context edits from memory and transcript,
	// announces compactions.
	pub = []string{notify}
	sub = []string{apiAll(events.VerbCompact), apiAll(events.VerbEdit)}
	return pub, sub
}

func indexerPermissions() (pub, sub []string) {
	// Follows the transcript's shards (membership heartbeats in
	// RECALL_INDEX_MEMBERS), writes the session index (entries and
	// name claims), reads memory notes, announces indexings, and
	// serves the index, reference and question endpoints.
	pub = append([]string{notify}, kv(events.BucketIndex, events.BucketIndexMembers)...)
	sub = []string{apiAll(events.VerbIndex), apiAll(events.VerbReindex), apiAll(events.VerbSessions),
		apiAll(events.VerbResolve), apiAll(events.VerbQuery)}
	return pub, sub
}

func longtermPermissions() (pub, sub []string) {
	// Follows the transcript's shards for commit points (membership
	// heartbeats in RECALL_LTM_FOLLOWERS) and queues them by
	// user, works the commit partitions (membership heartbeats), writes
	// memory documents, commit records and leases, announces commits,
	// and serves commits and memory reads.
	pub = append([]string{notify, events.CommitSubject("*", "*")}, kv(events.BucketLTM, events.BucketLTMState, events.BucketLTMMembers, events.BucketLTMFollowers)...)
	sub = []string{apiAll(events.VerbCommit), apiAll(events.VerbLTM)}
	return pub, sub
}

func gatewayPermissions() (pub, sub []string) {
	// Stores the transcript records it captures from model traffic
	// (a trusted producer, as ingest; records too large for one message
	// in the claim-check object store), keeps what it stored of each
	// session in RECALL_GATEWAY, and asks the compactor, the memory
	// endpoint and the trigger's manual extraction (a compaction whose
	// notes are behind catches them up first), receiving the answers in
	// the tenants' reply spaces.
	pub = append([]string{transcript, "$O." + events.BucketBlobs + ".>", apiAll(events.VerbCompact), apiAll(events.VerbExtract), apiAll(events.VerbMemory)}, kv(events.BucketGateway)...)
	sub = []string{TenantReplies}
	return pub, sub
}

// ErasePurges are the streams whose subjects the eraser (in the ingest
// service) purges: every stream and bucket that holds a session's or a
// user's data (the transcript: every shard stream). The ingest user may
// purge these and no other stream.
var ErasePurges = []string{events.StreamTranscriptShardPrefix + "<shard>", events.StreamEvents, events.StreamExtract, events.StreamCommits,
	"KV_" + events.BucketMemory, "KV_" + events.BucketStatus, "KV_" + events.BucketTriggerState, "KV_" + events.BucketParked,
	"KV_" + events.BucketIndex, "KV_" + events.BucketLTM, "KV_" + events.BucketLTMState, "OBJ_" + events.BucketBlobs}

// ingestDeny is the ingest user's publish deny list: no stream deletion,
// and no purge of the streams outside ErasePurges (configuration,
// membership, tombstones).
func ingestDeny() []string {
	deny := []string{"$JS.API.STREAM.DELETE.>", "$SYS.>"}
	for _, b := range []string{events.BucketConfig, events.BucketWorkers, events.BucketTriggers, events.BucketLTMMembers, events.BucketTombstones} {
		deny = append(deny, "$JS.API.STREAM.PURGE.KV_"+b)
	}
	return deny
}

// AllServices returns the users of every service.
func AllServices() []User {
	out := make([]User, 0, len(Services))
	for _, s := range Services {
		u, _ := Service(s)
		out = append(out, u)
	}
	return out
}

// Server converts p to nats-server permissions.
func (p Permissions) Server() *server.Permissions {
	sp := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: clone(p.Publish.Allow), Deny: clone(p.Publish.Deny)},
		Subscribe: &server.SubjectPermission{Allow: clone(p.Subscribe.Allow), Deny: clone(p.Subscribe.Deny)},
	}
	if p.Responses != nil {
		sp.Response = &server.ResponsePermission{MaxMsgs: p.Responses.MaxMsgs, Expires: p.Responses.Expires}
	}
	return sp
}

// ServerUser returns u as a nats-server user with password auth.
func (u User) ServerUser(password string) *server.User {
	return &server.User{Username: u.Name, Password: password, Permissions: u.Permissions.Server()}
}

// ServerNkeyUser returns u as a nats-server nkey user (public key pub).
func (u User) ServerNkeyUser(pub string) *server.NkeyUser {
	return &server.NkeyUser{Nkey: pub, Permissions: u.Permissions.Server()}
}

// Conf renders u as one entry of a nats-server configuration's
// authorization.users list. With nkey set the entry authenticates by that
// public nkey; otherwise by user name and the password held in the
// environment variable passwordEnv, which the server resolves when it loads
// the file (no secret is written).
func (u User) Conf(nkey, passwordEnv string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Recall NATS user %s", u.Name)
	if u.Tenant != "" {
		fmt.Fprintf(&b, " (tenant %s). Clients must connect with inbox prefix %q.\n", u.Tenant, u.InboxPrefix)
	} else {
		fmt.Fprintf(&b, " (service %s).\n", u.Service)
	}
	b.WriteString("{\n")
	if nkey != "" {
		fmt.Fprintf(&b, "  nkey: %q\n", nkey)
	} else {
		fmt.Fprintf(&b, "  user: %q\n", u.Name)
		fmt.Fprintf(&b, "  password: $%s\n", passwordEnv)
	}
	b.WriteString("  permissions: {\n")
	writeRule(&b, "publish", u.Permissions.Publish)
	writeRule(&b, "subscribe", u.Permissions.Subscribe)
	if r := u.Permissions.Responses; r != nil {
		fmt.Fprintf(&b, "    allow_responses: { max: %d, expires: %q }\n", r.MaxMsgs, r.Expires.String())
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// PasswordEnv is the conventional environment variable holding u's password
// in Conf output: RECALL_NATS_PASSWORD_<NAME> with non-alphanumerics as '_'.
func (u User) PasswordEnv() string {
	var b strings.Builder
	b.WriteString("RECALL_NATS_PASSWORD_")
	for _, r := range strings.ToUpper(u.Name) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func writeRule(b *strings.Builder, name string, r Rule) {
	fmt.Fprintf(b, "    %s: {\n", name)
	if len(r.Allow) > 0 {
		fmt.Fprintf(b, "      allow: %s\n", quoteList(r.Allow))
	}
	if len(r.Deny) > 0 {
		fmt.Fprintf(b, "      deny: %s\n", quoteList(r.Deny))
	}
	b.WriteString("    }\n")
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func clone(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}

func checkUserName(u string) error {
	if len(u) > 256 || strings.ContainsFunc(u, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r == 0x7f }) {
		return fmt.Errorf("user name %q: use printable characters without spaces or quotes", u)
	}
	return nil
}
