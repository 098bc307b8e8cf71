package sessiongen

import (
	"fmt"
	"strings"
)

// webScenario: a React and TypeScript storefront, hunting a cart bug.
var webScenario = uscenario{
	projects: []string{"storefront-web", "shop-frontend", "checkout-ui"},
	branches: []string{"fix/cart-total", "bug/stale-quantity", "main"},
	users:    []string{"lena", "pk", "frontend"},
	words: []string{"banner", "tile", "badge", "drawer", "tooltip", "carousel", "avatar", "breadcrumb", "footer", "sidebar",
		"wishlist", "review", "rating", "facet", "swatch", "gallery", "toast", "stepper", "menu", "voucher"},
	files: webFiles,
	tools: utooling{
		tests:   webTests,
		lint:    webLint,
		testFor: webTestFile,
		grepLine: func(g *ugen, f ufile, sym string) string {
			return fmt.Sprintf("%s:%d:    const %s = props.%s ?? null;\n", f.path, 5+g.r.IntN(300), sym, sym)
		},
		inspect: webInspect,
	},
	plants: webPlants,
	latest: webLatest,
	work:   "the storefront's React components and cart hooks",
}

func pascal(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

func webFiles(g *ugen) []ufile {
	paths := []string{"src/hooks/useCart.ts", "src/components/SearchBox.tsx", "src/pages/OrderPage.tsx"}
	for i := 0; i < 4; i++ {
		w := pascal(g.word())
		paths = append(paths, g.pick("src/components/"+w+".tsx", "src/components/"+w+pascal(g.word())+".tsx", "src/hooks/use"+w+".ts"))
	}
	var out []ufile
	seen := map[string]bool{}
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			out = append(out, ufile{path: p, src: g.tsSource()})
		}
	}
	return out
}

// tsSource writes React components of 3,000–6,000 tokens.
func (g *ugen) tsSource() string {
	var b strings.Builder
	b.WriteString("import { useMemo, useState } from \"react\";\nimport { useEffect } from \"react\";\n\nimport styles from \"./styles.module.css\";\n\n")
	pad(&b, 12000+g.r.IntN(12000), func() {
		a, c := pascal(g.word()), pascal(g.word())
		x, y := g.word(), g.word()
		fmt.Fprintf(&b, "export interface %s%sProps {\n  items: %sItem[];\n  onSelect?: (id: string) => void;\n}\n\n", a, c, a)
		fmt.Fprintf(&b, "export function %s%s({ items, onSelect }: %s%sProps) {\n  const [open, setOpen] = useState(false);\n  const visible = useMemo(() => items.filter((i) => i.%sCount > %d), [items]);\n", a, c, a, c, x, g.r.IntN(40))
		for i, n := 0, 1+g.r.IntN(4); i < n; i++ {
			z := g.word()
			fmt.Fprintf(&b, "  const %s%s = useMemo(() => visible.reduce((sum, i) => sum + i.%sCount, 0), [visible]);\n", z, pascal(g.word()), z)
		}
		fmt.Fprintf(&b, "  return (\n    <section className={styles.%s} data-open={open}>\n      {visible.map((i) => (\n        <button key={i.id} type=\"button\" onClick={() => { setOpen(!open); onSelect?.(i.id); }}>\n          {i.%sLabel}\n        </button>\n      ))}\n    </section>\n  );\n}\n\n", x, y)
	})
	return b.String()
}

func webTests(g *ugen) (string, string) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n RUN  v2.1.2 %s\n\n", g.w.cwd)
	files, tests := 0, 0
	for i, n := 0, 10+g.r.IntN(25); i < n; i++ {
		k := 2 + g.r.IntN(20)
		fmt.Fprintf(&b, " ✓ src/components/%s%s.test.tsx (%d tests) %dms\n", pascal(g.word()), pascal(g.word()), k, 5+g.r.IntN(290))
		files++
		tests += k
	}
	fmt.Fprintf(&b, "\n Test Files  %d passed (%d)\n      Tests  %d passed (%d)\n   Start at  %02d:%02d:%02d\n   Duration  %d.%02ds (transform 1.02s, setup 0ms, collect 4.10s, tests 2.31s, environment 3.90s, prepare 1.75s)\n\n",
		files, files, tests, tests, 9+g.r.IntN(9), g.r.IntN(60), g.r.IntN(60), 3+g.r.IntN(9), g.r.IntN(100))
	return "pnpm vitest run", b.String()
}

