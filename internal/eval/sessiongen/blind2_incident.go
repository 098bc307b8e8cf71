package sessiongen

import (
	"fmt"
	"strings"
)

// incidentWork investigates an incident on a Go checkout service: logs,
// a load test, a timeout and a retry policy on the payment client, an
// alert rule and the incident document.
type incidentWork struct {
	*bgen
	pool     *fillerPool
	inc      int
	channel  string
	depOld   string
	depNew   string
	timeout  int
	p95      string
	failRate string
	memMi    int
	alertF   string
	alertOld string
	alertNew string
	ask1     string
	ask2     string
}

func newIncidentWork(b *bgen) work {
	k := &incidentWork{bgen: b, inc: b.between(2100, 4800), channel: "#inc-" + b.word()}
	major := b.between(11, 29)
	k.depOld, k.depNew = fmt.Sprintf("v%d.4.1", major), fmt.Sprintf("v%d.4.2", major)
	k.timeout = pick(b, 1500, 2000, 2500, 3000)
	k.p95 = fmt.Sprintf("%d.%02dms", b.between(280, 690), b.r.IntN(99))
	k.failRate = fmt.Sprintf("%d.%02d%%", b.between(1, 9), b.r.IntN(99))
	k.memMi = b.between(1400, 2900)
	k.alertF = "deploy/alerts/checkout-" + b.word() + ".yaml"
	lo, hi := pick(b, 600, 700, 800), pick(b, 1200, 1500)
	k.alertOld, k.alertNew = fmt.Sprintf("%dms for 5m", lo), fmt.Sprintf("%dms for 10m", hi)
	k.ask1 = pick(b, "a histogram of payments-gw latency", "a counter of provider timeouts", "a gauge of in-flight charges")
	k.ask2 = pick(b, "the provider request id in every timeout log line", "a trace span around the charge call", "a dashboard panel for the pool saturation")
	k.pool = b.newPool(goLang, "internal/payment/client.go", "internal/cart/store.go", "internal/httpapi/handler.go", "cmd/checkoutd/main.go", "internal/payment/mock_provider.go")
	b.summary = "1. Primary request: find out why checkout returns 502s and fix it.\n" +
		"2. Work so far: logs and the payment and cart packages were read; the tests pass.\n3. Continue with the user's most recent request."
	return k
}

func (k *incidentWork) project() (string, string, string) {
	return "checkout", "/home/sam/go/src/checkout", fmt.Sprintf("inc-%d-payments", k.inc)
}

func (k *incidentWork) filler() { k.fillerTurn(k.pool) }

func (k *incidentWork) doc() string { return fmt.Sprintf("docs/incidents/INC-%d.md", k.inc) }

func (k *incidentWork) first() {
	k.w.prompt(fmt.Sprintf("checkout has been throwing 502s since about 14:05 UTC, roughly 4%% of requests, and the pager won't stop. I'm incident commander for INC-%d. You have a read-only kubeconfig for prod: get, describe, logs and top are fine, but do not restart, scale or roll back anything without asking me first, even if it looks obvious. Keep the timeline and findings in %s as you go so I can paste from it. Start with the checkout pods' logs from the last 30 minutes.", k.inc, k.doc()))
	var out strings.Builder
	for i := 0; i < 80+k.r.IntN(60); i++ {
		fmt.Fprintf(&out, "{\"level\":\"%s\",\"ts\":\"2026-02-11T14:%02d:%02dZ\",\"msg\":\"%s %s\",\"route\":\"/v1/checkout\",\"status\":%d,\"dur_ms\":%d}\n",
			pick(k.bgen, "info", "info", "error"), 5+i%30, i%60, k.fw(), k.fw(), pick(k.bgen, 200, 200, 502), k.between(40, 9000))
	}
	k.w.bash(nil, "kubectl -n checkout logs deploy/checkout --since=30m --tail=400", "Read recent checkout logs", out.String(), 0)
	k.w.create(nil, k.doc(), fmt.Sprintf("# INC-%d: checkout 502s\n\n## Timeline (UTC)\n\n- 14:05 502 rate rises to ~4%%\n\n## Findings\n", k.inc))
	k.w.respond(text("The 502s are all on /v1/checkout and take several seconds before failing, which looks like waiting on something downstream rather than a crash. I started the incident doc."))
	k.fact(Fact{Category: CatExtraction, Kind: "instruction", Question: "Where do the incident's timeline and findings go?", Expect: []string{k.doc()}})
}

