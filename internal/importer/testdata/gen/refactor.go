package main

import (
	"fmt"
	"strings"
	"time"
)

// refactorSession is a long session migrating a service from log.Printf to
// log/slog across many packages: a subagent (sidechain) surveys the call
// sites, the context fills up and is compacted automatically, errors happen
// and are fixed, and there are the usual non-conversation records.
func refactorSession() *gen {
	g := newGen("c0ffee00-1234-4abc-8def-56789abcdef0", "/home/dev/src/orders", time.Date(2025, 11, 3, 14, 0, 0, 0, time.UTC))
	g.write(map[string]any{"type": "queue-operation", "operation": "enqueue", "timestamp": g.tick(1), "sessionId": g.session, "content": "migrate logging to slog"})
	g.write(map[string]any{"type": "queue-operation", "operation": "dequeue", "timestamp": g.tick(1), "sessionId": g.session})
	g.prompt("The orders service still logs with log.Printf everywhere. Migrate every package to log/slog with structured attributes (order_id, customer_id, err). Pass a *slog.Logger down from main instead of using the global logger. Keep behaviour otherwise identical and keep the tests green.")
	g.respond(thinking("This is a wide refactor. First get an inventory of call sites; a subagent can survey the packages while I read main.go."),
		text("This touches many packages. I'll have a subagent inventory every log call first."))
	task := g.respond(g.tool("Task", map[string]any{"description": "Inventory log call sites", "subagent_type": "general-purpose",
		"prompt": "List every use of the standard log package under /home/dev/src/orders, grouped by package, with file:line and the format string."}))[0]

	// The subagent's own conversation, recorded inline as a sidechain.
	mainParent := g.parent
	g.sidechain, g.agentID, g.parent = true, "a7f3c2e1", ""
	g.prompt("List every use of the standard log package under /home/dev/src/orders, grouped by package, with file:line and the format string.")
	pkgs := []string{"api", "billing", "cart", "catalog", "checkout", "inventory", "notify", "payments", "shipping", "store", "returns", "pricing", "tax", "fraud", "loyalty", "reports"}
	grep := g.respond(g.tool("Grep", map[string]any{"pattern": `log\.(Printf|Println|Fatalf|Fatal)`, "path": g.cwd, "output_mode": "count"}))[0]
	var counts strings.Builder
	for i, p := range pkgs {
		fmt.Fprintf(&counts, "%s/internal/%s/%s.go:%d\n", g.cwd, p, p, 3+i%4)
	}
	g.result(grep, counts.String(), false, map[string]any{"mode": "count", "numFiles": len(pkgs)})
	for i, p := range pkgs[:6] {
		id := g.respond(g.tool("Grep", map[string]any{"pattern": `log\.`, "path": fmt.Sprintf("%s/internal/%s", g.cwd, p), "output_mode": "content", "-n": true}))[0]
		g.result(id, fmt.Sprintf("%s/internal/%s/%s.go:%d:\tlog.Printf(\"%s: order %%s failed: %%v\", id, err)\n%s/internal/%s/%s.go:%d:\tlog.Println(\"%s ready\")\n", g.cwd, p, p, 40+i, p, g.cwd, p, p, 12+i, p), false, map[string]any{"mode": "content", "numLines": 2})
	}
	g.respond(text("Inventory of `log` uses (49 call sites in 16 packages): api 3, billing 4, cart 5, catalog 3, checkout 4, inventory 3, notify 3, payments 4, shipping 3, store 2, returns 3, pricing 2, tax 3, fraud 3, loyalty 2, reports 2; plus `log.Fatal` in cmd/orders/main.go. Every package logs an order id and most log an error value."))
	g.sidechain, g.agentID = false, ""
	g.parent = mainParent
	g.result(task, "Inventory of `log` uses (49 call sites in 16 packages): api 3, billing 4, cart 5, catalog 3, checkout 4, inventory 3, notify 3, payments 4, shipping 3, store 2, returns 3, pricing 2, tax 3, fraud 3, loyalty 2, reports 2; plus `log.Fatal` in cmd/orders/main.go.", false,
		map[string]any{"status": "completed", "totalDurationMs": 48211, "totalTokens": 21877})

	g.read([]part{text("The subagent found 49 call sites. Starting with main.go, where the logger is created.")}, "cmd/orders/main.go",
		"package main\n\nimport (\n\t\"log\"\n\t\"net/http\"\n\n\t\"example.com/orders/internal/api\"\n)\n\nfunc main() {\n\tsrv := api.New()\n\tlog.Println(\"listening on :8080\")\n\tlog.Fatal(http.ListenAndServe(\":8080\", srv))\n}\n")
	g.edit(nil, "cmd/orders/main.go", "\tsrv := api.New()\n\tlog.Println(\"listening on :8080\")\n\tlog.Fatal(http.ListenAndServe(\":8080\", srv))",
		"\tlogger := slog.New(slog.NewJSONHandler(os.Stderr, nil))\n\tsrv := api.New(logger)\n\tlogger.Info(\"listening\", \"addr\", \":8080\")\n\tif err := http.ListenAndServe(\":8080\", srv); err != nil {\n\t\tlogger.Error(\"serving\", \"err\", err)\n\t\tos.Exit(1)\n\t}", "")

	for i, p := range pkgs {
		if i == 5 {
			// The context is full: Claude Code compacts automatically.
			last := g.parent
			u := g.id("boundary")
			g.write(map[string]any{"parentUuid": nil, "logicalParentUuid": last, "isSidechain": false, "userType": "external", "cwd": g.cwd, "sessionId": g.session,
				"version": g.version, "gitBranch": g.branch, "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted", "isMeta": false,
				"timestamp": g.tick(2000), "uuid": u, "level": "info", "compactMetadata": map[string]any{"trigger": "auto", "preTokens": 155873}})
			g.parent = u
			summary := "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n\n1. Primary request: migrate the orders service from log.Printf to log/slog with structured attributes (order_id, customer_id, err), passing a *slog.Logger from main.\n2. Done: cmd/orders/main.go creates a JSON slog logger; packages api, billing, cart, catalog and checkout take a logger in their constructors and log with attributes; tests updated to pass slog.New(slog.DiscardHandler).\n3. Remaining: inventory, notify, payments, shipping, store, returns, pricing, tax, fraud, loyalty, reports.\n4. Lesson: constructors changed signature, so every caller in tests must be updated before building."
			s := g.id("summary")
			g.write(userRecord{base: g.base(g.parent), Type: "user", Message: map[string]any{"role": "user", "content": summary}, IsCompactSummary: true, IsVisibleOnly: true, UUID: s, Timestamp: g.tick(10)})
			g.parent = s
			g.ctxTokens = 18000
			g.write(map[string]any{"type": "system", "subtype": "informational", "content": "Context compacted: 155873 → 18240 tokens", "timestamp": g.tick(5), "uuid": g.id("info"), "level": "info", "isMeta": false, "sessionId": g.session})
		}
		file := fmt.Sprintf("internal/%s/%s.go", p, p)
		typ := strings.ToUpper(p[:1]) + p[1:]
		src := fmt.Sprintf("package %s\n\nimport (\n\t\"log\"\n)\n\n// Service handles %s requests.\ntype Service struct{}\n\n// New returns a Service.\nfunc New() *Service {\n\tlog.Println(\"%s ready\")\n\treturn &Service{}\n}\n\n// Handle processes one order.\nfunc (s *Service) Handle(id, customer string) error {\n\tif err := s.do(id); err != nil {\n\t\tlog.Printf(\"%s: order %%s for %%s failed: %%v\", id, customer, err)\n\t\treturn err\n\t}\n\treturn nil\n}\n\nfunc (s *Service) do(string) error { return nil }\n", p, p, p, p)
		_ = typ
		g.read([]part{text(fmt.Sprintf("Next: the %s package.", p))}, file, src)
		g.edit(nil, file, "import (\n\t\"log\"\n)\n\n// Service handles "+p+" requests.\ntype Service struct{}",
			"import (\n\t\"log/slog\"\n)\n\n// Service handles "+p+" requests.\ntype Service struct{ log *slog.Logger }", "")
		g.edit(nil, file, "func New() *Service {\n\tlog.Println(\""+p+" ready\")\n\treturn &Service{}\n}",
			"func New(logger *slog.Logger) *Service {\n\tlogger = logger.With(\"component\", \""+p+"\")\n\tlogger.Info(\"ready\")\n\treturn &Service{log: logger}\n}", "")
		old := "\t\tlog.Printf(\"" + p + ": order %s for %s failed: %v\", id, customer, err)"
		failure := ""
		if i == 2 || i == 7 {
			failure = "String to replace not found in file.\nString: " + old
			g.edit(nil, file, strings.Replace(old, "for %s ", "", 1), "\t\ts.log.Error(\"handling order\", \"order_id\", id, \"err\", err)", failure)
		}
		g.edit(nil, file, old, "\t\ts.log.Error(\"handling order\", \"order_id\", id, \"customer_id\", customer, \"err\", err)", "")
		test := fmt.Sprintf("internal/%s/%s_test.go", p, p)
		g.edit(nil, test, "\ts := New()", "\ts := New(slog.New(slog.DiscardHandler))", "")
		if i == 3 {
			g.bash(nil, "go build ./... ", "Build", "# example.com/orders/internal/api\ninternal/api/api.go:31:25: not enough arguments in call to catalog.New\n\thave ()\n\twant (*slog.Logger)\n", 1)
			g.read([]part{thinking("api constructs catalog.New() itself. It must pass its logger down.")}, "internal/api/api.go",
				"package api\n\nimport (\n\t\"log/slog\"\n\t\"net/http\"\n\n\t\"example.com/orders/internal/catalog\"\n)\n\n// New returns the HTTP API.\nfunc New(logger *slog.Logger) http.Handler {\n\tmux := http.NewServeMux()\n\tc := catalog.New()\n\tmux.Handle(\"/catalog\", c)\n\treturn mux\n}\n")
			g.edit([]part{text("api builds the catalog service itself; passing its logger down.")}, "internal/api/api.go", "\tc := catalog.New()", "\tc := catalog.New(logger)", "")
		}
		if i == 6 {
			g.bash(nil, "go test ./internal/notify/", "Test notify", "--- FAIL: TestHandleLogs (0.00s)\n    notify_test.go:22: log output \"\" does not contain \"notify: order o-1 for c-9 failed\"\nFAIL\nFAIL\texample.com/orders/internal/notify\t0.006s\n", 1)
			g.respond(thinking("This test captured the global log output with log.SetOutput. With slog it should pass a logger writing to a buffer and check the attributes instead."),
				text("`TestHandleLogs` captured the global logger's output. Rewriting it to hand the service a text slog logger on a buffer and check the attributes."))
			g.edit(nil, "internal/notify/notify_test.go", "\tvar buf bytes.Buffer\n\tlog.SetOutput(&buf)\n\ts := New(slog.New(slog.DiscardHandler))",
				"\tvar buf bytes.Buffer\n\ts := New(slog.New(slog.NewTextHandler(&buf, nil)))", "")
			g.edit(nil, "internal/notify/notify_test.go", "\tif !strings.Contains(buf.String(), \"notify: order o-1 for c-9 failed\") {",
				"\tif !strings.Contains(buf.String(), \"order_id=o-1 customer_id=c-9\") {", "")
		}
		g.bash(nil, fmt.Sprintf("go vet ./internal/%s/ && go test ./internal/%s/", p, p), "Vet and test "+p, fmt.Sprintf("ok  \texample.com/orders/internal/%s\t0.0%02ds\n", p, 3+i), 0)
	}
	// A web lookup: server tool blocks Recall does not model.
	g.prompt("Is slog.DiscardHandler available in Go 1.23? CI still runs 1.23.")
	msgID := g.short("msg_01", 22)
	for _, block := range []map[string]any{
		{"type": "server_tool_use", "id": g.short("srvtoolu_01", 20), "name": "web_search", "input": map[string]any{"query": "go slog.DiscardHandler added version"}},
		{"type": "web_search_tool_result", "tool_use_id": "srvtoolu_x", "content": []any{map[string]any{"type": "web_search_result", "title": "Go 1.24 Release Notes", "url": "https://go.dev/doc/go1.24"}}},
	} {
		u := g.id("assistant")
		g.write(assistantRecord{base: g.base(g.parent), Message: assistantMessage{Model: g.model, ID: msgID, Type: "message", Role: "assistant", Content: []any{block},
			Usage: usage{InputTokens: 4, CacheReadInputTokens: g.ctxTokens, CacheCreation: map[string]int{}, OutputTokens: 30, ServiceTier: "standard"}}, RequestID: g.short("req_011C", 20), Type: "assistant", UUID: u, Timestamp: g.tick(900)})
		g.parent = u
	}
	g.respond(text("No — `slog.DiscardHandler` arrived in Go 1.24. For 1.23 I'll add a small test helper that returns `slog.New(slog.NewTextHandler(io.Discard, nil))` and use it in the tests."))
	g.bash(nil, "grep -rl 'slog.DiscardHandler' --include=*_test.go internal | xargs sed -i 's/slog.New(slog.DiscardHandler)/testlog.Discard()/'", "Use a 1.23-compatible helper", "", 0)
	g.bash(nil, "go vet ./... && go test ./...", "Vet and test everything", "# example.com/orders/internal/billing [example.com/orders/internal/billing.test]\ninternal/billing/billing_test.go:9:7: undefined: testlog\nFAIL\texample.com/orders/internal/billing [build failed]\n", 1)
	g.respond(thinking("I replaced the calls but did not create the testlog package or add the imports."), text("I replaced the calls before creating the helper package. Creating `internal/testlog` and adding the imports."))
	for _, p := range pkgs {
		g.edit(nil, fmt.Sprintf("internal/%s/%s_test.go", p, p), "import (\n\t\"testing\"\n)", "import (\n\t\"testing\"\n\n\t\"example.com/orders/internal/testlog\"\n)", "")
	}
	w := g.respond(g.tool("Write", map[string]any{"file_path": g.cwd + "/internal/testlog/testlog.go", "content": "// Package testlog has logging helpers for tests.\npackage testlog\n\nimport (\n\t\"io\"\n\t\"log/slog\"\n)\n\n// Discard returns a logger that drops everything (slog.DiscardHandler needs Go 1.24).\nfunc Discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }\n"}))[0]
	g.result(w, "File created successfully at: "+g.cwd+"/internal/testlog/testlog.go", false, map[string]any{"type": "create", "filePath": g.cwd + "/internal/testlog/testlog.go"})
	g.bash(nil, "go vet ./... && go test ./...", "Vet and test everything", strings.Repeat("ok  \texample.com/orders/internal/x\t0.005s\n", 3), 0)
	g.bash(nil, "grep -rn '\"log\"' --include=*.go . | grep -v _test.go", "Any standard log imports left?", "", 1)
	g.respond(text("The migration is complete: no package imports `log` any more, every service takes a `*slog.Logger`, errors are logged with `order_id`, `customer_id` and `err` attributes, and the tests pass on Go 1.23 via `testlog.Discard()`."))
	g.write(map[string]any{"type": "system", "subtype": "stop_hook_summary", "hookCount": 1, "hookInfos": []any{map[string]any{"command": "make lint"}}, "timestamp": g.tick(50), "uuid": g.id("hook"), "sessionId": g.session})
	return g
}