func webLint(g *ugen, f ufile) (cmd, dirty, clean, old, new string) {
	dirty = fmt.Sprintf("\n%s/%s\n  2:10  error  'useEffect' is defined but never used  @typescript-eslint/no-unused-vars\n", g.w.cwd, f.path)
	for i, n := 0, g.r.IntN(3); i < n; i++ {
		dirty += fmt.Sprintf("  %d:%d  warning  Unexpected any. Specify a different type  @typescript-eslint/no-explicit-any\n", 20+g.r.IntN(300), 10+g.r.IntN(40))
	}
	dirty += "\n✖ problems found\n"
	return "pnpm eslint " + f.path, dirty, "", "import { useEffect } from \"react\";\n", ""
}

func webTestFile(g *ugen, f ufile, topic string) (string, string) {
	base := strings.TrimSuffix(strings.TrimSuffix(f.path[strings.LastIndex(f.path, "/")+1:], ".tsx"), ".ts")
	var b strings.Builder
	fmt.Fprintf(&b, "import { render, screen } from \"@testing-library/react\";\nimport { describe, expect, it } from \"vitest\";\n\nimport * as mod from \"./%s\";\n\ndescribe(\"%s\", () => {\n", base, topic)
	for i, n := 0, 4+g.r.IntN(10); i < n; i++ {
		w := g.word()
		fmt.Fprintf(&b, "  it(\"shows the %s %s\", () => {\n    render(<mod.%s%s items={[{ id: \"%d\", %sCount: %d, %sLabel: \"%s\" }]} />);\n    expect(screen.getByText(\"%s\")).toBeInTheDocument();\n  });\n\n", w, g.word(), pascal(w), pascal(g.word()), g.r.IntN(1000), w, g.r.IntN(90), w, w, w)
	}
	b.WriteString("});\n")
	return strings.TrimSuffix(strings.TrimSuffix(f.path, ".tsx"), ".ts") + "." + strings.ReplaceAll(topic, " ", "-") + ".test.tsx", b.String()
}

func webInspect(g *ugen) (ask, cmd, desc, out, answer string) {
	if g.r.IntN(2) == 0 {
		var b strings.Builder
		b.WriteString("vite v5.4.8 building for production...\ntransforming...\n✓ 1843 modules transformed.\nrendering chunks...\ncomputing gzip size...\n")
		for i, n := 0, 40+g.r.IntN(60); i < n; i++ {
			fmt.Fprintf(&b, "dist/assets/%s%s-%08x.js   %d.%02d kB │ gzip: %d.%02d kB\n", pascal(g.word()), pascal(g.word()), g.r.Uint32(), 1+g.r.IntN(90), g.r.IntN(100), 1+g.r.IntN(30), g.r.IntN(100))
		}
		b.WriteString("✓ built in 14.02s\n")
		return "Does the production build still go through? I want to be sure before I open the PR.", "pnpm build", "Build for production", b.String(),
			"Yes, the build succeeds and no chunk crossed the size warning."
	}
	w := g.word()
	var b strings.Builder
	b.WriteString("{\n  \"items\": [\n")
	for i, n := 0, 20+g.r.IntN(40); i < n; i++ {
		fmt.Fprintf(&b, "    { \"id\": \"%s_%04d\", \"%sCount\": %d, \"%sLabel\": \"%s %s\", \"updatedAt\": \"2025-10-0%dT%02d:%02d:00Z\" },\n", w, g.r.IntN(10000), w, g.r.IntN(500), w, g.word(), g.word(), 1+g.r.IntN(5), g.r.IntN(24), g.r.IntN(60))
	}
	b.WriteString("    { \"id\": \"end\" }\n  ],\n  \"next\": null\n}\n")
	return fmt.Sprintf("What does the %s endpoint actually return on the dev API? I think the counts are off.", w),
		fmt.Sprintf("curl -s 'http://api.dev.internal.test/v1/%ss?limit=100' | jq", w), "Fetch the endpoint", b.String(),
		fmt.Sprintf("The counts look right: every %s has a plausible count, and the labels match what the components render.", w)
}

