package sessiongen

import (
	"fmt"
	"strings"
)

func webPrefExports(g *ugen) {
	g.w.prompt("The cart drawer flickers when you change the quantity quickly. Can you reproduce it in a test first? Small thing while you're in there: named exports only in anything new, no default exports, we're turning that lint rule on next sprint. Test first, then we'll talk about the fix.")
	f := g.fileWith("src/hooks/useCart.ts")
	g.w.read([]part{thinking("Read the cart hook the drawer uses.")}, f.path, f.src)
	g.w.create(nil, "src/components/cart/CartDrawer.flicker.test.tsx", "import { act, render } from \"@testing-library/react\";\nimport { expect, it } from \"vitest\";\n\nimport { CartDrawer } from \"./CartDrawer\";\n\nit(\"keeps the drawer mounted across quick quantity changes\", async () => {\n  const { container, rerender } = render(<CartDrawer open />);\n  const first = container.firstChild;\n  for (let q = 1; q <= 5; q++) {\n    await act(async () => rerender(<CartDrawer open quantityOverride={q} />));\n  }\n  expect(container.firstChild).toBe(first);\n});\n")
	g.w.bash(nil, "pnpm vitest run src/components/cart", "Run the cart tests",
		" FAIL  src/components/cart/CartDrawer.flicker.test.tsx > keeps the drawer mounted across quick quantity changes\nAssertionError: expected <div class=\"drawer\">…</div> to be <div class=\"drawer\">…</div> // Object.is equality\n\n Test Files  1 failed | 3 passed (4)\n      Tests  1 failed | 17 passed (18)\n", 1)
	g.w.respond(text("Reproduced: the drawer remounts on every quantity change (the test fails on the identity check), which is the flicker. It's remounting because its `key` is derived from the cart total. Want me to fix that next?"))
	g.add(Fact{Category: CatExtraction, Kind: "preference", Question: "What export style does the user want in new code?", Expect: []string{"named exports"}})
}

func webPrefQueries(g *ugen) {
	g.w.prompt("Can you write tests for the address form validation? Postcode and phone are the ones that break. When you write tests, query by role or label, getByRole and getByLabelText, and use data-testid only as a last resort, our old tests are full of test ids and they rot. Thanks!")
	g.w.create([]part{thinking("Query the inputs through their labels and the submit button by role.")}, "src/components/address/AddressForm.validation.test.tsx",
		"import { render, screen } from \"@testing-library/react\";\nimport userEvent from \"@testing-library/user-event\";\nimport { expect, it } from \"vitest\";\n\nimport { AddressForm } from \"./AddressForm\";\n\nit(\"rejects a malformed postcode\", async () => {\n  render(<AddressForm />);\n  await userEvent.type(screen.getByLabelText(/postcode/i), \"12\");\n  await userEvent.click(screen.getByRole(\"button\", { name: /save/i }));\n  expect(screen.getByRole(\"alert\")).toHaveTextContent(/postcode/i);\n});\n")
	cmd, out := webTests(g)
	g.w.bash(nil, cmd, "Run the tests", out, 0)
	g.w.respond(text("Added the validation tests for postcode and phone; they pass against the current form."))
	g.add(Fact{Category: CatExtraction, Kind: "preference", Question: "How does the user want elements queried in tests?", Expect: []string{"getByRole"}})
}

