package indexersvc

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// resolve finds the session ref names within tenant: an exact session id,
// then a case-insensitive exact name, then a fuzzy name match (more than
// one is an ambiguity listing them); "~N" adds N ancestors.
func (x *Indexer) resolve(ctx context.Context, tenant, ref string) (events.Resolution, *apiError) {
	r, err := memory.ParseRef(ref)
	if err != nil {
		return events.Resolution{}, fail(400, "%v", err)
	}
	res := events.Resolution{Ref: ref}
	if events.ValidateID(r.Target) == nil {
		idx, _, err := x.entries.get(ctx, tenant, r.Target)
		switch {
		case err == nil:
			res.By, res.Session = "id", idx
		case !errors.Is(err, errNotFound):
			return res, fail(503, "%v", err)
		default:
			// A session not indexed yet is still one by its id when it
			// has a transcript.
			if last, err := x.reader.LastSeq(ctx, tenant, r.Target); err == nil && last > 0 {
				res.By, res.Session = "id", idx
			}
		}
	}
	if res.By == "" {
		lower := strings.ToLower(r.Target)
		if memory.Slug(lower) == lower {
			holder, err := x.entries.byName(ctx, tenant, lower)
			if err != nil {
				return res, fail(503, "%v", err)
			}
			if holder != "" {
				if idx, _, err := x.entries.get(ctx, tenant, holder); err == nil {
					res.By, res.Session = "name", idx
				}
			}
		}
	}
	if res.By == "" {
		all, err := x.entries.list(ctx, tenant)
		if err != nil {
			return res, fail(503, "%v", err)
		}
		var found []events.SessionIndex
		for _, s := range all {
			if s.Name != "" && !s.Ephemeral && memory.FuzzyMatch(r.Target, s.Name) {
				found = append(found, s)
			}
		}
		switch len(found) {
		case 0:
			return res, fail(404, "no session of this tenant is named or matches %q", r.Target)
		case 1:
			res.By, res.Session = "fuzzy", found[0]
		default:
			return res, ambiguous(ref, found)
		}
	}
	res.Ancestors = x.ancestors(ctx, tenant, res.Session, r.Ancestors)
	return res, nil
}

// ancestors follows ParentSession up to n steps (stopping at a missing
// entry or a cycle).
func (x *Indexer) ancestors(ctx context.Context, tenant string, s events.SessionIndex, n int) []events.SessionIndex {
	var out []events.SessionIndex
	seen := map[string]bool{s.Session: true}
	for len(out) < n && s.ParentSession != "" && !seen[s.ParentSession] {
		seen[s.ParentSession] = true
		p, _, err := x.entries.get(ctx, tenant, s.ParentSession)
		if err != nil {
			break
		}
		out = append(out, p)
		s = p
	}
	return out
}

// references resolves every @@reference of text and builds the context
// message carrying them (answering "@@ref: question" forms when asked).
func (x *Indexer) references(ctx context.Context, tenant, text string, answer bool) (events.ResolveReply, *apiError) {
	reply := events.ResolveReply{Resolved: []events.Resolution{}}
	var items []memory.ReferenceItem
	for _, ref := range memory.FindRefs(text) {
		token := strings.TrimPrefix(ref.Raw, "@@")
		r, aerr := x.resolve(ctx, tenant, token)
		if aerr != nil {
			return reply, aerr
		}
		r.Question = ref.Question
		if answer && ref.Question != "" {
			q, aerr := x.query(ctx, tenant, r.Session.Session, events.QueryRequest{Question: ref.Question}, time.Now())
			if aerr != nil {
				return reply, aerr
			}
			r.Answer = q
		}
		reply.Resolved = append(reply.Resolved, r)
		items = append(items, referenceItem(token, 0, r.Session, r))
		for i, a := range r.Ancestors {
			items = append(items, referenceItem(token, i+1, a, events.Resolution{}))
		}
	}
	if len(items) > 0 {
		reply.Context = &events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: memory.SessionReferenceText(items)}}}
	}
	return reply, nil
}

func referenceItem(ref string, ancestor int, s events.SessionIndex, r events.Resolution) memory.ReferenceItem {
	it := memory.ReferenceItem{Ref: ref, Session: s.Session, Name: s.Name, Description: s.Description, Summary: s.Summary, Ancestor: ancestor, Question: r.Question}
	if r.Answer != nil {
		it.Answer = r.Answer.Answer
	}
	return it
}

