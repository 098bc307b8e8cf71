package microapi

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// rejected counts refusals by an Admission, created on first use so that
// it reports to the meter provider the service installed.
var rejected = sync.OnceValue(func() metric.Int64Counter {
	c, _ := otel.Meter("recall/microapi").Int64Counter("recall_admission_rejected",
		metric.WithDescription("requests refused by admission (over a tenant's share: code 429; the service full: 503), by tenant and endpoint"))
	return c
})

// CountRejected counts a refusal of aerr's code for key (a tenant) at
// endpoint in recall_admission_rejected_total{tenant,endpoint,code}. Every
// admission refusal — NATS endpoints (Later.Go) and the HTTP edge — is
// counted here.
func CountRejected(ctx context.Context, endpoint, key string, aerr *Error) {
	if aerr == nil {
		return
	}
	rejected().Add(ctx, 1, metric.WithAttributes(attribute.String("tenant", key),
		attribute.String("endpoint", endpoint), attribute.String("code", strconv.Itoa(aerr.Code))))
}

// RetryAfter is d as the value of a Retry-After header: whole seconds,
// rounded up, at least 1.
func RetryAfter(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}
