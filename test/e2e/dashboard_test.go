package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/telemetry/telemetrytest"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// dashboard is the part of a Grafana dashboard the check reads.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos *struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

var (
	metricRE = regexp.MustCompile(`\brecall_[a-z0-9_]+`)
	ruleRE   = regexp.MustCompile(`\brecall:[a-z0-9_:]+`)
	recordRE = regexp.MustCompile(`(?m)^\s*-?\s*record:\s*(\S+)\s*$`)
)

// TestDashboardQueriesRecallMetrics runs the pipeline once (ingest with a
// rejection, a trigger decision, an extraction, a compaction) and checks
// that every Recall metric deploy/grafana/recall-dashboard.json queries is
// one the services register — in its Prometheus spelling (_total, _seconds,
// _bucket/_count/_sum) — and every recording rule it uses is defined in
// deploy/prometheus/recall-rules.yml.
func TestDashboardQueriesRecallMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana/recall-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("the dashboard needs a title, a uid and panels")
	}
	metrics, rules := map[string]bool{}, map[string]bool{}
	for _, p := range d.Panels {
		if p.Title == "" || p.GridPos == nil || (p.Type != "row" && len(p.Targets) == 0) {
			t.Errorf("panel %q: needs a title, a grid position and (unless a row) queries", p.Title)
		}
		for _, q := range p.Targets {
			for _, m := range metricRE.FindAllString(q.Expr, -1) {
				metrics[m] = true
			}
			for _, r := range ruleRE.FindAllString(q.Expr, -1) {
				rules[r] = true
			}
		}
	}
	checkRules(t, rules)

	m := telemetrytest.NewMetrics(t)
	p, srv := startPipeline(t)
	nc, _ := srv.Connect(t)
	completed, err := nc.SubscribeSync(events.EventsSubject(events.KindExtractionCompleted, "default", "dash"))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("Please make the exporter retry on timeouts. ", 20)
	batch := []map[string]any{
		message("dash", "u1", events.RoleUser, "", events.Block{Type: events.BlockText, Text: long}),
		message("dash", "a1", events.RoleAssistant, "end_turn", events.Block{Type: events.BlockText, Text: "Done: the exporter retries."}),
	}
	post(t, p.httpURL+"/v1/events", "application/cloudevents-batch+json", batch, http.StatusAccepted)
	post(t, p.httpURL+"/v1/events", "application/cloudevents+json", map[string]any{"specversion": "1.0"}, http.StatusBadRequest)
	if _, err := completed.NextMsg(30 * time.Second); err != nil {
		t.Fatalf("no extraction completed: %v", err)
	}
	post(t, p.httpURL+"/v1/sessions/dash/compact", "application/json", map[string]any{}, http.StatusOK)

	registered, polled := map[string]bool{}, false
	defer func() {
		if !polled { // the poll timed out: say what is missing
			t.Logf("the dashboard queries metrics no service registers: %v\nregistered: %v", unknownMetrics(metrics, registered), slices.Sorted(maps.Keys(registered)))
		}
	}()
	testpoll.Until(t, 10*time.Second, "every metric the dashboard queries registered", func() bool {
		for _, sm := range m.Collect(t).ScopeMetrics {
			for _, mm := range sm.Metrics {
				registered[mm.Name] = true
			}
		}
		return len(unknownMetrics(metrics, registered)) == 0
	})
	polled = true
}

// unknownMetrics returns the Prometheus metric names none of whose OTel
// spellings is registered.
func unknownMetrics(prom, registered map[string]bool) []string {
	var out []string
	for name := range prom {
		base := name
		for _, suf := range []string{"_bucket", "_count", "_sum"} {
			base = strings.TrimSuffix(base, suf)
		}
		cands := []string{base, strings.TrimSuffix(base, "_total"), strings.TrimSuffix(base, "_seconds")}
		found := false
		for _, c := range cands {
			found = found || registered[c]
		}
		if !found {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func checkRules(t *testing.T, used map[string]bool) {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/prometheus/recall-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	// tools/deploycheck validates the file's structure; the names are
	// enough here.
	defined := map[string]bool{}
	for _, m := range recordRE.FindAllStringSubmatch(string(raw), -1) {
		defined[m[1]] = true
	}
	for r := range used {
		if !defined[r] {
			t.Errorf("the dashboard uses the recording rule %s, which recall-rules.yml does not define", r)
		}
	}
}

func post(t *testing.T, url, contentType string, body any, want int) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, contentType, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("POST %s answered %d, want %d: %s", url, resp.StatusCode, want, rb)
	}
}