func (k *incidentWork) beats() []beat {
	return []beat{
		{0.05, k.passingPreference}, {0.11, k.deploy}, {0.18, k.timeoutDecision}, {0.27, k.loadTest},
		{0.36, k.unusedCancel}, {0.45, k.retries}, {0.52, k.files}, {0.60, k.temporal},
		{0.68, k.top}, {0.76, k.race}, {0.84, k.alertThreshold}, {0.90, k.reverseRetries},
	}
}

func (k *incidentWork) passingPreference() {
	k.w.prompt(fmt.Sprintf("Some context from the bridge: payments-gw says they're healthy on their side, the DB team sees nothing, and the deploy pipeline shows checkout went out twice today. Status updates go in %s, one line whenever you find something real — not in #checkout, half the company muted that after last month. What I'd like from you now is whether the pool in internal/payment/client.go can block forever.", k.channel))
	k.w.read(nil, "internal/payment/client.go", k.pool.get(k.bgen, "internal/payment/client.go").src)
	k.w.respond(text("It can: the provider call takes the request context but checkout's handler context has no deadline, so a slow payments-gw holds a pool connection until the client gives up, and the pool has 50 connections."))
	k.fact(Fact{Category: CatExtraction, Kind: "preference", Question: "Where should status updates be posted?", Expect: []string{k.channel}})
}

func (k *incidentWork) deploy() {
	k.w.prompt(fmt.Sprintf("the suspect deploy is %s — sorry, %s, I misread the pipeline. what changed in it?", k.depOld, k.depNew))
	k.w.bash(nil, fmt.Sprintf("git log --oneline %s~5..%s -- internal/payment", k.depNew, k.depNew), "Payment changes in the deploy", "a41c9e2 payment: share one http.Client across tenants\n7be01d4 payment: drop the per-call deadline, the gateway enforces one", 0)
	k.w.respond(text(fmt.Sprintf("%s dropped the per-call deadline on the payment client (7be01d4), on the assumption that the gateway enforces one.", k.depNew)))
	k.fact(Fact{Category: CatKnowledgeUpdate, Kind: "value", Question: "Which deploy is the suspect?", Expect: []string{k.depNew}, Superseded: []string{k.depOld}})
}

func (k *incidentWork) timeoutDecision() {
	k.w.prompt("so what do we do about it?")
	k.w.respond(thinking("Raising the pool only moves the queue to payments-gw; a deadline per call bounds the wait and frees the connection."),
		text(fmt.Sprintf("I'd put a %dms deadline on each provider call with context.WithTimeout instead of raising the pool size: a bigger pool just moves the queue to payments-gw and lets goroutines pile up, while a deadline frees the connection and turns a hang into a fast, retryable error. Go ahead?", k.timeout)))
	k.w.prompt("yes")
	k.w.edit(nil, "internal/payment/client.go", firstLine(k.pool.get(k.bgen, "internal/payment/client.go").src, 6), fmt.Sprintf("const callTimeout = %d * time.Millisecond\n\nfunc (c *Client) Charge(ctx context.Context, req ChargeRequest) (*Charge, error) {\n\tctx, cancel := context.WithTimeout(ctx, callTimeout)", k.timeout))
	k.w.respond(text("Deadline in place on Charge."))
	k.fact(Fact{Category: CatExtraction, Kind: "decision", Question: "What deadline does a payment provider call get?", Expect: []string{fmt.Sprintf("%dms", k.timeout), "context.WithTimeout"}})
	k.probe(Probe{Kind: ProbeDecision, Question: "What did the agent choose against the pool exhaustion, and why?", Expect: []string{"context.WithTimeout"}, Why: []string{"moves the queue", "goroutines pile up", "frees the connection"}})
}