// webPlants returns the web scenario's planted events.
func webPlants(g *ugen) []*uevent {
	events := []*uevent{
		{run: g.either(webPrefExports, webPrefQueries)},
		{run: g.either(webBisect, webBundleSize)},
		{run: g.either(webSelector, webIntl)},
		{run: webNewFile},
		{run: g.either(webTypeError, webResizeObserver)},
		{run: g.either(webNoStore, webNoFlags)},
	}
	if g.r.IntN(2) == 0 {
		events = append(events, g.correction(webDebounce)...)
	} else {
		pr := fmt.Sprint(1000 + g.r.IntN(9000))
		app := g.pick("shop", "store", "market")
		events = append(events, g.correction(func(g *ugen, step int) { webBaseURL(g, app, pr, step) })...)
	}
	return append(events, g.requestPair(webRequests)...)
}

func webTypeError(g *ugen) {
	g.w.prompt(g.pick("Typecheck is failing on CI since the router upgrade, can you fix it?", "pnpm typecheck is red after bumping react-router. Fix please?"))
	g.w.bash([]part{text("Running the type checker.")}, "pnpm tsc --noEmit", "Type-check the project",
		"src/pages/OrderPage.tsx(42,31): error TS2345: Argument of type 'string | undefined' is not assignable to parameter of type 'string'.\n  Type 'undefined' is not assignable to type 'string'.\nsrc/pages/ReturnPage.tsx(18,27): error TS2345: Argument of type 'string | undefined' is not assignable to parameter of type 'string'.\n  Type 'undefined' is not assignable to type 'string'.\n\nFound 2 errors in 2 files.\n", 2)
	f := g.fileWith("src/pages/OrderPage.tsx")
	g.w.read([]part{thinking("The new router types useParams values as possibly undefined. Look at the call site.")}, f.path, f.src)
	g.w.create([]part{thinking("A helper that narrows a route param or throws a 404, used by both pages.")}, "src/router/requireParam.ts",
		"export function requireParam(params: Record<string, string | undefined>, name: string): string {\n  const v = params[name];\n  if (!v) {\n    throw new Response(\"Not Found\", { status: 404 });\n  }\n  return v;\n}\n")
	g.w.edit(nil, f.path, "import { useMemo, useState } from \"react\";\n", "import { useMemo, useState } from \"react\";\nimport { useParams } from \"react-router-dom\";\n\nimport { requireParam } from \"../router/requireParam\";\n")
	g.w.bash(nil, "pnpm tsc --noEmit", "Type-check again", "", 0)
	g.w.respond(text(g.pick("Fixed. The router upgrade types route params as `string | undefined`, and two pages passed them on as `string`. Both now go through a small `requireParam` helper that narrows the value or throws a 404; the type check is clean.",
		"Type check is clean again.")))
	g.add(Fact{Category: CatErrorsFixes, Kind: "error_fix", Question: "What was the type error after the router upgrade and how was it fixed?", Expect: []string{"TS2345", "requireParam"}})
}

func webResizeObserver(g *ugen) {
	g.w.prompt(g.pick("The tests started failing after I bumped the charts library. Can you sort it out?", "Vitest is red since the charts upgrade, have a look?"))
	g.w.bash([]part{text("Running the suite.")}, "pnpm vitest run", "Run the tests",
		" FAIL  src/components/SalesChart.test.tsx > SalesChart > renders the legend\nReferenceError: ResizeObserver is not defined\n ❯ node_modules/.pnpm/recharts@2.13.0/node_modules/recharts/lib/component/ResponsiveContainer.js:84:22\n ❯ commitHookEffectListMount node_modules/.pnpm/react-dom@18.3.1/node_modules/react-dom/cjs/react-dom.development.js:23189:26\n\n Test Files  1 failed | 57 passed (58)\n      Tests  3 failed | 412 passed (415)\n", 1)
	g.w.read([]part{thinking("jsdom has no ResizeObserver; see whether the config has a setup file.")}, "vitest.config.ts",
		"import { defineConfig } from \"vitest/config\";\n\nexport default defineConfig({\n  test: {\n    environment: \"jsdom\",\n    globals: true,\n  },\n});\n")
	g.w.create(nil, "src/test/setup.ts", "import \"@testing-library/jest-dom/vitest\";\n\nclass ResizeObserverStub {\n  observe() {}\n  unobserve() {}\n  disconnect() {}\n}\n\nglobalThis.ResizeObserver ??= ResizeObserverStub as unknown as typeof ResizeObserver;\n")
	g.w.edit(nil, "vitest.config.ts", "    globals: true,\n", "    globals: true,\n    setupFiles: [\"src/test/setup.ts\"],\n")
	cmd, out := webTests(g)
	g.w.bash(nil, cmd, "Run the tests again", out, 0)
	g.w.respond(text(g.pick("Fixed. The new charts version measures its container with ResizeObserver, which jsdom doesn't have. I added a stub in src/test/setup.ts and registered it as a vitest setup file; all green.",
		"All green again.")))
	g.add(Fact{Category: CatErrorsFixes, Kind: "error_fix", Question: "Why did the tests fail after the charts upgrade and what fixed them?", Expect: []string{"ResizeObserver", "src/test/setup.ts"}})
}

