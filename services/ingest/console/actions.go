package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// preview asks the compactor what a compaction would keep now, without
// compacting (events.CompactRequest.Preview).
func (c *Console) preview(w http.ResponseWriter, r *http.Request) {
	body, _ := json.Marshal(events.CompactRequest{Preview: true, Trigger: events.TriggerManual})
	c.askCompactor(w, r, "POST /console/api/tenants/{tenant}/sessions/{session}/preview", events.VerbCompact, body)
}

// edit asks the compactor which blocks of the session's current context
// a context edit would clear (events.EditRequest; an empty body uses the
// tenant's settings, else clear_tool_uses with the API's defaults). It
// changes nothing: the platform applies an edit, not the compactor.
func (c *Console) edit(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<10))
	if err != nil {
		fail(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	req, err := events.DecodeEditRequest(b)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	body, _ := json.Marshal(req)
	c.askCompactor(w, r, "POST /console/api/tenants/{tenant}/sessions/{session}/edit", events.VerbEdit, body)
}

// askCompactor sends body to the compactor's verb for the session of r's
// path and answers its reply as it came (JSON), or its refusal as a
// problem: 400 (a request it found invalid), 429 and 503 (over a share,
// or full: with Retry-After) keep their status, other refusals are 502;
// no compactor is 503.
func (c *Console) askCompactor(w http.ResponseWriter, r *http.Request, endpoint, verb string, body []byte) {
	tenant, session, ok := c.sessionOf(w, r)
	if !ok {
		return
	}
	release, ok := c.admit(w, r, tenant, endpoint)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.Timeout)
	defer cancel()
	hdr := nats.Header{}
	natsce.Inject(ctx, hdr)
	reply, err := chunked.Request(ctx, c.nc, events.APISubject(verb, tenant, session), hdr, body)
	switch {
	case errors.Is(err, chunked.ErrNoResponders):
		fail(w, http.StatusServiceUnavailable, "no compactor answers right now")
		return
	case err != nil:
		unavailable(w, err)
		return
	case reply.Header.Get("Nats-Service-Error-Code") != "":
		status := http.StatusBadGateway
		if code := reply.Header.Get("Nats-Service-Error-Code"); code == "429" || code == "503" || code == "400" {
			status, _ = strconv.Atoi(code)
			if ra := reply.Header.Get("Retry-After"); ra != "" {
				w.Header().Set("Retry-After", ra)
			}
		}
		fail(w, status, reply.Header.Get("Nats-Service-Error"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(reply.Data)
}

// parked lists parked extraction requests ("parked") and parked long-term
// memory commits ("commits"): every tenant's for an operator (or the one
// asked for), the tenant's own for a tenant token.
func (c *Console) parked(w http.ResponseWriter, r *http.Request) {
	id, want, ok := c.scopeOf(w, r)
	if !ok {
		return
	}
	release, ok := c.admit(w, r, want, "GET /console/api/parked")
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	list, err := parked.List(ctx, c.js)
	if err != nil {
		unavailable(w, err)
		return
	}
	out := []parkedView{}
	for _, p := range list {
		if v := viewParked(p); want == "" || v.Tenant == want {
			out = append(out, v)
		}
	}
	commits, err := parked.ListCommits(ctx, c.js)
	if err != nil {
		unavailable(w, err)
		return
	}
	ours := []parked.Commit{}
	for _, p := range commits {
		if want == "" || p.Tenant == want {
			ours = append(ours, p)
		}
	}
	writeJSON(w, map[string]any{"parked": out, "commits": ours, "can_replay": id.Operator})
}

// parkedView is a parked request as the console lists it: Tenant and
// Session are the request's, or, when the record lacks them, the ones its
// RECALL_EXTRACT subject names (Derived). Invalid requests (invalid.<seq>
// keys) cannot be replayed from the console: parked.Replay leaves them
// parked, and recall extract --failed shows them.
type parkedView struct {
	parked.Parked
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	Derived bool   `json:"derived,omitempty"`
	Invalid bool   `json:"invalid,omitempty"`
}

func viewParked(p parked.Parked) parkedView {
	p.Raw = nil
	v := parkedView{Parked: p, Tenant: p.Request.Tenant, Session: p.Request.Session, Invalid: strings.HasPrefix(p.Key, "invalid.")}
	if v.Tenant == "" || v.Session == "" {
		if t, s, ok := events.SplitSessionSubject(p.Subject); ok {
			v.Tenant, v.Session, v.Derived = cmp.Or(v.Tenant, t), cmp.Or(v.Session, s), true
		}
	}
	return v
}

// replay re-queues parked requests (operators only): those of one session,
// or of one tenant, as the body says.
func (c *Console) replay(w http.ResponseWriter, r *http.Request) {
	id, ok := c.identify(w, r)
	if !ok {
		return
	}
	if !id.Operator {
		fail(w, http.StatusForbidden, "replaying parked extractions needs an operator token")
		return
	}
	// A JSON content type cannot be sent cross-site without a CORS
	// preflight (which the edge does not grant): another site open in the
	// operator's browser cannot replay, even on an open local install.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		fail(w, http.StatusUnsupportedMediaType, "the body must be application/json")
		return
	}
	var f struct {
		Tenant  string `json:"tenant"`
		Session string `json:"session"`
		// Kind is "extraction" (or empty) or "commit" (long-term memory).
		Kind string `json:"kind"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&f); err != nil {
		fail(w, http.StatusBadRequest, "body must be {\"tenant\": \"…\", \"session\": \"…\"}: "+err.Error())
		return
	}
	if f.Kind != "" && f.Kind != "extraction" && f.Kind != "commit" {
		fail(w, http.StatusBadRequest, "kind must be \"extraction\" (the default) or \"commit\"")
		return
	}
	for name, v := range map[string]string{"tenant": f.Tenant, "session": f.Session} {
		if err := events.ValidateID(v); err != nil {
			fail(w, http.StatusBadRequest, name+": "+err.Error())
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	filter := parked.Filter{Tenant: f.Tenant, Session: f.Session}
	var n int
	var err error
	if f.Kind == "commit" {
		n, err = parked.ReplayCommits(ctx, c.js, filter)
	} else {
		n, err = parked.Replay(ctx, c.js, "console", filter)
	}
	if err != nil {
		unavailable(w, err)
		return
	}
	c.cfg.Log.InfoContext(ctx, "parked work replayed from the console", "kind", f.Kind, "tenant", f.Tenant, "session", f.Session, "replayed", n)
	writeJSON(w, map[string]int{"replayed": n})
}