func webBisect(g *ugen) {
	subject := g.pick("memoize line totals", "share price formatter across cart rows", "move quantity state into CartContext")
	g.w.prompt("The order total is wrong after changing the quantity, it worked in 2.14. Can you bisect it? `pnpm test:unit cart` catches it.")
	sha := func() string {
		return fmt.Sprintf("%08x%08x%08x%08x%08x", g.r.Uint32(), g.r.Uint32(), g.r.Uint32(), g.r.Uint32(), g.r.Uint32())
	}
	var b strings.Builder
	b.WriteString("status: waiting for both good and bad commits\nstatus: waiting for good commit(s), bad commit known\nBisecting: 23 revisions left to test after this (roughly 5 steps)\n")
	for _, left := range []int{11, 5, 2, 0} {
		fmt.Fprintf(&b, "[%s] %s(%s): %s %s\nrunning 'pnpm' 'test:unit' 'cart'\n ✓ src/hooks/useCart.test.ts (%d tests)\nBisecting: %d revisions left to test after this (roughly %d steps)\n", sha(), g.pick("chore", "feat", "fix"), g.word(), g.word(), g.word(), 5+g.r.IntN(20), left, left/2+1)
	}
	bad := sha()
	fmt.Fprintf(&b, "%s is the first bad commit\ncommit %s\nAuthor: Dana Ruiz <dana@example.com>\nDate:   Tue Sep 23 16:02:11 2025 +0200\n\n    refactor(cart): %s\n\n src/hooks/useCart.ts | 14 +++++++-------\n 1 file changed, 7 insertions(+), 7 deletions(-)\nbisect found first bad commit\n", bad, bad, subject)
	g.w.bash([]part{thinking("Let git bisect run the cart tests between v2.14.0 and HEAD.")}, "git bisect start HEAD v2.14.0 && git bisect run pnpm test:unit cart; git bisect reset", "Bisect the regression", b.String(), 0)
	g.add(Fact{Category: CatExtraction, Kind: "value", Question: "Which commit did git bisect find as the first bad one (its subject)?", Expect: []string{subject}})
	g.w.respond(text("Bisect landed on a small refactor of the cart hook (the commit is above, 14 lines in useCart.ts). I'll read that diff next."))
}

func webBundleSize(g *ugen) {
	size := fmt.Sprintf("%d.%02d kB", 100+g.r.IntN(60), g.r.IntN(100))
	g.w.prompt(g.pick("How big is the checkout chunk now that the date library is gone? Run a build.", "Can you build and check the checkout chunk? I want to know what dropping the date library bought us."))
	var b strings.Builder
	b.WriteString("vite v5.4.8 building for production...\ntransforming...\n✓ 1790 modules transformed.\nrendering chunks...\ncomputing gzip size...\n")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, "dist/assets/%s-%08x.js   %d.%02d kB │ gzip: %d.%02d kB\n", pascal(g.word()), g.r.Uint32(), 1+g.r.IntN(90), g.r.IntN(100), 1+g.r.IntN(30), g.r.IntN(100))
		if i == 17 {
			fmt.Fprintf(&b, "dist/assets/checkout-%08x.js   %d.%02d kB │ gzip: %s\n", g.r.Uint32(), 400+g.r.IntN(100), g.r.IntN(100), size)
		}
	}
	b.WriteString("✓ built in 13.61s\n")
	g.w.bash([]part{thinking("Build and look at the checkout chunk's line.")}, "pnpm build", "Build for production", b.String(), 0)
	g.add(Fact{Category: CatExtraction, Kind: "value", Question: "What was the checkout chunk's gzipped size in the latest build?", Expect: []string{size}})
	g.w.respond(text("The checkout chunk is in the list above; it's noticeably smaller than on main, and nothing else grew."))
}

func webSelector(g *ugen) {
	g.w.prompt("So why is the total stale after a quantity change? And how do we fix it properly, not just patch it?")
	f := g.fileWith("src/hooks/useCart.ts")
	g.w.read(nil, f.path, f.src)
	g.w.respond(thinking("lineTotals is memoized on [items], but updateQuantity mutates the item object in place, so the array identity doesn't change and the memo returns the old totals. Adding quantity to the deps is fragile: the next field will have the same bug. The totals are cheap; deriving them in the selector from store state removes the memo entirely."),
		text("`lineTotals` is memoized on `[items]`, but `updateQuantity` mutates the item in place, so the array never changes identity and the memo hands back the old totals. Adding `quantity` to the deps would patch this one field. I'd drop the memo and compute the totals in the `selectCartLines` selector straight from the store state: it's cheap, and there's nothing left to go stale. OK?"))
	g.w.prompt(g.confirm())
	g.w.edit(nil, f.path, "import { useMemo, useState } from \"react\";\n", "import { useState } from \"react\";\n\nimport { selectCartLines } from \"../store/cart\";\n")
	cmd, out := webTests(g)
	g.w.bash(nil, cmd, "Run the tests", out, 0)
	g.w.respond(text("Done: the totals come from the selector now and the regression test passes."))
	g.add(Fact{Category: CatExtraction, Kind: "decision", Question: "How did we decide to fix the stale cart total?", Expect: []string{"selectCartLines"}})
}

