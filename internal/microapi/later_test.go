package microapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
)

// TestLaterStatsInSRVStats answers from goroutines after the handler
// returned — one success, two refusals — and reads $SRV.STATS: micro's own
// counters see three requests and no error, the endpoint's data counts the
// answers as they were sent. Each answer is counted before it is sent, so
// a client holding all three answers finds them counted; micro counts a
// request when its handler returns, which may be after the answer arrived,
// so its counters are polled.
func TestLaterStatsInSRVStats(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	later := microapi.NewLater(context.Background(), nc, slog.Default(), 0)
	svc, err := micro.AddService(nc, micro.Config{Name: "later-test", Version: "1.0.0", StatsHandler: later.Stats})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	err = svc.AddEndpoint("work", micro.HandlerFunc(func(req micro.Request) {
		body := string(req.Data())
		later.Go(req, "work", nil, "", func(context.Context) (any, *microapi.Error) {
			time.Sleep(20 * time.Millisecond) // the work's own duration, measured below
			if body == "bad" {
				return nil, microapi.Fail(422, "cannot do %q", body)
			}
			return map[string]string{"ok": body}, nil
		})
	}), micro.WithEndpointSubject("later.work"))
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"good", "bad", "bad"} {
		m, err := nc.Request("later.work", []byte(body), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := m.Header.Get(micro.ErrorCodeHeader); (code == "422") != (body == "bad") {
			t.Fatalf("%s answered with code %q", body, code)
		}
	}
	var e endpointStats
	testpoll.Until(t, 5*time.Second, "micro to count three requests", func() bool {
		e = readStats(t, nc, "later-test")
		return e.Requests >= 3
	})
	if e.Requests != 3 || e.Errors != 0 {
		t.Fatalf("micro's own counters: %d requests, %d errors (want 3, 0: it cannot see later answers)", e.Requests, e.Errors)
	}
	l := e.Data.Later
	if l.NumRequests != 3 || l.NumErrors != 2 || l.InFlight != 0 || !strings.HasPrefix(l.LastError, "422:") {
		t.Fatalf("answered_later: %+v", l)
	}
	if l.AverageProcessingTime < 20*time.Millisecond {
		t.Fatalf("average processing time %s, want at least the 20ms each answer waited", l.AverageProcessingTime)
	}
}

// endpointStats is one endpoint of a $SRV.STATS reply.
type endpointStats struct {
	Name     string `json:"name"`
	Requests int    `json:"num_requests"`
	Errors   int    `json:"num_errors"`
	Data     struct {
		Later microapi.LaterStats `json:"answered_later"`
	} `json:"data"`
}

// readStats reads the one endpoint of service's $SRV.STATS.
func readStats(t *testing.T, nc *nats.Conn, service string) endpointStats {
	t.Helper()
	m, err := nc.Request("$SRV.STATS."+service, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats struct {
		Endpoints []endpointStats `json:"endpoints"`
	}
	if err := json.Unmarshal(m.Data, &stats); err != nil {
		t.Fatalf("%v: %s", err, m.Data)
	}
	if len(stats.Endpoints) != 1 {
		t.Fatalf("endpoints: %s", m.Data)
	}
	return stats.Endpoints[0]
}
