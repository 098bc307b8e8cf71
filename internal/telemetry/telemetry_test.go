package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/recallhq/recall/internal/telemetry"
)

// collector is an OTLP/HTTP receiver that keeps what it is sent.
type collector struct {
	mu     sync.Mutex
	bodies map[string][][]byte // by path
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	if c.bodies == nil {
		c.bodies = map[string][][]byte{}
	}
	c.bodies[r.URL.Path] = append(c.bodies[r.URL.Path], b)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (c *collector) received(path string) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bodies[path]
}

func TestSetupExportsOTLPAndPrometheus(t *testing.T) {
	var col collector
	srv := httptest.NewServer(&col)
	defer srv.Close()

	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, telemetry.Config{
		OTLPEndpoint:    srv.URL + "/",
		OTLPMetrics:     true,
		MetricsInterval: time.Hour, // only the flush at Shutdown pushes
		TraceSample:     1,
		RuntimeMetrics:  true,
	}, "test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("recall/test").Start(ctx, "test.operation")
	traceID := span.SpanContext().TraceID()
	span.End()
	counter, err := otel.Meter("recall/test").Int64Counter("recall_test_things")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(ctx, 3)

	// /metrics serves the OTel instruments and the runtime collectors.
	rec := httptest.NewRecorder()
	telemetry.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{"recall_test_things_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if err := tel.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	traces := col.received("/v1/traces")
	if len(traces) == 0 {
		t.Fatal("no OTLP trace export received at /v1/traces")
	}
	found := false
	for _, b := range traces {
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("decoding trace export: %v", err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if s.Name == "test.operation" && bytes.Equal(s.TraceId, traceID[:]) {
						found = true
					}
				}
			}
		}
	}
	if !found {
		t.Error("exported traces lack span test.operation")
	}
	if len(col.received("/v1/metrics")) == 0 {
		t.Error("no OTLP metric export received at /v1/metrics")
	}
}

func TestSetupWithoutEndpointExportsNothing(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{TraceSample: 1}, "test")
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	telemetry.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(rec.Body.String(), "go_goroutines") {
		t.Error("runtime metrics served although RuntimeMetrics is false")
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
