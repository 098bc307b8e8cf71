package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

func runCompact(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("compact")
	target := addSessionFlags(fs, "session id (required)", "tenant")
	session, tenant, natsURL := target.session, target.tenant, target.natsURL
	asJSON := fs.Bool("json", false, "print the whole reply as JSON")
	trigger := fs.String("trigger", events.TriggerManual, "trigger recorded in the boundary: auto or manual")
	threshold := fs.Int64("threshold", 0, "auto-compact threshold in tokens (0 = the compactor's default, 167,000 for a 200K window)")
	wait := fs.Duration("wait", -1, "longest wait for a running extraction (negative = the compactor's default, 15s)")
	minTokens := fs.Int64("min-tokens", 0, fmt.Sprintf("keep window: keep at least this many tokens of the latest messages verbatim (0 = the compactor's default, %s)", thousands(memory.DefaultKeepMinTokens)))
	minText := fs.Int("min-text-messages", 0, fmt.Sprintf("keep window: and at least this many messages with text (0 = the compactor's default, %d)", memory.DefaultKeepMinTextMessages))
	maxTokens := fs.Int64("max-tokens", 0, fmt.Sprintf("keep window: keep at most this many tokens (0 = the compactor's default, %s)", thousands(memory.DefaultKeepMaxTokens)))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := target.validate(true); err != nil {
		return err
	}
	req := events.CompactRequest{Trigger: *trigger, AutoCompactThreshold: *threshold, MinTokens: *minTokens, MinTextMessages: *minText, MaxTokens: *maxTokens}
	if *wait >= 0 {
		ms := wait.Milliseconds()
		req.WaitTimeoutMS = &ms
	}
	nc, err := dialNATS(*natsURL, "recall-compact")
	if err != nil {
		return err
	}
	defer nc.Close()
	reply, latency, err := requestCompaction(ctx, nc, *tenant, *session, req)
	if err != nil {
		return err
	}
	if reply.Outcome == memory.OutcomeNoSessionMemory {
		if err := checkHasRecords(ctx, nc, *tenant, *session); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reply)
	}
	printCompaction(stdout, *tenant, *session, reply, latency, false)
	printSmallReduction(stdout, reply, req)
	printKept(stdout, reply)
	return nil
}

// noRecordsError is checkHasRecords's error: the session's transcript
// holds nothing.
type noRecordsError struct{ tenant, session, subject string }

func (e *noRecordsError) Error() string {
	return fmt.Sprintf("session %s has no records (tenant %s, nothing on %s): check the id and --tenant, or replay its transcript first",
		e.session, e.tenant, e.subject)
}

// checkHasRecords returns a *noRecordsError when the session's transcript
// subject (in its shard stream, the layout read from the server) holds no
// record (a mistyped or never published session); nil when it has one or
// the transcript cannot be read (the compactor's reply then stands as it
// is).
func checkHasRecords(ctx context.Context, nc *nats.Conn, tenant, session string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil
	}
	layout, err := provision.DiscoverLayout(ctx, js)
	if err != nil {
		return nil
	}
	st, err := js.Stream(ctx, layout.Stream(tenant, session))
	if err != nil {
		return nil
	}
	subject := layout.Subject(tenant, session)
	if _, err := st.GetLastMsgForSubject(ctx, subject); errors.Is(err, jetstream.ErrMsgNotFound) {
		return &noRecordsError{tenant: tenant, session: session, subject: subject}
	}
	return nil
}