// query answers a question about session from its notes, compaction
// summaries and most recent records under the token budget.
func (x *Indexer) query(ctx context.Context, tenant, session string, req events.QueryRequest, began time.Time) (*events.QueryReply, *apiError) {
	budget := req.BudgetTokens
	if budget <= 0 {
		budget = x.cfg.QueryBudgetTokens
	}
	notes := ""
	if rec, _, err := x.mem.Get(ctx, tenant, session); err == nil {
		notes = rec.Notes
	}
	passages, summaries, err := x.passages(ctx, tenant, session, budget)
	if err != nil {
		return nil, fail(503, "reading the transcript of %s: %v", session, err)
	}
	qc := memory.BuildQueryContext(notes, summaries, passages, budget)
	reply := &events.QueryReply{Session: session, InputTokens: qc.Tokens, Records: len(passages), Truncated: qc.Truncated, Sources: []events.QuerySource{}}
	overhead := time.Since(began)
	var cites []int
	if x.provider == nil {
		reply.Answer, cites = memory.ExtractiveAnswer(req.Question, qc.Passages, 3)
		reply.Model = "extractive"
	} else {
		resp, err := x.provider.Complete(ctx, llm.Request{
			System:     memory.QuerySystemPrompt,
			Messages:   []events.Message{{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "<session>\n" + qc.Text + "</session>\n\nQuestion: " + req.Question}}}},
			MaxTokens:  1024,
			CacheAfter: -1,
			Task:       llm.TaskQuery,
			Passages:   qc.Passages,
			Question:   req.Question,
		})
		if err != nil {
			return nil, fail(502, "asking %s: %v", x.provider.Name(), err)
		}
		reply.Answer, reply.Model, reply.Usage = resp.Text, resp.Model, resp.Usage
		reply.CostUSD = cost(x.prices, resp.Model, resp.Usage.InputTokens+resp.Usage.CacheReadTokens+resp.Usage.CacheCreationTokens, resp.Usage.OutputTokens)
		cites = memory.Citations(resp.Text, len(qc.Passages))
	}
	after := time.Now()
	for _, i := range cites {
		p := qc.Passages[i]
		reply.Sources = append(reply.Sources, events.QuerySource{Seq: p.Seq, ID: p.ID, Role: p.Role, Excerpt: clip(p.Text, 300)})
	}
	overhead += time.Since(after)
	reply.OverheadMS = float64(overhead.Microseconds()) / 1000
	x.m.queried(ctx, "answered", overhead)
	x.m.spent(ctx, reply.Usage, reply.CostUSD)
	return reply, nil
}

// passages reads the session's most recent messages as passages, about
// the budget's worth, and the compaction summaries among them apart.
// It reads backwards in growing windows of stream sequences (sessions
// interleave in the stream), so a long session costs what its tail costs,
// not a full read.
func (x *Indexer) passages(ctx context.Context, tenant, session string, budget int64) ([]memory.Passage, []string, error) {
	last, err := x.reader.LastSeq(ctx, tenant, session)
	if err != nil || last == 0 {
		return nil, nil, err
	}
	var out []memory.Passage
	var summaries []string
	var tokens int64
	from, span := last, uint64(256)
	for {
		start := uint64(1)
		if from > span {
			start = from - span + 1
		}
		var chunk []memory.Passage
		var sums []string
		err := x.reader.Scan(ctx, tenant, session, start, from, func(r transcript.Record) bool {
			m := r.Message
			switch {
			case m == nil || memory.IsSessionReference(m):
			case memory.IsCompactionSummary(m):
				sums = append(sums, memory.RequestText(m))
			default:
				if text := memory.MessagePassage(m); text != "" {
					chunk = append(chunk, memory.Passage{Seq: r.Seq, ID: m.UUID, Role: m.Role, Text: text})
					tokens += memory.EstimateText(text)
				}
			}
			return true
		})
		if err != nil {
			return nil, nil, err
		}
		out, summaries = append(chunk, out...), append(sums, summaries...)
		if start == 1 || tokens >= budget {
			return out, summaries, nil
		}
		from, span = start-1, span*4
	}
}

func clip(s string, n int) string {
	r := []rune(strings.TrimSpace(s))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}
