// Package telemetrytest records spans and metrics in memory for tests of code
// that uses the global OpenTelemetry API (otel.Tracer, otel.Meter).
//
// The OTel globals delegate every tracer and meter obtained before the first
// provider is installed to that first provider, for the life of the process.
// So this package installs one process-wide tracer provider and one meter
// provider the first time it is used, and each Recorder or Metrics only
// attaches to them for the duration of one test. Tests that use this package
// must not call telemetry.Setup in the same test binary, and tests that run
// in parallel see each other's spans and measurements (filter spans by trace
// id with Recorder.Trace).
package telemetrytest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var (
	once   sync.Once
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
)

func install() {
	once.Do(func() {
		tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
		reader = sdkmetric.NewManualReader()
		mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	})
	// Re-installing is harmless and undoes a global swapped by other code.
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
}

// Recorder holds the spans ended while its test runs.
type Recorder struct {
	rec *tracetest.SpanRecorder
}

// NewRecorder installs the in-memory tracer provider (sampling every span)
// and the W3C trace-context + baggage propagator as OTel globals, and
// records the spans ended until t ends. It is safe to call from several
// tests; each Recorder sees only spans that end after it was created.
func NewRecorder(t testing.TB) *Recorder {
	t.Helper()
	install()
	r := &Recorder{rec: tracetest.NewSpanRecorder()}
	tp.RegisterSpanProcessor(r.rec)
	t.Cleanup(func() { tp.UnregisterSpanProcessor(r.rec) })
	return r
}

// Ended returns the spans ended so far, in the order they ended.
func (r *Recorder) Ended() []sdktrace.ReadOnlySpan { return r.rec.Ended() }

// Named returns the ended spans called name.
func (r *Recorder) Named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Trace returns the ended spans of one trace.
func (r *Recorder) Trace(id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.rec.Ended() {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// WaitFor polls until at least n spans called name have ended and returns
// them; it fails the test after timeout. Spans of other services end
// asynchronously, so tests wait instead of sleeping.
func (r *Recorder) WaitFor(t testing.TB, name string, n int, timeout time.Duration) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := r.Named(name)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %d span(s) %q, have %d; ended: %v", timeout, n, name, len(got), Names(r.Ended()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Names lists the names of spans, for failure messages.
func Names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

// Attr returns the value of the attribute key of span s.
func Attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// ParentOf returns the ended span among spans that is s's parent.
func ParentOf(s sdktrace.ReadOnlySpan, spans []sdktrace.ReadOnlySpan) (sdktrace.ReadOnlySpan, bool) {
	if !s.Parent().IsValid() {
		return nil, false
	}
	i := slices.IndexFunc(spans, func(p sdktrace.ReadOnlySpan) bool {
		return p.SpanContext().SpanID() == s.Parent().SpanID() && p.SpanContext().TraceID() == s.Parent().TraceID()
	})
	if i < 0 {
		return nil, false
	}
	return spans[i], true
}

// LinkedTo reports whether s has a link to a span of trace id.
func LinkedTo(s sdktrace.ReadOnlySpan, id trace.TraceID) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == id {
			return true
		}
	}
	return false
}

// Metrics reads the process-wide in-memory meter provider. Measurements are
// cumulative over the process; Value reports the change since NewMetrics.
type Metrics struct {
	baseline metricdata.ResourceMetrics
}

// NewMetrics installs the in-memory meter provider as the global one and
// takes a baseline of every instrument.
func NewMetrics(t testing.TB) *Metrics {
	t.Helper()
	install()
	m := &Metrics{}
	if err := reader.Collect(context.Background(), &m.baseline); err != nil {
		t.Fatalf("collecting metrics: %v", err)
	}
	return m
}

// Collect returns the current cumulative measurements of every instrument.
func (m *Metrics) Collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collecting metrics: %v", err)
	}
	return rm
}

// Value returns how much the instrument called name changed since
// NewMetrics, over the data points whose attributes include attrs: the sum
// of a counter or up-down counter, the last value of a gauge (not a
// change), or the count of a histogram's observations. ok is false when no
// data point matches.
func (m *Metrics) Value(t testing.TB, name string, attrs ...attribute.KeyValue) (v float64, ok bool) {
	t.Helper()
	now := m.Collect(t)
	cur, ok := value(now, name, attrs)
	if !ok {
		return 0, false
	}
	if isGauge(now, name) {
		return cur, true
	}
	base, _ := value(m.baseline, name, attrs)
	return cur - base, true
}

// WaitForValue polls until Value(name, attrs) is at least want and fails
// the test after timeout.
func (m *Metrics) WaitForValue(t testing.TB, name string, want float64, timeout time.Duration, attrs ...attribute.KeyValue) float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, ok := m.Value(t, name, attrs...)
		if ok && v >= want {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s%v >= %v, have %v (found %v)", timeout, name, attrs, want, v, ok)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func find(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name == name {
				return mt, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

func isGauge(rm metricdata.ResourceMetrics, name string) bool {
	mt, _ := find(rm, name)
	switch mt.Data.(type) {
	case metricdata.Gauge[int64], metricdata.Gauge[float64]:
		return true
	}
	return false
}

func matches(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func value(rm metricdata.ResourceMetrics, name string, attrs []attribute.KeyValue) (float64, bool) {
	mt, ok := find(rm, name)
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
	add := func(set attribute.Set, v float64) {
		if matches(set, attrs) {
			sum += v
			found = true
		}
	}
	switch d := mt.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, float64(p.Value))
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, p.Value)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, float64(p.Value))
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, p.Value)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, float64(p.Count))
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, float64(p.Count))
		}
	default:
		panic(fmt.Sprintf("telemetrytest: unsupported metric data %T for %s", d, name))
	}
	return sum, found
}
