package indexersvc

import (
	"context"
	"errors"
	"slices"
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
	return x.resolveIn(ctx, tenant, ref, &tenantList{})
}

// tenantList reads a tenant's entries once for all the references of a
// request.
type tenantList struct {
	all  []events.SessionIndex
	read bool
}

func (l *tenantList) get(ctx context.Context, s *entries, tenant string) ([]events.SessionIndex, error) {
	if !l.read {
		all, err := s.list(ctx, tenant)
		if err != nil {
			return nil, err
		}
		l.all, l.read = all, true
	}
	return l.all, nil
}

// resolveIn is resolve with the tenant's entries read through list.
func (x *Indexer) resolveIn(ctx context.Context, tenant, ref string, list *tenantList) (events.Resolution, *apiError) {
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
		all, err := list.get(ctx, x.entries, tenant)
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
// A text with more than ResolveMaxRefs references is refused (400); the
// questions share one request's budget (memory.SplitBudget), and a
// question repeated for the same session is answered once.
func (x *Indexer) references(ctx context.Context, tenant, text string, answer bool) (events.ResolveReply, *apiError) {
	reply := events.ResolveReply{Resolved: []events.Resolution{}}
	refs := memory.FindRefs(text)
	if len(refs) > x.cfg.ResolveMaxRefs {
		return reply, fail(400, "the text holds %d @@references; a request may hold at most %d (RECALL_RESOLVE_MAX_REFS): split it", len(refs), x.cfg.ResolveMaxRefs)
	}
	questions := 0
	for _, ref := range refs {
		if ref.Question != "" {
			questions++
		}
	}
	budget := memory.SplitBudget(min(x.cfg.QueryBudgetTokens, x.budgetCap(tenant)), questions, minQuestionBudget)
	list, answers := &tenantList{}, map[[2]string]*events.QueryReply{}
	var items []memory.ReferenceItem
	for _, ref := range refs {
		token := strings.TrimPrefix(ref.Raw, "@@")
		r, aerr := x.resolveIn(ctx, tenant, token, list)
		if aerr != nil {
			return reply, aerr
		}
		r.Question = ref.Question
		if answer && ref.Question != "" {
			key := [2]string{r.Session.Session, ref.Question}
			if answers[key] == nil {
				q, aerr := x.query(ctx, tenant, r.Session.Session, events.QueryRequest{Question: ref.Question, BudgetTokens: budget}, time.Now())
				if aerr != nil {
					return reply, aerr
				}
				answers[key] = q
			}
			r.Answer = answers[key]
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

// minQuestionBudget is the least budget one question of a resolve request
// gets when the request's budget is split among many.
const minQuestionBudget = 2000

func referenceItem(ref string, ancestor int, s events.SessionIndex, r events.Resolution) memory.ReferenceItem {
	it := memory.ReferenceItem{Ref: ref, Session: s.Session, Name: s.Name, Description: s.Description, Summary: s.Summary, Ancestor: ancestor, Question: r.Question}
	if r.Answer != nil {
		it.Answer = r.Answer.Answer
	}
	return it
}

// referencedSessions reads the sessions a <session-references> message
// names (memory.SessionReferenceText): the id of each "## <name> (session
// <id>)" heading after a blank line — ancestors a "~N" asked for
// included — in order, each once. A summary holding a line of that shape
// after a blank line would name one too: a session of the same tenant.
func referencedSessions(text string) []string {
	var out []string
	blank := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		after := blank
		blank = line == ""
		rest, heading := strings.CutPrefix(line, "## ")
		i := strings.LastIndex(rest, " (session ")
		if !heading || !after || i < 0 || !strings.HasSuffix(rest, ")") {
			continue
		}
		id := strings.TrimSuffix(rest[i+len(" (session "):], ")")
		if events.ValidateID(id) == nil && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// budgetCap is the most session tokens one request of tenant sends to the
// model: the tenant's query_max_budget_tokens (at most the operator's
// ceiling, also for a value stored around the API), else the service's.
func (x *Indexer) budgetCap(tenant string) int64 {
	if n := x.tenants.Get(tenant).QueryMaxBudgetTokens; n > 0 {
		return min(n, x.cfg.TenantMax.Resolved().QueryBudgetTokens)
	}
	return x.cfg.QueryMaxBudgetTokens
}

// query answers a question about session from its notes, compaction
// summaries and most recent records under the token budget.
func (x *Indexer) query(ctx context.Context, tenant, session string, req events.QueryRequest, began time.Time) (*events.QueryReply, *apiError) {
	budget := req.BudgetTokens
	if budget <= 0 {
		budget = x.cfg.QueryBudgetTokens
	}
	budget = min(budget, x.budgetCap(tenant))
	notes := ""
	if rec, _, err := x.mem.Get(ctx, tenant, session); err == nil {
		notes = rec.Notes
	}
	passages, summaries, dropped, err := x.passages(ctx, tenant, session, budget)
	if err != nil {
		return nil, fail(503, "reading the transcript of %s: %v", session, err)
	}
	qc := memory.BuildQueryContext(notes, summaries, passages, budget)
	reply := &events.QueryReply{Session: session, InputTokens: qc.Tokens, Records: len(passages), Truncated: qc.Truncated + dropped, Sources: []events.QuerySource{}}
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

// passages reads the session's most recent messages as passages, the
// newest that fit budget, and the compaction summaries among them apart
// (the newest, about the budget's worth), and how many records the
// budget left out of the window read last. It reads backwards in growing
// windows of stream sequences (sessions interleave in the stream), each
// window forwards through a PassageTail of what the budget has left, so a
// long session costs what its tail costs and memory holds about the
// budget, however large the session or its records: claim-checked records
// are seen by their stub's preview, never fetched.
func (x *Indexer) passages(ctx context.Context, tenant, session string, budget int64) (_ []memory.Passage, _ []string, dropped int, _ error) {
	last, err := x.reader.LastSeq(ctx, tenant, session)
	if err != nil || last == 0 {
		return nil, nil, 0, err
	}
	var out []memory.Passage
	var summaries []string
	var tokens, sumTokens int64
	from, span := last, uint64(256)
	for {
		start := uint64(1)
		if from > span {
			start = from - span + 1
		}
		tail := memory.NewPassageTail(budget - tokens)
		var sums []string
		err := x.reader.ScanStubs(ctx, tenant, session, start, from, func(r transcript.Record) bool {
			m := r.Message
			switch {
			case m == nil || memory.IsSessionReference(m):
			case memory.IsCompactionSummary(m):
				if text := memory.RequestText(m); sumTokens < budget {
					sums, sumTokens = append(sums, text), sumTokens+memory.EstimateText(text)
				}
			default:
				if text := memory.MessagePassage(m); text != "" {
					tail.Add(memory.Passage{Seq: r.Seq, ID: m.UUID, Role: m.Role, Text: text})
				}
			}
			return true
		})
		if err != nil {
			return nil, nil, 0, err
		}
		tokens += tail.Tokens()
		out, summaries = append(tail.Passages(), out...), append(sums, summaries...)
		if start == 1 || tokens >= budget || tail.Dropped() > 0 {
			return out, summaries, tail.Dropped(), nil
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
