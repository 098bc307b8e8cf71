package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/natsperm"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// replayStats sums the per-event results of a replay.
type replayStats struct {
	published, duplicates, rejected int
	firstErrors                     []string
	// retried counts batches resent from an event answered 503/504;
	// reordered counts events the ingest stored although an earlier event
	// of their batch failed (stored before it).
	retried, reordered int
	// resent counts requests sent again because their attempt failed —
	// no reply in time (a reply lost with a node), unreachable, 503.
	resent  int
	counted map[int]bool // events (by index in the replay) already counted
}

// add counts the settled results of batch, whose first event is event
// offset of the replay; an event is counted once, at its first settled
// result.
func (s *replayStats) add(results []ingestsvc.EventResult, batch []event.Event, offset int) {
	for _, r := range results {
		if s.counted[offset+r.Index] {
			continue
		}
		s.counted[offset+r.Index] = true
		switch {
		case r.Accepted() && r.Duplicate:
			s.duplicates++
		case r.Accepted():
			s.published++
		default:
			s.rejected++
			if len(s.firstErrors) < 5 {
				id := r.ID
				if id == "" && r.Index < len(batch) {
					id = batch[r.Index].ID()
				}
				s.firstErrors = append(s.firstErrors, fmt.Sprintf("event %s: %d %s %s", id, r.Status, r.Field, r.Error))
			}
		}
	}
}

func runReplay(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("replay")
	tenant := fs.String("tenant", "", "tenant: the NATS subject's tenant (default \"default\"); over HTTP the token decides and this only asserts it")
	session := fs.String("session", "", "session id (default: the transcript's sessionId)")
	httpURL := fs.String("http", envOr("RECALL_URL", "http://127.0.0.1:8080"), "base URL of the HTTP edge ($RECALL_URL sets the default)")
	fs.StringVar(httpURL, "recall-url", *httpURL, "the same as --http (the name recall watch, hook and mcp use)")
	natsURL := fs.String("nats-url", "", "publish through the NATS ingest endpoint at this URL instead of HTTP")
	token := fs.String("token", os.Getenv("RECALL_TOKEN"), "bearer token for the HTTP edge ($RECALL_TOKEN sets the default)")
	batchSize := fs.Int("batch", 1, "events per request; above 1 is faster (the ingest keeps a session's events of a request in order, also through a JetStream leader loss)")
	retryFor := fs.Duration("retry-for", 2*time.Minute, "how long one request is retried while the ingest answers 503/504, does not answer in time (or, once it has answered, cannot be reached) before replay stops; nothing listening at all fails at once")
	attempt := fs.Duration("attempt-timeout", defaultAttemptTimeout, "how long one attempt waits for its reply before the request is sent again with the same event ids (at most a third of --retry-for)")
	setUsage(fs, "replay FILE [--session S] [--tenant T] [--http URL | --nats-url URL] [--token TOKEN]")
	if err := parseFlags(fs, reorderFlags(args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: replay takes exactly one FILE (see 'recall replay -h')", errUsage)
	}
	path := fs.Arg(0)
	res, err := importFile(path, importer.Options{Tenant: *tenant, Session: *session})
	if err != nil {
		return err
	}
	if err := checkImportable(path, res); err != nil {
		return err
	}
	send, target, closeSend, err := replaySender(*natsURL, *httpURL, *token, *tenant, res.Session)
	if err != nil {
		return err
	}
	defer closeSend()
	send = failUntilReached(send)

	bar := newProgress(os.Stderr, len(res.Events), "events")
	rp := &replayer{send: send, batch: max(*batchSize, 1), retryFor: *retryFor, attempt: *attempt, progress: bar.set,
		log: cliLog(slog.LevelWarn)}
	st, err := rp.run(ctx, res.Events)
	bar.done()
	if ue := (*unreachableError)(nil); errors.As(err, &ue) && ue.first {
		return fmt.Errorf("nothing answers at %s (%v): start Recall with 'recall up', or point --http (RECALL_URL) or --nats-url at it", telemetry.Redact(target), ue.err)
	}
	if err != nil {
		fmt.Fprintf(stdout, "Replay of %s as session %s to %s stopped: %d published, %d duplicates, %d rejected before it\n",
			path, res.Session, target, st.published, st.duplicates, st.rejected)
		return fmt.Errorf("publishing to %s: %w", target, err)
	}
	printReplay(stdout, path, target, res, st)
	if st.rejected > 0 {
		return fmt.Errorf("%d of %d events were rejected", st.rejected, len(res.Events))
	}
	return nil
}

// importFile imports the Claude Code transcript at path, printing its
// warnings.
func importFile(path string, o importer.Options) (*importer.Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := importer.ClaudeCode(f, o)
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", path, err)
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}
	return res, nil
}

// errNothingToImport is returned for a file with no record replay can
// publish.
var errNothingToImport = errors.New("nothing to import")

// checkImportable returns an error wrapping errNothingToImport, saying what
// the file held instead, when res has no record beyond the session.started
// event the importer adds.
func checkImportable(path string, res *importer.Result) error {
	n := 0
	for kind, c := range res.Counts {
		if kind != "started" {
			n += c
		}
	}
	if n > 0 {
		return nil
	}
	return fmt.Errorf("%w from %s: %d lines read, skipped: %s (replay reads Claude Code transcripts, the .jsonl files under ~/.claude/projects)",
		errNothingToImport, path, res.Records, formatCounts(res.Skipped))
}