func webIntl(g *ugen) {
	g.w.prompt("Delivery dates show the wrong day for customers in Auckland. What's the right fix?")
	f := g.file()
	g.w.read(nil, f.path, f.src)
	g.w.respond(thinking("The API sends a calendar date (2025-10-09) and we parse it as UTC midnight, then format it in the browser's zone with date-fns-tz, so anywhere east of UTC+12 or west of UTC shifts a day. Upgrading date-fns-tz doesn't fix the model. Formatting with the built-in Intl.DateTimeFormat and timeZone 'UTC' keeps the calendar date, and lets us drop date-fns-tz from the bundle."),
		text("The API sends a calendar date, we parse it as UTC midnight and then format it in the browser's time zone, so the day shifts for anyone far enough from UTC. I'd format these with `Intl.DateTimeFormat` and `timeZone: \"UTC\"` (it's a date, not an instant) and drop date-fns-tz from the bundle entirely. Want me to do it?"))
	g.w.prompt(g.confirm())
	g.w.create(nil, "src/utils/deliveryDate.ts", "const fmt = new Intl.DateTimeFormat(undefined, { dateStyle: \"medium\", timeZone: \"UTC\" });\n\nexport function formatDeliveryDate(isoDate: string): string {\n  return fmt.format(new Date(isoDate + \"T00:00:00Z\"));\n}\n")
	cmd, out := webTests(g)
	g.w.bash(nil, cmd, "Run the tests", out, 0)
	g.w.respond(text("Switched the delivery dates over and removed date-fns-tz; tests pass."))
	g.add(Fact{Category: CatExtraction, Kind: "decision", Question: "How did we decide to format delivery dates?", Expect: []string{"Intl.DateTimeFormat"}})
}

func webNewFile(g *ugen) {
	name := g.pick("useDebouncedValue", "useLocalCart", "usePriceFormat")
	path := "src/hooks/" + name + ".ts"
	g.w.prompt(fmt.Sprintf("We copy the same effect-plus-timer code in four components. Pull it into a hook, call it %s, and use it in one component so I can see it.", name))
	g.w.create([]part{thinking("A generic hook with a cleanup on unmount.")}, path, "import { useEffect, useState } from \"react\";\n\nexport function "+name+"<T>(value: T, delayMs = 250): T {\n  const [v, setV] = useState(value);\n  useEffect(() => {\n    const t = setTimeout(() => setV(value), delayMs);\n    return () => clearTimeout(t);\n  }, [value, delayMs]);\n  return v;\n}\n")
	cmd, out := webTests(g)
	g.w.bash(nil, cmd, "Run the tests", out, 0)
	g.add(Fact{Category: CatExtraction, Kind: "path", Question: "Where is the new hook the agent wrote?", Expect: []string{path}})
	g.w.respond(text(g.pick("Done; the hook has a cleanup on unmount and one component uses it.", "Added "+path+" and switched one component to it.")))
}

