package triggersvc

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

type metrics struct {
	meter     metric.Meter
	decisions metric.Int64Counter
	records   metric.Int64Counter
	rebuilds  metric.Int64Counter
	manual    metric.Int64Counter
}

// newMetrics creates the trigger's instruments on the global meter:
// recall_trigger_decisions_total{reason}, recall_trigger_records_total,
// recall_trigger_rebuilds_total and recall_trigger_manual_total{outcome}.
// The gauges are registered by observe.
func newMetrics() *metrics {
	m := otel.Meter("recall/trigger")
	ms := metrics{meter: m}
	ms.decisions, _ = m.Int64Counter("recall_trigger_decisions", metric.WithDescription("extraction decisions by reason (threshold, manual, gated = not published because session_memory is off)"))
	ms.records, _ = m.Int64Counter("recall_trigger_records", metric.WithDescription("transcript records processed"))
	ms.rebuilds, _ = m.Int64Counter("recall_trigger_rebuilds", metric.WithDescription("session states rebuilt from the transcript"))
	ms.manual, _ = m.Int64Counter("recall_trigger_manual", metric.WithDescription("manual extractions by outcome"))
	return &ms
}

// observe registers the gauges recall_trigger_sessions,
// recall_trigger_session_bytes and recall_trigger_consumer_lag for t. The
// caller unregisters them when t stops, so a stopped trigger is not kept
// alive by the meter.
func (ms *metrics) observe(t *Trigger) (metric.Registration, error) {
	m := ms.meter
	sessions, _ := m.Int64ObservableGauge("recall_trigger_sessions", metric.WithDescription("sessions held in memory"))
	bytes, _ := m.Int64ObservableGauge("recall_trigger_session_bytes", metric.WithDescription("estimated bytes per session in memory"))
	lag, _ := m.Int64ObservableGauge("recall_trigger_consumer_lag", metric.WithDescription("transcript records not yet delivered to the trigger"))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := t.Stats()
		o.ObserveInt64(sessions, s.Sessions)
		o.ObserveInt64(bytes, s.BytesPerSession)
		o.ObserveInt64(lag, s.Lag)
		return nil
	}, sessions, bytes, lag)
}

func reasonAttr(r string) metric.AddOption {
	return metric.WithAttributes(attribute.String("reason", r))
}