func (k *incidentWork) unusedCancel() {
	k.w.prompt("build it and run the payment tests")
	k.w.bash(nil, "go build ./...", "Build", fmt.Sprintf("# checkout/internal/payment\ninternal/payment/client.go:%d:7: declared and not used: cancel", k.between(40, 200)), 1)
	k.w.edit([]part{text("The cancel func has to be called.")}, "internal/payment/client.go", "\tctx, cancel := context.WithTimeout(ctx, callTimeout)", "\tctx, cancel := context.WithTimeout(ctx, callTimeout)\n\tdefer cancel()")
	k.w.bash(nil, "go build ./... && go test ./internal/payment/...", "Build and test", "ok  \tcheckout/internal/payment\t0.412s", 0)
	k.w.respond(text("Builds and the payment tests pass."))
	k.fact(Fact{Category: CatErrorsFixes, Kind: "build_error", Question: "Which build error did the timeout change cause, and what fixed it?", Expect: []string{"declared and not used: cancel", "defer cancel()"}})
}

func (k *incidentWork) loadTest() {
	k.w.prompt("run the k6 scenario against staging with payments-gw latency injected, I want to see what users would see")
	out := k.longLog(80+k.r.IntN(80), func(i int) string {
		return fmt.Sprintf("running (%02dm%02d.0s), %03d/200 VUs, %d complete and 0 interrupted iterations", i/60, i%60, 50+i%150, i*k.between(20, 40))
	}, "", "     checks.........................: 97.12%", fmt.Sprintf("     http_req_duration..............: avg=211.4ms min=12.02ms med=160.7ms max=%d.1ms p(90)=241.0ms p(95)=%s", k.timeout+k.between(40, 90), k.p95),
		fmt.Sprintf("     http_req_failed................: %s", k.failRate))
	k.w.bash(nil, "k6 run loadtest/checkout.js -e TARGET=staging -e INJECT_LATENCY=payments-gw", "Load test on staging", out, 0)
	k.w.respond(text("Done; the summary is at the bottom. No hangs any more, the slow calls fail at the deadline."))
	k.fact(Fact{Category: CatExtraction, Kind: "result", Question: "What p95 request duration did the staging load test report?", Expect: []string{k.p95}})
	k.probe(Probe{Kind: ProbeRecall, Question: "What share of requests failed in the staging load test?", Expect: []string{k.failRate}})
}

func (k *incidentWork) retries() {
	k.w.prompt("and the calls that hit the deadline, do we just fail the checkout?")
	k.w.respond(text("I'll wrap every provider call in three retries with jittered backoff, so a single slow response doesn't fail the checkout."))
	k.w.edit(nil, "internal/payment/client.go", "\tdefer cancel()", "\tdefer cancel()\n\treturn retry.Do(ctx, 3, func(ctx context.Context) (*Charge, error) { return c.charge(ctx, req) })")
}

func (k *incidentWork) files() {
	k.w.prompt(fmt.Sprintf("add an alert so we catch this before users do: page when checkout p99 is above %s. and the hand-written mock provider should go, the new tests use httptest", k.alertOld))
	k.w.bash(nil, fmt.Sprintf("mkdir -p deploy/alerts && tee %s > /dev/null <<'EOF'\ngroups:\n- name: checkout-latency\n  rules:\n  - alert: CheckoutP99High\n    expr: histogram_quantile(0.99, sum by (le) (rate(http_server_duration_bucket{service=\"checkout\"}[5m]))) > %s\n    for: %s\nEOF", k.alertF, strings.Fields(k.alertOld)[0], strings.Fields(k.alertOld)[2]), "Write the alert rule", "", 0)
	k.w.bash(nil, "git rm -q internal/payment/mock_provider.go && git mv internal/payment/client_test.go internal/payment/client_httptest_test.go", "Drop the mock, rename the test", "", 0)
	k.pool.remove("internal/payment/mock_provider.go")
	k.multiEdit(nil, "internal/payment/client_httptest_test.go", "p := newMockProvider()", "srv := httptest.NewServer(slowProvider(t))\n\tdefer srv.Close()", "c := New(p)", "c := New(srv.URL)")
	k.w.bash(nil, fmt.Sprintf("cat >> %s <<'EOF'\n- 14:52 suspect deploy found (per-call deadline removed); fix: deadline per provider call\n- 15:10 alert %s added (p99 > %s)\nEOF", k.doc(), k.alertF, k.alertOld), "Update the timeline", "", 0)
	k.w.respond(text(fmt.Sprintf("The alert is in %s, the mock provider is deleted and the test moved to client_httptest_test.go; the timeline is updated.", k.alertF)))
	k.probe(Probe{Kind: ProbeRecall, Question: "Which file holds the new latency alert?", Expect: []string{k.alertF}})
}