func webDebounce(g *ugen, step int) {
	path := "src/components/SearchBox.tsx"
	switch step {
	case corrInstruction:
		g.w.prompt("The search box hammers the API on every keystroke. Debounce it at 500ms.")
		g.w.edit(nil, path, "import { useMemo, useState } from \"react\";\n", "import { useMemo, useState } from \"react\";\n\nconst DEBOUNCE_MS = 500;\n")
		g.w.respond(text("Debounced the search box at 500ms."))
		return
	case corrNow:
		g.w.prompt("scratch that, use 300ms, 500 feels laggy when you type.")
	default:
		g.w.prompt(g.pick("Product tried the search box and says it feels laggy. Scratch the 500ms, use 300ms.", "Hmm, about the search debounce: no, 300ms, not 500. It feels sluggish."))
	}
	g.w.edit(nil, path, "const DEBOUNCE_MS = 500;\n", "const DEBOUNCE_MS = 300;\n")
	g.w.respond(text("Changed: the search box debounces at 300ms now."))
	g.add(Fact{Category: CatKnowledgeUpdate, Kind: "correction", Question: "What debounce does the search box use?", Expect: []string{"300ms"}, Superseded: []string{"500ms"}})
}

func webBaseURL(g *ugen, app, pr string, step int) {
	stg, preview := "https://staging."+app+".example.com", "https://pr-"+pr+".preview."+app+".example.com"
	line := func(u string) string { return "    baseURL: process.env.E2E_BASE_URL ?? \"" + u + "\",\n" }
	switch step {
	case corrInstruction:
		g.w.prompt("Point the Playwright tests at " + stg + " by default, I want to run them against this branch's deploy.")
		g.w.edit(nil, "playwright.config.ts", line("http://localhost:5173"), line(stg))
		g.w.respond(text("The Playwright base URL defaults to " + stg + " now."))
		return
	case corrNow:
		g.w.prompt("no — the preview deployment, not staging: " + preview + ". Staging still runs the old API.")
	default:
		g.w.prompt(g.pick("About the Playwright base URL: scratch that, it should be the preview deployment, "+preview+", not staging. Staging has the old API.",
			"The e2e tests are going to staging, that's wrong. No — use "+preview+", this branch's preview."))
	}
	g.w.edit(nil, "playwright.config.ts", line(stg), line(preview))
	g.w.respond(text("Fixed: the e2e tests default to " + preview + "."))
	g.add(Fact{Category: CatKnowledgeUpdate, Kind: "correction", Question: "Which URL should the Playwright tests run against by default?",
		Expect: []string{"pr-" + pr + ".preview." + app + ".example.com"}, Superseded: []string{"staging." + app + ".example.com"}})
}

// webChange is the agent's work on a request: a read, an edit and the tests.
func webChange(old, new, reply string) func(g *ugen) {
	return func(g *ugen) {
		f := g.file()
		g.w.read(nil, f.path, f.src)
		g.w.edit(nil, f.path, old, new)
		cmd, out := webTests(g)
		g.w.bash(nil, cmd, "Run the tests", out, 0)
		g.w.respond(text(reply))
	}
}

var webRequests = []ureq{
	{key: "focus trap", prompt: "Fix the focus trap in the address modal: tab escapes to the page behind it.",
		work: webChange("import styles from \"./styles.module.css\";\n", "import styles from \"./styles.module.css\";\nimport { FocusScope } from \"@react-aria/focus\";\n", "Wrapped the modal content in a focus scope; tab cycles inside it now.")},
	{key: "skeleton loaders", prompt: "Add skeleton loaders to the order history while it fetches, the layout jumps when the data arrives.",
		work: webChange("import styles from \"./styles.module.css\";\n", "import styles from \"./styles.module.css\";\nimport { Placeholder } from \"../ui/Placeholder\";\n", "Added placeholders with the rows' real heights, so nothing jumps.")},
	{key: "coupon field", prompt: "Make the coupon field case-insensitive, support keeps getting tickets about codes typed in lower case.",
		work: webChange("import { useMemo, useState } from \"react\";\n", "import { useMemo, useState } from \"react\";\n\nconst normalizeCode = (s: string) => s.trim().toUpperCase();\n", "Codes are upper-cased and trimmed before validation now.")},
	{key: "aria-labels", prompt: "Add aria-labels to the icon-only buttons in the header, the accessibility audit flagged them.",
		work: webChange("import styles from \"./styles.module.css\";\n", "import styles from \"./styles.module.css\";\nimport { t } from \"../i18n\";\n", "Each icon button has a translated label now.")},
}
