package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/pkg/events"
)

// live streams the lifecycle notifications of RECALL_EVENTS as they are
// published, as server-sent events (event: <kind>, data: {tenant,
// session, seq-less notification}); a tenant token gets its tenant's, an
// operator every tenant's or the one asked for.
func (c *Console) live(w http.ResponseWriter, r *http.Request) {
	id, tenant, ok := c.scopeOf(w, r)
	if !ok {
		return
	}
	subject := events.EventsSubject("*", "*", "*")
	if tenant != "" {
		subject = events.EventsSubject("*", tenant, "*")
	}
	who := streamKey(id)
	release, aerr := c.streams.Admit(who)
	if aerr != nil {
		microapi.CountRejected(r.Context(), "GET /console/api/live", who, aerr)
		w.Header().Set("Retry-After", microapi.RetryAfter(aerr.RetryAfter))
		fail(w, aerr.Code, fmt.Sprintf("too many live streams open (at most %d per tenant, %d in all)", maxStreamsPer, maxStreams))
		return
	}
	defer release()
	flusher, ok := w.(http.Flusher)
	if !ok {
		fail(w, http.StatusInternalServerError, "streaming is not supported here")
		return
	}
	ch := make(chan *nats.Msg, 256)
	sub, err := c.nc.ChanSubscribe(subject, ch)
	if err != nil {
		unavailable(w, err)
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": recall live\n\n")
	flusher.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.closing:
			return
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
		case m := <-ch:
			t, s := tenantSession(m.Subject)
			fmt.Fprintf(w, "event: %s\ndata: {\"tenant\":%q,\"session\":%q,\"data\":%s}\n\n", kindOf(m.Subject), t, s, dataOrNull(m.Data))
		}
		flusher.Flush()
	}
}

// streamKey is the key id's live streams are counted under: the tenant,
// or "operator" for every operator.
func streamKey(id Identity) string {
	if id.Operator {
		return "operator"
	}
	return id.Tenant
}

// tenantSession are the last two tokens of recall.events.<kind>.<t>.<s>.
func tenantSession(subject string) (string, string) {
	parts := strings.Split(subject, ".")
	if len(parts) != 5 {
		return "", ""
	}
	return parts[3], parts[4]
}

// dataOrNull is b on one line (an SSE data line ends at a newline), or
// null when b is not JSON.
func dataOrNull(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return []byte("null")
	}
	return buf.Bytes()
}

// Bounds of the live streams an edge holds open: each is a NATS
// subscription and a goroutine.
const (
	maxStreamsPer = 16
	maxStreams    = 512
)
