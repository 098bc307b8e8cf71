package natsce

import (
	"context"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// HeaderCarrier adapts nats.Header to OpenTelemetry's TextMapCarrier. Get is
// case-insensitive, so "Traceparent", "traceparent" and "TRACEPARENT" all
// work; Set writes lower-case W3C names.
type HeaderCarrier nats.Header

// Get returns the first value of key, matched case-insensitively.
func (c HeaderCarrier) Get(key string) string { return headerGet(nats.Header(c), key) }

// Set replaces every spelling of key by one lower-case entry.
func (c HeaderCarrier) Set(key, value string) {
	for k := range c {
		if strings.EqualFold(k, key) {
			delete(c, k)
		}
	}
	c[strings.ToLower(key)] = []string{value}
}

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes the span context of ctx into h with the global propagator.
func Inject(ctx context.Context, h nats.Header) {
	otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(h))
}

// Extract returns ctx with the remote span context found in h: the W3C
// "traceparent" header, or else the CloudEvents distributed-tracing extension
// ("ce-traceparent").
func Extract(ctx context.Context, h nats.Header) context.Context {
	p := otel.GetTextMapPropagator()
	if headerGet(h, "traceparent") != "" {
		return p.Extract(ctx, HeaderCarrier(h))
	}
	if tp := headerGet(h, HeaderPrefix+"traceparent"); tp != "" {
		c := propagation.MapCarrier{"traceparent": tp}
		if ts := headerGet(h, HeaderPrefix+"tracestate"); ts != "" {
			c["tracestate"] = ts
		}
		return p.Extract(ctx, c)
	}
	return ctx
}

// ExtractEvent returns ctx with the span context carried by the event's
// distributed-tracing extension, if any.
func ExtractEvent(ctx context.Context, e *event.Event) context.Context {
	ext := e.Extensions()
	tp, _ := ext["traceparent"].(string)
	if tp == "" {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": tp}
	if ts, _ := ext["tracestate"].(string); ts != "" {
		c["tracestate"] = ts
	}
	return otel.GetTextMapPropagator().Extract(ctx, c)
}