// printSmallReduction explains a served compaction that kept most of the
// context: the keep window's minimums keep a short session nearly whole.
func printSmallReduction(w io.Writer, r *events.CompactReply, req events.CompactRequest) {
	if !r.Served || r.TokensBefore <= 0 || r.TokensAfter*10 < r.TokensBefore*8 {
		return // not served, or at least a 20% reduction
	}
	minTokens, minText := req.MinTokens, req.MinTextMessages
	if minTokens <= 0 {
		minTokens = memory.DefaultKeepMinTokens
	}
	if minText <= 0 {
		minText = memory.DefaultKeepMinTextMessages
	}
	fmt.Fprintf(w, "  why so little:  the keep window keeps the latest messages verbatim — at least %s tokens and %d text messages — so a short session barely shrinks; see the effect with --min-tokens 2000 (the compactor's default: RECALL_COMPACTOR_KEEP_MIN_TOKENS)\n",
		thousands(minTokens), minText)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// requestCompaction asks the compactor and returns its reply and the
// round-trip latency.
func requestCompaction(ctx context.Context, nc *nats.Conn, tenant, session string, req events.CompactRequest) (*events.CompactReply, time.Duration, error) {
	body, _ := json.Marshal(req)
	wait := 15 * time.Second
	if req.WaitTimeoutMS != nil {
		wait = time.Duration(*req.WaitTimeoutMS) * time.Millisecond
	}
	// Waiting, plus a full compaction (LLM call) in the worst case.
	rctx, cancel := context.WithTimeout(ctx, wait+150*time.Second)
	defer cancel()
	subject := events.APISubject(events.VerbCompact, tenant, session)
	start := time.Now()
	m, err := chunked.Request(rctx, nc, subject, nil, body)
	latency := time.Since(start)
	if err != nil {
		return nil, 0, fmt.Errorf("requesting compaction on %s (is the compactor running? try 'recall up'): %w", subject, err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return nil, 0, fmt.Errorf("compactor refused (%s): %s", code, m.Header.Get("Nats-Service-Error"))
	}
	var reply events.CompactReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		return nil, 0, fmt.Errorf("decoding the compaction reply: %w", err)
	}
	return &reply, latency, nil
}

// printCompaction writes a human summary of a compaction reply.
func printCompaction(w io.Writer, tenant, session string, r *events.CompactReply, latency time.Duration, listKept bool) {
	served := "not served"
	if r.Served {
		served = "served"
	}
	fmt.Fprintf(w, "Compaction of %s/%s: %s (%s)\n", tenant, session, r.Outcome, served)
	if r.FallbackFrom != "" {
		fmt.Fprintf(w, "  fallback from:  %s\n", r.FallbackFrom)
	}
	if r.Reason != "" {
		fmt.Fprintf(w, "  reason:         %s\n", r.Reason)
	}
	if r.Served {
		span := ""
		if r.KeptCount > 0 {
			span = fmt.Sprintf(" (transcript seq %d–%d)", r.FirstKeptSeq, r.LastSeq)
		}
		fmt.Fprintf(w, "  messages kept:  %d%s\n", r.KeptCount, span)
	}
	fmt.Fprintf(w, "  tokens:         %s → %s (before: last API usage + newer messages; after: summary + kept messages, estimated; threshold %s)\n",
		thousands(r.TokensBefore), thousands(r.TokensAfter), thousands(r.Threshold))
	if r.Summary != nil && len(r.Summary.Content) > 0 {
		trunc := ""
		if r.Truncated {
			trunc = ", sections cut to fit"
		}
		fmt.Fprintf(w, "  summary:        %s tokens%s\n", thousands(memory.EstimateText(r.Summary.Content[0].Text)), trunc)
		if strings.Contains(r.Summary.Content[0].Text, memory.QuoteBegin) {
			fmt.Fprintln(w, "                  the latest user request is outside the kept messages: quoted verbatim in the summary")
		}
	}
	if r.ClearedToolUses > 0 || r.ClearedTokens > 0 {
		fmt.Fprintf(w, "  cleared:        %d tool results, ~%s tokens (context_management)\n", r.ClearedToolUses, thousands(r.ClearedTokens))
	}
	fmt.Fprintf(w, "  waited:         %d ms for a running extraction\n", r.WaitedMS)
	llmNote := ", no LLM call"
	if r.Outcome == memory.OutcomeFullCompact {
		llmNote = ", LLM summary"
	}
	fmt.Fprintf(w, "  latency:        %s round trip (%s in the compactor)%s\n", fmtDuration(latency), fmtDuration(time.Duration(r.DurationUS)*time.Microsecond), llmNote)
	if listKept {
		printKept(w, r)
	}
}

// printKept lists the kept messages, one line each.
func printKept(w io.Writer, r *events.CompactReply) {
	if len(r.Kept) == 0 {
		return
	}
	fmt.Fprintln(w, "  kept messages:")
	for _, e := range r.Kept {
		var m events.Message
		if err := json.Unmarshal(e.Data(), &m); err != nil {
			continue
		}
		seq, _ := e.Extensions()[events.ExtSeq].(string)
		fmt.Fprintf(w, "    #%-6s %-9s %s\n", seq, m.Role, describeMessage(&m))
	}
}

// describeMessage is a one-line description of a message.
func describeMessage(m *events.Message) string {
	var parts []string
	for _, b := range m.Content {
		switch b.Type {
		case events.BlockText:
			parts = append(parts, fmt.Sprintf("%q", clip(b.Text, 60)))
		case events.BlockThinking:
			parts = append(parts, "(thinking)")
		case events.BlockToolUse:
			parts = append(parts, "→ "+b.Name)
		case events.BlockToolResult:
			label := "← result"
			if b.IsError {
				label = "← error"
			}
			parts = append(parts, fmt.Sprintf("%s (%s tokens)", label, thousands(memory.EstimateContent(b.Content))))
		default:
			parts = append(parts, "("+b.Type+")")
		}
	}
	return strings.Join(parts, " ")
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// thousands formats n with comma separators.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}