func (k *incidentWork) temporal() {
	k.w.prompt(fmt.Sprintf("add %s", k.ask1))
	k.w.edit(nil, "internal/payment/client.go", "\tdefer cancel()", "\tdefer cancel()\n\t// metrics: "+k.ask1)
	k.w.respond(text("Added."))
	k.w.prompt(fmt.Sprintf("then %s", k.ask2))
	k.w.edit(nil, "internal/payment/log.go", "\tlog := c.log.With(\"call\", name)", "\tlog := c.log.With(\"call\", name) // "+k.ask2)
	k.w.respond(text("Done."))
	k.fact(Fact{Category: CatTemporal, Kind: "order", Question: fmt.Sprintf("What did the user ask for right after %s?", k.ask1), Expect: []string{k.ask2}, After: k.ask1})
}

func (k *incidentWork) top() {
	k.w.prompt("is anything else unhealthy? memory?")
	var out strings.Builder
	out.WriteString("NAME                        CPU(cores)   MEMORY(bytes)\n")
	hot := k.r.IntN(8)
	for i := 0; i < 12; i++ {
		mem := k.between(300, 900)
		if i == hot {
			mem = k.memMi
		}
		fmt.Fprintf(&out, "checkout-7d9f8c6b5-%s   %dm         %dMi\n", k.w.short("", 5), k.between(40, 900), mem)
	}
	k.w.bash(nil, "kubectl -n checkout top pods", "Pod resource use", out.String(), 0)
	k.w.respond(text("One pod holds far more memory than the others: goroutines stuck on the payment pool, most likely. It should drain once the fix is deployed."))
	k.probe(Probe{Kind: ProbeRecall, Question: "How much memory did the busiest checkout pod use?", Expect: []string{fmt.Sprintf("%dMi", k.memMi)}})
}

func (k *incidentWork) race() {
	k.w.prompt("run the payment tests with -race before we ship anything")
	k.w.bash(nil, "go test -race ./internal/payment/...", "Race tests", "==================\nWARNING: DATA RACE\nWrite at 0x00c0001a4118 by goroutine 31:\n  checkout/internal/payment.(*Client).recordLatency()\n      internal/payment/client.go:141 +0x64\nPrevious read at 0x00c0001a4118 by goroutine 29:\n  checkout/internal/payment.(*Client).Stats()\n==================\n--- FAIL: TestChargeDeadline (0.31s)\n    testing.go:1490: race detected during execution of test\nFAIL\tcheckout/internal/payment\t1.204s", 1)
	k.w.bash(nil, "sed -i 's/c.lastLatency = d/c.lastLatency.Store(int64(d))/' internal/payment/client.go && go test -race ./internal/payment/...", "Make lastLatency atomic", "ok  \tcheckout/internal/payment\t1.377s", 0)
	k.w.respond(text("recordLatency wrote a plain field that Stats reads concurrently; it's an atomic.Int64 now and the race tests pass."))
	k.fact(Fact{Category: CatErrorsFixes, Kind: "test_failure", Question: "What did the race detector find, and what fixed it?", Expect: []string{"DATA RACE", "lastLatency.Store"}})
}