func webNoStore(g *ugen) {
	g.w.prompt("The cart, the wishlist and the user all have their own context provider now and the nesting in App.tsx is getting silly. We might move to a proper store library at some point, but not in this PR and I haven't made up my mind. For now, can you just list which components read which context?")
	var b strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, "src/components/%s%s.tsx:%d:  const %s = useContext(%sContext);\n", pascal(g.word()), pascal(g.word()), 5+g.r.IntN(80), g.word(), g.pick("Cart", "Wishlist", "User"))
	}
	ids := g.w.respond(thinking("Grep for useContext calls."), g.w.tool("Grep", map[string]any{"pattern": "useContext\\(", "output_mode": "content", "-n": true}))
	g.w.result(ids[0], b.String(), false, map[string]any{"mode": "content", "numFiles": 30, "content": b.String()})
	g.w.respond(text("Thirty components read a context directly; most read the cart one. The list above is grouped by file. I haven't changed anything."))
	g.abstain("Which state management library did the user decide to adopt?", "redux", "zustand", "mobx", "jotai", "recoil", "valtio")
}

func webNoFlags(g *ugen) {
	g.w.prompt("Product wants the new checkout behind a feature flag. Nobody has picked a flag service yet, or decided whether we just build a tiny one ourselves, so don't wire anything up. Can you just find the places the new checkout would need a switch?")
	var b strings.Builder
	for i := 0; i < 12; i++ {
		fmt.Fprintf(&b, "src/%s/%s%s.tsx:%d:  <Checkout%s />\n", g.pick("pages", "components"), pascal(g.word()), pascal(g.word()), 10+g.r.IntN(200), pascal(g.word()))
	}
	ids := g.w.respond(g.w.tool("Grep", map[string]any{"pattern": "<Checkout", "output_mode": "content", "-n": true}))
	g.w.result(ids[0], b.String(), false, map[string]any{"mode": "content", "numFiles": 12, "content": b.String()})
	g.w.respond(text("Twelve render sites, listed above; the route in the pages directory is the natural single switch. Nothing wired."))
	g.abstain("Which feature-flag service was chosen for the new checkout?", "launchdarkly", "unleash", "flagsmith", "growthbook", "statsig", "configcat")
}

func webLatest(g *ugen) {
	if g.r.IntN(2) == 0 {
		g.latestRequest("Last one for today. The quantity stepper should clamp to the stock we know about and show a hint when it does. Something along these lines:\n\n```tsx\nconst next = Math.min(requested, line.stock);\nif (next < requested) {\n  setHint(`Only ${line.stock} left`);\n}\n```\n\nKeep the hint text in the i18n file, and add a test for the clamp. No need to touch the API.",
			g.fileWith("src/hooks/useCart.ts"), "Find where the stepper's value reaches the cart hook.")
		return
	}
	g.latestRequest("Before I go: the order page should show a retry button when the order fetch fails instead of the blank screen. Roughly:\n\n```tsx\nif (error) {\n  return <ErrorState onRetry={() => refetch()} />;\n}\n```\n\nUse the existing ErrorState component, and make sure the retry doesn't fire twice on a double click. A test would be nice.",
		g.fileWith("src/pages/OrderPage.tsx"), "Look at how the order page fetches and what it renders on error.")
}
