package tenantcfg

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/pkg/events"
)

// Ceilings are the operator's bounds on what a tenant may set: a
// configuration that passes one of them is refused (422, naming the field
// and the ceiling) by the API and by `recall tenant validate`, which read
// them from the same variables (RECALL_TENANT_MAX_*). Services that apply
// a bounded value cap it again at use with the same ceiling (a value
// written around the API, or before the ceiling was lowered, is capped,
// not trusted). A zero field takes its default.
//
// Every tenant-settable amount that buys model tokens or memory has one:
// the query budget (query_max_budget_tokens), the number of custom memory
// types (each a section of every long-term memory prompt) and the size of
// the configuration itself (template and prompt are sent with every
// extraction). The extraction thresholds are floors of the tenant's own
// spending, not ceilings: docs/tenant-config.md says why they need none.
type Ceilings struct {
	QueryBudgetTokens int64 `envconfig:"QUERY_BUDGET_TOKENS" default:"200000" desc:"most query_max_budget_tokens a tenant may set (session tokens one question or resolve request sends to the model); a larger value is refused"`
	CustomMemoryTypes int   `envconfig:"CUSTOM_MEMORY_TYPES" default:"32" desc:"most custom_memory_types a tenant may declare; more are refused"`
	ConfigBytes       int   `envconfig:"CONFIG_BYTES" default:"262144" desc:"largest tenant configuration, bytes of JSON (at most 524288, half the store's 1 MiB value limit); a larger one is refused"`
}

// LogValue logs the ceilings under their variables' names.
func (l Ceilings) LogValue() slog.Value { return envconf.LogValue(l) }

// MaxConfigBytes is the most Ceilings.ConfigBytes may be: half the
// RECALL_CONFIG bucket's value limit (the server's max_payload, 1 MiB by
// default), so a configuration and what Write adds to it always fit.
const MaxConfigBytes = 512 << 10

// DefaultCeilings are the ceilings of an operator who set none.
var DefaultCeilings = Ceilings{QueryBudgetTokens: 200000, CustomMemoryTypes: 32, ConfigBytes: 256 << 10}

// unbounded checks no ceiling: what a watcher decodes was checked when it
// was written, and is capped at use.
var unbounded = Ceilings{QueryBudgetTokens: math.MaxInt64, CustomMemoryTypes: math.MaxInt, ConfigBytes: math.MaxInt}

// Resolved returns l with zero fields set to their defaults and
// ConfigBytes at most MaxConfigBytes.
func (l Ceilings) Resolved() Ceilings {
	if l.QueryBudgetTokens <= 0 {
		l.QueryBudgetTokens = DefaultCeilings.QueryBudgetTokens
	}
	if l.CustomMemoryTypes <= 0 {
		l.CustomMemoryTypes = DefaultCeilings.CustomMemoryTypes
	}
	if l.ConfigBytes <= 0 {
		l.ConfigBytes = DefaultCeilings.ConfigBytes
	}
	if l != unbounded {
		l.ConfigBytes = min(l.ConfigBytes, MaxConfigBytes)
	}
	return l
}

// check lists the fields of c over l.
func (l Ceilings) check(c events.TenantConfig) []events.ConfigFieldError {
	l = l.Resolved()
	var errs []events.ConfigFieldError
	if c.QueryMaxBudgetTokens > l.QueryBudgetTokens {
		errs = append(errs, events.ConfigFieldError{Field: "query_max_budget_tokens",
			Error: fmt.Sprintf("must be at most %d, the operator's ceiling (RECALL_TENANT_MAX_QUERY_BUDGET_TOKENS)", l.QueryBudgetTokens)})
	}
	if n := len(c.CustomMemoryTypes); n > l.CustomMemoryTypes {
		errs = append(errs, events.ConfigFieldError{Field: "custom_memory_types",
			Error: fmt.Sprintf("%d types, at most %d allowed (RECALL_TENANT_MAX_CUSTOM_MEMORY_TYPES)", n, l.CustomMemoryTypes)})
	}
	if l.ConfigBytes < math.MaxInt {
		if b, _ := json.Marshal(c); len(b) > l.ConfigBytes {
			errs = append(errs, sizeError(len(b), l.ConfigBytes))
		}
	}
	return errs
}

// sizeError is the error of a configuration of n bytes over limit.
func sizeError(n, limit int) events.ConfigFieldError {
	return events.ConfigFieldError{Field: "", Error: fmt.Sprintf("the configuration is %d bytes, at most %d allowed (RECALL_TENANT_MAX_CONFIG_BYTES)", n, limit)}
}

// Parse is the package's Parse under l: a document over l.ConfigBytes is
// refused before it is decoded.
func (l Ceilings) Parse(doc []byte) (events.TenantConfig, error) {
	if r := l.Resolved(); len(doc) > r.ConfigBytes {
		return events.TenantConfig{}, invalid([]events.ConfigFieldError{sizeError(len(doc), r.ConfigBytes)})
	}
	c, err := parse(doc)
	if err != nil {
		return c, err
	}
	return c, l.Validate(c)
}

// Validate is the package's Validate under l.
func (l Ceilings) Validate(c events.TenantConfig) error {
	if err := validate(c); err != nil {
		return err
	}
	return invalid(l.check(c))
}

// Write is the package's Write under l.
func (l Ceilings) Write(ctx context.Context, kv jetstream.KeyValue, tenant string, c events.TenantConfig, meta events.ConfigMeta, pre Precondition) (uint64, error) {
	if err := l.Validate(c); err != nil {
		return 0, err
	}
	return write(ctx, kv, tenant, c, meta, pre)
}