func (k *incidentWork) alertThreshold() {
	k.w.prompt(fmt.Sprintf("the SRE lead says that alert would have paged six times last week on normal traffic. make it p99 above %s instead", k.alertNew))
	k.w.bash(nil, fmt.Sprintf("sed -i 's/> %s/> %s/; s/for: %s/for: %s/' %s", strings.Fields(k.alertOld)[0], strings.Fields(k.alertNew)[0], strings.Fields(k.alertOld)[2], strings.Fields(k.alertNew)[2], k.alertF), "Raise the alert threshold", "", 0)
	k.w.respond(text(fmt.Sprintf("The alert now fires at p99 above %s.", k.alertNew)))
	k.fact(Fact{Category: CatKnowledgeUpdate, Kind: "value", Question: "When does the checkout latency alert fire?", Expect: []string{k.alertNew}, Superseded: []string{k.alertOld}})
}

func (k *incidentWork) reverseRetries() {
	k.w.prompt("Talked to payments: Charge is not idempotent on their side, a retry after a timeout can double-charge the customer. Retry only GetStatus; a Charge that times out should return an error and let the status poller reconcile it.")
	k.w.edit(nil, "internal/payment/client.go", "\treturn retry.Do(ctx, 3, func(ctx context.Context) (*Charge, error) { return c.charge(ctx, req) })", "\treturn c.charge(ctx, req) // no retries: Charge is not idempotent")
	k.w.edit(nil, "internal/payment/status.go", "\treturn c.getStatus(ctx, id)", "\treturn retry.Do(ctx, 3, func(ctx context.Context) (*Status, error) { return c.getStatus(ctx, id) })")
	k.w.bash(nil, "go test -race ./internal/payment/...", "Race tests", "ok  \tcheckout/internal/payment\t1.402s", 0)
	k.w.respond(text("Only GetStatus retries now; Charge fails fast at the deadline because it is not idempotent and a retry could double-charge."))
	k.probe(Probe{Kind: ProbeDecision, Question: "Which payment calls are retried, and why?", Expect: []string{"GetStatus"}, Why: []string{"not idempotent", "double-charge"}, Superseded: []string{"every provider call"}})
}

func (k *incidentWork) latest() {
	req := fmt.Sprintf("Now write the root cause and the remaining timeline into %s, then open a draft PR with the deadline and the GetStatus-only retry, titled \"checkout: bound payments-gw calls (INC-%d)\". Post the PR link in %s when it's up.", k.doc(), k.inc, k.channel)
	k.w.prompt(req)
	k.fact(Fact{Category: CatLatestRequest, Kind: "verbatim", Question: "What is the user's latest request, word for word?", Expect: []string{req}, Verbatim: true})
	k.todo("Root cause and timeline in the incident doc", "Open the draft PR", "Post the link")
	k.w.edit(nil, k.doc(), "## Findings\n", fmt.Sprintf("## Findings\n\nRoot cause: %s removed the per-call deadline on payment provider calls; when payments-gw slowed, the 50-connection pool filled and requests waited until the ingress returned 502.\n", k.depNew))
	k.w.bash(nil, fmt.Sprintf("gh pr create --draft --title \"checkout: bound payments-gw calls (INC-%d)\" --body-file %s", k.inc, k.doc()), "Open the draft PR", fmt.Sprintf("Warning: 6 uncommitted changes\npull request create failed: GraphQL: No commits between main and inc-%d-payments (createPullRequest)", k.inc), 1)
	k.w.respond(text(fmt.Sprintf("Nothing is committed on inc-%d-payments yet. Next: commit the payment changes and the alert, git push -u origin inc-%d-payments, then rerun gh pr create and post the link.", k.inc, k.inc)))
	k.probe(Probe{Kind: ProbeContinuation, Question: "What was the agent doing when the session was compacted, and what is its next step?", Expect: []string{"gh pr create", fmt.Sprintf("INC-%d", k.inc)}, Next: []string{"git push", "commit"}})
}

func (k *incidentWork) abstentions() []abstention {
	return []abstention{
		{"Which APM vendor's traces were used?", []string{"datadog", "new relic", "dynatrace", "honeycomb"}},
		{"Which CDN was blamed for the 502s?", []string{"cloudflare", "fastly", "akamai", "cloudfront"}},
		{"Which message broker was involved?", []string{"kafka", "rabbitmq", "sqs", "pulsar"}},
	}
}
