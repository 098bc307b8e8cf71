// Package telemetry sets up Recall's logs, traces and metrics: log/slog JSON
// with trace and span ids, an OpenTelemetry tracer provider (OTLP over HTTP
// when an endpoint is configured), W3C trace-context propagation, and a meter
// provider exported for Prometheus.
package telemetry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
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
	LogLevel     string `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat    string `envconfig:"LOG_FORMAT" default:"json" desc:"json or text"`
	OTLPEndpoint string `envconfig:"OTLP_ENDPOINT" desc:"OTLP/HTTP traces endpoint, e.g. http://jaeger:4318; empty disables export"`
	TraceSample  float64 `envconfig:"TRACE_SAMPLE" default:"1" desc:"fraction of new traces sampled (parent decisions are honoured)"`
}

// NewLogger returns a slog logger writing to w that adds trace_id and span_id
// from the context of each record.
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
	return slog.New(traceHandler{h})
}

type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler { return traceHandler{h.Handler.WithAttrs(as)} }
func (h traceHandler) WithGroup(n string) slog.Handler      { return traceHandler{h.Handler.WithGroup(n)} }

// Telemetry owns the providers installed by Setup.
type Telemetry struct {
	tp *sdktrace.TracerProvider
	mp *sdkmetric.MeterProvider
}

// Setup installs global tracer and meter providers and the W3C propagator for
// service. Call Shutdown last, after the service drained, to flush.
func Setup(ctx context.Context, c Config, service string) (*Telemetry, error) {
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("recall-"+service)))
	if err != nil {
		res = resource.Default()
	}
	topts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.TraceSample))),
	}
	if c.OTLPEndpoint != "" {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimRight(c.OTLPEndpoint, "/")+"/v1/traces"))
		if err != nil {
			return nil, err
		}
		topts = append(topts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(topts...)
	reg := prometheus.NewRegistry()
	pexp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(pexp))
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

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
}

// DefaultLogger is the logger of a process started from main.
func DefaultLogger(c Config) *slog.Logger { return NewLogger(os.Stderr, c) }
