package tenantcfg

import (
	"fmt"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// Bounds of the gateway section.
const (
	// MinCompactAboveTokens is the smallest compact_above_tokens (other
	// than 0, off): below it the kept window alone would pass it.
	MinCompactAboveTokens = 20000
	// MaxClientCompactionRules bounds gateway.client_compaction.rules.
	MaxClientCompactionRules = 16
)

// checkGateway validates the gateway section: compact_above_tokens 0 or at
// least MinCompactAboveTokens; each client_compaction rule named, with at
// least one non-blank phrase and a known answer format.
func checkGateway(g *events.GatewayConfig) []events.ConfigFieldError {
	if g == nil {
		return nil
	}
	var errs []events.ConfigFieldError
	add := func(field, msg string) { errs = append(errs, events.ConfigFieldError{Field: field, Error: msg}) }
	if n := g.CompactAboveTokens; n < 0 || (n > 0 && n < MinCompactAboveTokens) {
		add("gateway.compact_above_tokens", fmt.Sprintf("must be 0 (off) or at least %d input tokens, not %d", MinCompactAboveTokens, n))
	}
	cc := g.ClientCompaction
	if cc == nil {
		return errs
	}
	if len(cc.Rules) > MaxClientCompactionRules {
		add("gateway.client_compaction.rules", fmt.Sprintf("at most %d rules, not %d", MaxClientCompactionRules, len(cc.Rules)))
	}
	for i, r := range cc.Rules {
		at := fmt.Sprintf("gateway.client_compaction.rules[%d]", i)
		if strings.TrimSpace(r.Name) == "" {
			add(at+".name", "must name the client (e.g. \"claude-code\")")
		}
		if len(r.Contains) == 0 {
			add(at+".contains", "must list at least one phrase of the client's summarization prompt")
		}
		for j, p := range r.Contains {
			if len(strings.TrimSpace(p)) < 8 {
				add(fmt.Sprintf("%s.contains[%d]", at, j), fmt.Sprintf("a phrase of at least 8 characters, not %q: a short one would take ordinary requests for summarization turns", p))
			}
		}
		switch r.Answer {
		case "", events.AnswerPlain, events.AnswerSummaryTags:
		default:
			add(at+".answer", fmt.Sprintf("must be %q or %q, not %q", events.AnswerSummaryTags, events.AnswerPlain, r.Answer))
		}
	}
	return errs
}
