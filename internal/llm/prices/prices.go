// Package prices is Recall's table of model list prices, in USD per
// million input and output tokens, and the cost of a model call by it. The
// indexer prices its indexing and questions with it, the console the
// extractions of a session's memory; both read the same custom entries
// from RECALL_INDEX_PRICES (Parse), so they agree. It is a table, not a
// bill: prices change, providers discount cached input, and a model
// missing from the table has no price (Cost reports ok == false), never a
// guessed one.
package prices

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Price is USD per million tokens.
type Price struct {
	In  float64 `json:"in"`
	Out float64 `json:"out"`
}

// Table prices models by name. A Table is read-only once built, so it may
// be shared between goroutines.
type Table map[string]Price

// defaults are list prices of common models; the offline provider's model
// (offline-v1, internal/llm.OfflineModel) costs nothing.
var defaults = Table{
	"claude-haiku-4-5":  {1, 5},
	"claude-3-5-haiku":  {0.8, 4},
	"claude-sonnet-4-5": {3, 15},
	"gpt-4o-mini":       {0.15, 0.6},
	"gpt-4.1-mini":      {0.4, 1.6},
	"gpt-4.1-nano":      {0.1, 0.4},
	"gemini-2.5-flash":  {0.3, 2.5},
	"offline-v1":        {0, 0},
}

// Default returns a copy of the built-in table.
func Default() Table {
	out := make(Table, len(defaults))
	for k, v := range defaults {
		out[k] = v
	}
	return out
}

// ErrInvalid is wrapped by Parse's errors.
var ErrInvalid = errors.New("invalid price")

// Parse reads "model=in:out,…" (USD per million input and output tokens)
// over the built-in table: an entry adds a model or overrides its price.
// An empty spec is the built-in table. A price is a finite non-negative
// number (NaN or Inf would make every cost unprintable as JSON). Errors
// wrap ErrInvalid and quote the entry at fault.
func Parse(spec string) (Table, error) {
	out := Default()
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		model, rates, ok := strings.Cut(item, "=")
		in, outS, ok2 := strings.Cut(rates, ":")
		if !ok || !ok2 || strings.TrimSpace(model) == "" {
			return nil, fmt.Errorf("%w: %q is not model=input:output", ErrInvalid, item)
		}
		pin, err1 := strconv.ParseFloat(strings.TrimSpace(in), 64)
		pout, err2 := strconv.ParseFloat(strings.TrimSpace(outS), 64)
		if err1 != nil || err2 != nil || !valid(pin) || !valid(pout) {
			return nil, fmt.Errorf("%w: %q: prices must be non-negative numbers (USD per million tokens)", ErrInvalid, item)
		}
		out[strings.TrimSpace(model)] = Price{pin, pout}
	}
	return out, nil
}

// valid reports whether p may be a price: finite and not negative.
func valid(p float64) bool { return p >= 0 && !math.IsInf(p, 0) }

// Lookup returns model's price: its exact entry, else the longest entry
// that prefixes the model name (a dated version takes its family's price);
// ok is false when there is none.
func (t Table) Lookup(model string) (Price, bool) {
	if p, ok := t[model]; ok {
		return p, true
	}
	best, found := "", false
	var p Price
	for k, v := range t {
		if k != "" && strings.HasPrefix(model, k) && len(k) > len(best) {
			best, p, found = k, v, true
		}
	}
	return p, found
}

// Cost prices in input and out output tokens of model in USD; ok is false
// (and the cost 0) when the table has no price for it.
func (t Table) Cost(model string, in, out int64) (usd float64, ok bool) {
	p, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	return (float64(in)*p.In + float64(out)*p.Out) / 1e6, true
}
