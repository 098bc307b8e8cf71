// Package telemetry sets up Recall's logs, traces and metrics: log/slog JSON
// with trace and span ids and secrets masked (see NewRedactHandler), an
// OpenTelemetry tracer provider (OTLP over HTTP when an endpoint is
// configured), W3C trace-context propagation, and a meter provider exported
// for Prometheus at /metrics and, when configured, pushed over OTLP/HTTP.
//
// Only this package (and its test helper telemetrytest) imports the
// OpenTelemetry SDK; services use the global API: otel.Tracer("recall/<svc>"),
// otel.Meter("recall/<svc>").
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Config is the telemetry part of every service's configuration.
type Config struct {
	LogLevel     string  `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat    string  `envconfig:"LOG_FORMAT" default:"json" desc:"json or text"`
	OTLPEndpoint string  `envconfig:"OTLP_ENDPOINT" desc:"OTLP/HTTP traces endpoint, e.g. http://jaeger:4318; empty disables export"`
	TraceSample  float64 `envconfig:"TRACE_SAMPLE" default:"1" desc:"fraction of new traces sampled (parent decisions are honoured)"`
	// OTLPMetrics pushes metrics to OTLPEndpoint/v1/metrics besides serving
	// them at /metrics.
	OTLPMetrics     bool          `envconfig:"OTLP_METRICS" default:"false" desc:"also push metrics over OTLP/HTTP to RECALL_OTLP_ENDPOINT (/metrics is always served)"`
	MetricsInterval time.Duration `envconfig:"METRICS_INTERVAL" default:"30s" desc:"interval of OTLP metric pushes"`
	// RuntimeMetrics adds the Go runtime (go_*) and process (process_*)
	// collectors to /metrics.
	RuntimeMetrics bool `envconfig:"RUNTIME_METRICS" default:"true" desc:"expose Go runtime and process metrics (go_*, process_*) at /metrics"`
}

// NewLogger returns a slog logger writing to w that adds trace_id and span_id
// from the context of each record and masks secrets (NewRedactHandler). An
// unknown level means info; a format other than "text" means JSON.
func NewLogger(w io.Writer, c Config) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if strings.EqualFold(c.LogFormat, "text") {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(traceHandler{NewRedactHandler(h)})
}

type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as)}
}
func (h traceHandler) WithGroup(n string) slog.Handler { return traceHandler{h.Handler.WithGroup(n)} }

// Telemetry owns the providers installed by Setup.
type Telemetry struct {
	tp *sdktrace.TracerProvider
	mp *sdkmetric.MeterProvider
}

// Setup installs global tracer and meter providers and the W3C propagator for
// service (resource service.name "recall-<service>"), and makes
// MetricsHandler serve the new meter provider. Traces are exported over
// OTLP/HTTP to c.OTLPEndpoint+"/v1/traces" when the endpoint is set; metrics
// are pushed to c.OTLPEndpoint+"/v1/metrics" when c.OTLPMetrics is set too.
// The exporters connect lazily: an unreachable collector does not fail
// Setup, spans are dropped after retries. Call Shutdown last, after the
// service drained, to flush.
func Setup(ctx context.Context, c Config, service string) (*Telemetry, error) {
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("recall-"+service)))
	if err != nil {
		res = resource.Default()
	}
	topts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.TraceSample))),
	}
	endpoint := strings.TrimRight(c.OTLPEndpoint, "/")
	if endpoint != "" {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
		if err != nil {
			return nil, fmt.Errorf("creating OTLP trace exporter: %w", err)
		}
		topts = append(topts, sdktrace.WithBatcher(exp))
	}
	reg := prometheus.NewRegistry()
	if c.RuntimeMetrics {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	pexp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("creating Prometheus exporter: %w", err)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(pexp)}
	if endpoint != "" && c.OTLPMetrics {
		mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(endpoint+"/v1/metrics"))
		if err != nil {
			return nil, fmt.Errorf("creating OTLP metric exporter: %w", err)
		}
		interval := c.MetricsInterval
		if interval <= 0 {
			interval = 30 * time.Second
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(interval))))
	}
	tp := sdktrace.NewTracerProvider(topts...)
	mp := sdkmetric.NewMeterProvider(mopts...)
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	currentRegistry.Store(reg)
	return &Telemetry{tp: tp, mp: mp}, nil
}

var currentRegistry atomic.Pointer[prometheus.Registry]

// MetricsHandler serves the Prometheus exposition of the metrics of the
// meter provider the last Setup installed (empty before Setup).
func MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg := currentRegistry.Load()
		if reg == nil {
			reg = prometheus.NewRegistry()
		}
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
}

// Shutdown flushes pending spans and metrics and stops the providers; ctx
// bounds the flush.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
}

// DefaultLogger is the logger of a process started from main.
func DefaultLogger(c Config) *slog.Logger { return NewLogger(os.Stderr, c) }