// replaySender returns how replay sends a batch — through the NATS ingest
// endpoint when natsURL is set, else to the HTTP edge — and a description
// of where.
func replaySender(natsURL, httpURL, token, tenant, session string) (send func(context.Context, []event.Event) ([]ingestsvc.EventResult, error), target string, closeFn func(), err error) {
	if natsURL == "" {
		client := &http.Client{} // each attempt's context bounds its request
		url := strings.TrimRight(httpURL, "/") + "/v1/events"
		return func(ctx context.Context, batch []event.Event) ([]ingestsvc.EventResult, error) {
			return sendHTTP(ctx, client, url, token, batch)
		}, httpURL, func() {}, nil
	}
	if tenant == "" {
		tenant = ingestsvc.DefaultTenant
	}
	// A tenant's NATS user receives replies only on its own inbox prefix
	// (recall nats-permissions).
	nc, err := dialNATS(natsURL, "recall-replay", nats.CustomInboxPrefix(natsperm.InboxPrefix(tenant)))
	if err != nil {
		return nil, "", nil, err
	}
	subject := events.APISubject(events.VerbIngest, tenant, session)
	return func(ctx context.Context, batch []event.Event) ([]ingestsvc.EventResult, error) {
		return sendNATS(ctx, nc, subject, batch)
	}, natsURL + " (" + subject + ")", nc.Close, nil
}

// printReplay writes what a finished replay published.
func printReplay(stdout io.Writer, path, target string, res *importer.Result, st *replayStats) {
	fmt.Fprintf(stdout, "Replayed %s as session %s to %s\n", path, res.Session, target)
	fmt.Fprintf(stdout, "  records:   %d\n", res.Records)
	fmt.Fprintf(stdout, "  events:    %d (published %d, duplicates %d, rejected %d)\n", len(res.Events), st.published, st.duplicates, st.rejected)
	fmt.Fprintf(stdout, "  imported:  %s\n", formatCounts(res.Counts))
	fmt.Fprintf(stdout, "  skipped:   %s\n", formatCounts(res.Skipped))
	if st.resent > 0 {
		fmt.Fprintf(stdout, "  resent:    %d requests whose attempt failed (no reply in time, unreachable, 503), with the same event ids\n", st.resent)
	}
	if st.retried > 0 {
		fmt.Fprintf(stdout, "  retried:   %d times from an event the ingest could not store in time (503), in order\n", st.retried)
	}
	if st.reordered > 0 {
		fmt.Fprintf(stdout, "  reordered: %d events were stored before an earlier event of their batch (the ingest stored them although the earlier one failed); --batch 1 avoids this\n", st.reordered)
	}
	for _, e := range st.firstErrors {
		fmt.Fprintln(stdout, "  rejected:", e)
	}
}

// reorderFlags moves the FILE argument after the flags, so both
// "replay FILE --session S" and "replay --session S FILE" work.
func reorderFlags(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			flags = append(flags, a)
			if !strings.Contains(a, "=") && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		default:
			pos = append(pos, a)
		}
	}
	return append(flags, pos...)
}

// nextBatch returns the end of the batch starting at start: at most n
// events and about maxBytes of encoded events.
func nextBatch(evs []event.Event, start, n, maxBytes int) int {
	size := 0
	end := start
	for end < len(evs) && end-start < n {
		size += len(evs[end].Data()) + 512
		if size > maxBytes && end > start {
			break
		}
		end++
	}
	return end
}

func sendHTTP(ctx context.Context, client *http.Client, url, token string, batch []event.Event) ([]ingestsvc.EventResult, error) {
	body, err := json.Marshal(batch)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ingestsvc.MediaBatch)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, &unreachableError{err: errors.Unwrap(err)}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errRetryable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: reading reply: %v", errRetryable, err)
	}
	return decodeResults(resp.StatusCode, b)
}

func sendNATS(ctx context.Context, nc *nats.Conn, subject string, batch []event.Event) ([]ingestsvc.EventResult, error) {
	body, err := json.Marshal(batch)
	if err != nil {
		return nil, err
	}
	// A request over the server's max_payload (an event stored by claim
	// check, up to RECALL_INGEST_MAX_EVENT_BYTES) goes as a chunked request.
	m, err := chunked.SendRequest(ctx, nc, subject, nil, body)
	if errors.Is(err, chunked.ErrNoResponders) {
		return nil, &unreachableError{err: fmt.Errorf("no ingest service answers on %s", subject)}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errRetryable, err)
	}
	status := http.StatusAccepted
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		status, _ = strconv.Atoi(code)
	}
	return decodeResults(status, m.Data)
}

// decodeResults reads the per-event results of a reply: a Response (202) or
// a Problem (anything else).
func decodeResults(status int, b []byte) ([]ingestsvc.EventResult, error) {
	if status == http.StatusAccepted {
		var r ingestsvc.Response
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("decoding reply: %w", err)
		}
		return r.Results, nil
	}
	var p events.Problem
	_ = json.Unmarshal(b, &p)
	if len(p.Results) > 0 {
		return p.Results, nil
	}
	if len(p.Errors) > 0 {
		return p.Errors, nil
	}
	err := fmt.Errorf("%d %s: %s", status, http.StatusText(status), strings.TrimSpace(firstNonEmpty(p.Detail, string(b))))
	if status == http.StatusServiceUnavailable || status == http.StatusBadGateway || status == http.StatusGatewayTimeout {
		err = fmt.Errorf("%w: %v", errRetryable, err)
	}
	return nil, err
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func formatCounts(m map[string]int) string {
	if len(m) == 0 {
		return "nothing"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || (m[keys[i]] == m[keys[j]] && keys[i] < keys[j]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
