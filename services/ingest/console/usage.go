package console

import (
	"encoding/json"

	"github.com/recallhq/recall/pkg/events"
)

// spent is what the extraction of a kept revision cost: its LLM tokens
// and, when the price table knows the model, their cost in USD.
type spent struct {
	Usage events.TokenUsage `json:"usage"`
	Model string            `json:"model,omitempty"`
	// CostUSD is nil when the model has no price (see internal/llm/prices).
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// From says where the numbers come from: "event" — the
	// extraction.completed notification of this revision, this one
	// extraction exactly; "difference" — the running totals of this kept
	// revision and the kept one before, so Extractions extractions (more
	// than one when revisions between them were not kept).
	From        string `json:"from"`
	Extractions int    `json:"extractions"`
}

// Sources of spent.From.
const (
	fromEvent      = "event"
	fromDifference = "difference"
)

// priceHistory sets what each kept revision's extraction spent: from its
// extraction.completed notification when the timeline still holds it,
// else from the difference of the running totals with the kept revision
// before (none for the oldest kept revision without its notification).
// It prices the memory's running total too.
func (c *Console) priceHistory(p *sessionPage) {
	done := map[uint64]events.ExtractionCompleted{}
	for _, h := range p.Timeline {
		var ev events.ExtractionCompleted
		if h.Kind == events.KindExtractionCompleted && json.Unmarshal(h.Data, &ev) == nil && !ev.Skipped && ev.Revision > 0 {
			done[ev.Revision] = ev
		}
	}
	for i := range p.History {
		h := &p.History[i]
		if ev, ok := done[h.Revision]; ok {
			h.Spent = &spent{Usage: ev.Usage, Model: ev.Model, From: fromEvent, Extractions: 1}
		} else if i > 0 && h.Extractions > p.History[i-1].Extractions {
			prev := p.History[i-1].Usage
			h.Spent = &spent{Model: h.Model, From: fromDifference, Extractions: h.Extractions - p.History[i-1].Extractions, Usage: events.TokenUsage{
				InputTokens: h.Usage.InputTokens - prev.InputTokens, OutputTokens: h.Usage.OutputTokens - prev.OutputTokens,
				CacheReadTokens: h.Usage.CacheReadTokens - prev.CacheReadTokens, CacheCreationTokens: h.Usage.CacheCreationTokens - prev.CacheCreationTokens}}
		}
		if h.Spent != nil {
			h.Spent.CostUSD = c.cost(h.Spent.Model, h.Spent.Usage)
		}
	}
	if p.Memory != nil {
		p.Memory.CostUSD = c.cost(p.Memory.Model, p.Memory.Usage)
	}
}

// cost prices usage for model the way the indexer does: input, cache
// reads and cache writes at the input price, output at the output price
// (an upper bound where the provider discounts cached input). Nil when
// the table has no price for model.
func (c *Console) cost(model string, u events.TokenUsage) *float64 {
	usd, ok := c.prices.Cost(model, u.InputTokens+u.CacheReadTokens+u.CacheCreationTokens, u.OutputTokens)
	if !ok || model == "" {
		return nil
	}
	return &usd
}
