package sessiongen

import (
	"fmt"
	"strings"
)

// pipelineScenario: a Python (pandas, Airflow) pipeline that loads orders
// into a warehouse.
var pipelineScenario = uscenario{
	projects: []string{"orders-etl", "retail-pipeline", "ledger-sync"},
	branches: []string{"fix/late-orders", "feature/partner-feeds", "main"},
	users:    []string{"maya", "tkoch", "dev"},
	words: []string{"store", "region", "invoice", "shipment", "basket", "channel", "coupon", "refund", "visit", "device",
		"campaign", "payout", "vendor", "sku", "price", "stock", "cart", "carrier", "warehouse", "tax"},
	files: pipelineFiles,
	tools: utooling{
		tests: func(g *ugen) (string, string) {
			var fs []string
			for i := 0; i < 6+g.r.IntN(8); i++ {
				fs = append(fs, "tests/test_"+g.word()+".py")
			}
			return "make test", g.pytestOutput(fs)
		},
		lint:     func(g *ugen, f ufile) (string, string, string, string, string) { return g.ruffLint(f) },
		testFor:  func(g *ugen, f ufile, topic string) (string, string) { return g.pyTestFile(f, topic) },
		grepLine: pyGrepLine,
		inspect:  pipelineInspect,
	},
	plants: pipelinePlants,
	latest: pipelineLatest,
	work:   "the orders pipeline (pandas transforms and Airflow DAGs)",
}

func pipelineFiles(g *ugen) []ufile {
	paths := []string{"etl/dags/orders_daily.py", "etl/io/warehouse.py", "etl/transforms/clean.py", "etl/transforms/enrich.py"}
	for i := 0; i < 4; i++ {
		paths = append(paths, fmt.Sprintf("etl/%s/%s_%s.py", g.pick("transforms", "io", "dags"), g.word(), g.word()))
	}
	var out []ufile
	seen := map[string]bool{}
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			out = append(out, ufile{path: p, src: g.pySource(p)})
		}
	}
	return out
}

// pySource writes a plausible pandas module of 3,000–6,000 tokens.
func (g *ugen) pySource(path string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\"\"\"%s and %s steps of the pipeline.\"\"\"\nfrom __future__ import annotations\n\nimport logging\nimport os\n\nimport pandas as pd\n\nlog = logging.getLogger(__name__)\n\n", g.word(), g.word())
	switch {
	case strings.Contains(path, "/dags/"):
		fmt.Fprintf(&b, "from airflow import DAG\n\nwith DAG(\"%s_daily\", schedule=\"0 3 * * *\", catchup=False) as dag:\n    pass\n\n", g.word())
	case path == "etl/io/warehouse.py":
		b.WriteString("\ndef load(df: pd.DataFrame, table: str, conn) -> int:\n    \"\"\"Append df to table and return the row count.\"\"\"\n    sql = f\"insert into {table} select * from {staging_name(table)}\"\n    conn.execute(sql)\n    return len(df)\n\n")
		b.WriteString("\ndef write_parquet(df: pd.DataFrame, uri: str) -> None:\n    df.to_parquet(uri, partition_cols=[\"ingest_date\"])\n\n")
	case path == "etl/transforms/clean.py":
		b.WriteString("\ndef clean(df: pd.DataFrame) -> pd.DataFrame:\n    \"\"\"Drop rows we cannot load.\"\"\"\n    df = df.dropna(subset=[\"order_id\"])\n    return df\n\n")
	}
	pad(&b, 12000+g.r.IntN(12000), func() {
		a, c := g.word(), g.word()
		fmt.Fprintf(&b, "\ndef %s_%s(df: pd.DataFrame, *, window: int = %d) -> pd.DataFrame:\n    \"\"\"Return the %s of each %s, keyed by %s_id.\"\"\"\n    if df.empty:\n        return df\n    out = df.copy()\n", a, c, 2+g.r.IntN(30), c, a, a)
		for j, n := 0, 3+g.r.IntN(6); j < n; j++ {
			x, y := g.word(), g.word()
			switch g.r.IntN(4) {
			case 0:
				fmt.Fprintf(&b, "    out[\"%s_total\"] = out.groupby(\"%s_id\")[\"%s_amount\"].transform(\"sum\")\n", x, x, y)
			case 1:
				fmt.Fprintf(&b, "    out = out[out[\"%s_count\"] > %d]\n", x, g.r.IntN(500))
			case 2:
				fmt.Fprintf(&b, "    out = out.sort_values([\"%s_at\", \"%s_id\"])\n", x, y)
			default:
				fmt.Fprintf(&b, "    out[\"%s_%s\"] = out[\"%s_%s\"].fillna(%d)\n", x, y, x, y, g.r.IntN(100))
			}
		}
		fmt.Fprintf(&b, "    log.debug(\"kept %%d %s rows\", len(out))\n    return out\n\n", a)
	})
	return b.String()
}

func pyGrepLine(g *ugen, f ufile, sym string) string {
	return fmt.Sprintf("%s:%d:    out[\"%s\"] = out[\"%s\"].astype(\"int64\")\n", f.path, 20+g.r.IntN(300), sym, sym)
}

func pipelineInspect(g *ugen) (ask, cmd, desc, out, answer string) {
	day := fmt.Sprintf("2025-09-%02d", 1+g.r.IntN(28))
	if g.r.IntN(2) == 0 {
		step := g.word()
		var b strings.Builder
		for i, n := 0, 40+g.r.IntN(120); i < n; i++ {
			fmt.Fprintf(&b, "2025-10-06 %02d:%02d:%02d,%03d INFO etl.transforms.%s: read %d rows from staging.%s_raw, wrote %d\n",
				9+i/600, (i/10)%60, i%60, g.r.IntN(1000), g.word(), 100+g.r.IntN(9000), g.word(), 100+g.r.IntN(9000))
		}
		b.WriteString("2025-10-06 09:31:40,002 INFO etl.run: done\n")
		return fmt.Sprintf("Run the %s step locally for %s and tell me if anything looks off.", step, day),
			fmt.Sprintf("make run-local DATE=%s STEP=%s", day, step), "Run the step locally", b.String(),
			"The local run finished cleanly: each transform read and wrote about as many rows as it should, and nothing logged a warning."
	}
	x := g.word()
	var rows [][]string
	for i, n := 0, 20+g.r.IntN(60); i < n; i++ {
		rows = append(rows, []string{fmt.Sprintf("%s-%04d", strings.ToUpper(x[:2]), g.r.IntN(10000)), fmt.Sprint(g.r.IntN(9000)), fmt.Sprintf("%d.%02d", g.r.IntN(5000), g.r.IntN(100))})
	}
	q := fmt.Sprintf("select %s_id, count(*) as n, sum(amount) as amount from staging.%s_raw where partition_date = '%s' group by 1 order by 2 desc", x, x, day)
	return fmt.Sprintf("What does the %s distribution look like on %s? Just curious whether a few ids dominate.", x, day),
		"make sql Q=\"" + q + "\"", "Query the staging table", tableOf([]string{x + "_id", "n", "amount"}, rows),
		fmt.Sprintf("It's spread out: no single %s dominates, and the top ids are within a small factor of the median.", x)
}

// pipelinePlants returns the pipeline's planted events.
func pipelinePlants(g *ugen) []*uevent {
	org := g.pick("northwind", "bluefin", "larkspur", "tidewater")
	events := []*uevent{
		{run: g.either(pipelinePrefLogger, pipelinePrefTimezone)},
		{run: g.either(pipelineNulls, pipelineDedupeLog)},
		{run: g.either(pipelineMerge, pipelinePartition)},
		{run: pipelineScript},
		{run: g.either(pipelineArrowError, pipelineUniqueError)},
		{run: g.either(pipelineNoAlerting, pipelineNoOrchestrator)},
	}
	if g.r.IntN(2) == 0 {
		events = append(events, g.correction(func(g *ugen, step int) { pipelineBucket(g, org, step) })...)
	} else {
		events = append(events, g.correction(pipelineTable)...)
	}
	return append(events, g.requestPair(pipelineRequests)...)
}

// either picks one of the ways to plant a fact.
func (g *ugen) either(ways ...func(g *ugen)) func(g *ugen) { return ways[g.r.IntN(len(ways))] }

func pipelinePrefLogger(g *ugen) {
	g.w.prompt(g.pick("The enrich step is crawling on the big partitions — can you profile it and tell me where the time goes? My guess is the row-wise apply. ",
		"Can you profile enrich on a big partition? It's gotten a lot slower since the partner feeds were added. ") +
		"Also, small thing but it bugs me: please don't leave print() calls around for debugging, use the module logger with lazy %s args, our log shipper mangles f-strings with braces in them. Anyway, profiling first.")
	var b strings.Builder
	b.WriteString("         4817233 function calls (4790012 primitive calls) in 41.207 seconds\n\n   Ordered by: cumulative time\n\n   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, "%9d %8.3f %8.3f %8.3f %8.3f %s\n", 1+g.r.IntN(9000), g.r.Float64()*4, g.r.Float64(), g.r.Float64()*30, g.r.Float64(), g.pick("frame.py:9301(apply)", "apply.py:1416(apply_standard)", "enrich.py:88(_row_price)", "series.py:1112(__getitem__)", "generic.py:6204(__finalize__)"))
	}
	g.w.bash([]part{thinking("Profile the enrich step on one large partition with cProfile.")}, "make profile STEP=enrich DATE=2025-09-17", "Profile the enrich step", b.String(), 0)
	g.w.respond(text("You were right: about 80% of the time is the row-wise `apply` calling `_row_price` for every row, mostly pandas overhead per row. Replacing it with a vectorized merge against the price table should take it from ~40 s to a couple of seconds. Want me to do that?"))
	g.add(Fact{Category: CatExtraction, Kind: "preference", Question: "How does the user want debugging output written in this pipeline?", Expect: []string{"module logger"}})
}

func pipelinePrefTimezone(g *ugen) {
	tz := g.pick("Europe/Amsterdam", "America/Chicago", "Australia/Sydney", "Asia/Singapore")
	g.w.prompt("Finance says the daily revenue export looks shifted by a day for late-evening orders. Can you check how we bucket order timestamps? " +
		"Everything in the warehouse stays UTC, that's not changing, but the columns finance actually sees in the export should be in " + tz + ", that's where their team works. " +
		"Start by finding where the bucketing happens, don't change anything yet.")
	f := g.fileWith("etl/transforms/enrich.py")
	g.w.grep([]part{thinking("Find where order timestamps are turned into dates.")}, "\\.dt\\.date|floor\\(\"D\"\\)",
		f.path+":212:    out[\"order_date\"] = out[\"ordered_at\"].dt.date\n"+f.path+":340:    out[\"ship_date\"] = out[\"shipped_at\"].dt.floor(\"D\")\n")
	g.w.read(nil, f.path, f.src)
	g.w.respond(text("The export buckets by `ordered_at.dt.date` on the UTC timestamp (enrich.py line 212), so an order placed late in the evening local time lands on the next day. The fix is to convert only the export's columns before taking the date, and leave the warehouse columns in UTC. I haven't changed anything."))
	g.add(Fact{Category: CatExtraction, Kind: "preference", Question: "Which timezone does the user want for the columns finance sees in the export?", Expect: []string{tz}})
}

func pipelineNulls(g *ugen) {
	g.w.prompt(g.pick("How bad is the null customer_id thing in September? Which day is worst?", "Can you check how many orders came in without a customer_id in September, per day?"))
	worst := 1 + g.r.IntN(28)
	n := 20000 + g.r.IntN(70000)
	var rows [][]string
	for d := 1; d <= 30; d++ {
		nulls, total := g.r.IntN(60), 4000+g.r.IntN(5900)
		if d == worst {
			nulls, total = n, n+total
		}
		rows = append(rows, []string{fmt.Sprintf("2025-09-%02d", d), fmt.Sprint(nulls), fmt.Sprint(total)})
	}
	q := "select partition_date, count(*) filter (where customer_id is null) as null_customers, count(*) as total_rows from staging.orders_raw where partition_date between '2025-09-01' and '2025-09-30' group by 1 order by 1"
	g.w.bash([]part{thinking("Count nulls per partition in the staging table.")}, "make sql Q=\""+q+"\"", "Count null customer ids per day", tableOf([]string{"partition_date", "null_customers", "total_rows"}, rows), 0)
	g.add(Fact{Category: CatExtraction, Kind: "value", Question: "How many rows with a null customer_id did the worst September partition have?", Expect: []string{fmt.Sprint(n)}})
	g.w.respond(text("It's concentrated: one partition accounts for nearly all of the month's nulls, the other days are in the tens. That looks like one bad source file rather than a systematic problem. Want me to look at that day's raw file?"))
}

func pipelineDedupeLog(g *ugen) {
	g.w.prompt(g.pick("Did last night's orders_daily run actually load everything? Check the run log.", "Can you check the log of last night's orders_daily run? I want to know it loaded everything before I tell finance."))
	n := 10000 + g.r.IntN(9000)
	var b strings.Builder
	for i := 0; i < 60+g.r.IntN(60); i++ {
		fmt.Fprintf(&b, "[2025-10-06, 03:%02d:%02d UTC] {taskinstance.py:1157} INFO - %s\n", i/4%60, g.r.IntN(60), g.pick("Dependencies all met", "Starting attempt 1 of 3", "Exporting env vars", "Task exited with return code 0"))
		if i == 37 {
			fmt.Fprintf(&b, "[2025-10-06, 03:%02d:14 UTC] {clean.py:61} WARNING - dropped %d duplicate order_id rows before load\n", i/4%60, n)
		}
	}
	b.WriteString("[2025-10-06, 03:41:09 UTC] {dagrun.py:739} INFO - Marking run <DagRun orders_daily @ 2025-10-05 03:00:00+00:00: scheduled__2025-10-05T03:00:00+00:00, state:running> successful\n")
	g.w.bash([]part{thinking("Read the task logs of the latest DAG run.")}, "make logs DAG=orders_daily RUN=2025-10-05", "Show the run's logs", b.String(), 0)
	g.add(Fact{Category: CatExtraction, Kind: "value", Question: "How many duplicate order_id rows did the dedupe step drop in last night's run?", Expect: []string{fmt.Sprint(n)}})
	g.w.respond(text("Yes: every task succeeded and the run was marked successful at 03:41. The dedupe step dropped its usual batch of duplicate order ids before the load, nothing else logged a warning."))
}

func pipelineMerge(g *ugen) {
	g.w.prompt("Reruns are double counting late-arriving orders. When we rerun a day, the orders that arrived late for earlier days get appended again. What's the cleanest way to stop that?")
	f := g.fileWith("etl/io/warehouse.py")
	g.w.read([]part{thinking("Look at how the loader writes to fct_orders.")}, f.path, f.src)
	g.w.respond(thinking("load() does a plain insert. Deleting and reinserting the run's partition would not remove late orders, because those belong to older partitions. A MERGE on the natural key makes reruns idempotent. order_id alone is not unique: two source systems reuse ids, so the key has to include source_system."),
		text("The loader does a plain `insert … select`, so a rerun appends everything again. Deleting and reinserting the run's partition won't help: late orders land in older partitions. I'd make the load a MERGE into fct_orders keyed on (order_id, source_system), since order ids are only unique per source system, so a rerun updates rows instead of adding them. Should I go ahead?"))
	g.w.prompt(g.confirm())
	g.w.edit(nil, f.path, "    sql = f\"insert into {table} select * from {staging_name(table)}\"\n",
		"    sql = (\n        f\"merge into {table} t using {staging_name(table)} s\"\n        \" on t.order_id = s.order_id and t.source_system = s.source_system\"\n        \" when matched then update set *\"\n        \" when not matched then insert *\"\n    )\n")
	cmd, out := g.sc.tools.tests(g)
	g.w.bash(nil, cmd, "Run the tests", out, 0)
	g.w.respond(text("Done: load() merges now, so rerunning a day updates the rows it already loaded. Tests pass."))
	g.add(Fact{Category: CatExtraction, Kind: "decision", Question: "How did we decide to stop reruns from double counting late orders?", Expect: []string{"MERGE", "source_system"}})
}

func pipelinePartition(g *ugen) {
	g.w.prompt("The curated bucket has tens of thousands of tiny parquet files now and listing it takes forever. Any ideas?")
	g.w.bash([]part{thinking("Measure the file count and sizes per partition first.")}, "make lake-stats PREFIX=curated/orders", "Count files and sizes",
		fmt.Sprintf("partitions: %d\nfiles: %d\nmedian file size: 1.9 MiB\nlargest partition: 6.1 MiB\n", 600+g.r.IntN(300), 4000+g.r.IntN(5000)), 0)
	f := g.fileWith("etl/io/warehouse.py")
	g.w.read(nil, f.path, f.src)
	g.w.respond(thinking("Daily partitions hold about 2 MB each, far below a useful parquet file size. Monthly partitions would give files of 60 MB or so; readers filtering on a day still prune to one month and then filter the column."),
		text("Each day's partition is only ~2 MB, so we write thousands of tiny files. I'd partition by a new `ingest_month` column (YYYY-MM) instead of the date and keep the date as an ordinary column. Files come out around 60 MB, and readers that filter on a day still prune to one month. Want me to change the writer?"))
	g.w.prompt(g.confirm())
	g.w.edit(nil, f.path, "    df.to_parquet(uri, partition_cols=[\"ingest_date\"])\n", "    df = df.assign(ingest_month=df[\"ingest_date\"].astype(str).str[:7])\n    df.to_parquet(uri, partition_cols=[\"ingest_month\"])\n")
	cmd, out := g.sc.tools.tests(g)
	g.w.bash(nil, cmd, "Run the tests", out, 0)
	g.w.respond(text("Changed: the writer partitions by month now. Existing daily partitions stay readable; the next full rewrite will consolidate them."))
	g.add(Fact{Category: CatExtraction, Kind: "decision", Question: "How did we decide to partition the parquet output?", Expect: []string{"ingest_month"}})
}

func pipelineScript(g *ugen) {
	what := g.pick("late_orders", "missing_partitions", "partner_feeds")
	path := "scripts/backfill_" + what + ".py"
	g.w.prompt(fmt.Sprintf("Write a small script to backfill %s for a date range: --start and --end, calling the same transforms as the DAG. Dry run by default, I don't want to load anything by accident.", strings.ReplaceAll(what, "_", " ")))
	src := "\"\"\"Backfill " + strings.ReplaceAll(what, "_", " ") + " between two dates (dry run unless --apply).\"\"\"\nimport argparse\nimport datetime as dt\n\nfrom etl.transforms import clean, enrich\nfrom etl.io import warehouse\n\n\ndef main() -> None:\n    p = argparse.ArgumentParser()\n    p.add_argument(\"--start\", type=dt.date.fromisoformat, required=True)\n    p.add_argument(\"--end\", type=dt.date.fromisoformat, required=True)\n    p.add_argument(\"--apply\", action=\"store_true\")\n    a = p.parse_args()\n    day = a.start\n    while day <= a.end:\n        df = enrich.enrich(clean.clean(warehouse.read_raw(day)))\n        if a.apply:\n            warehouse.load(df, \"fct_orders\", warehouse.connect())\n        print(f\"{day}: {len(df)} rows{'' if a.apply else ' (dry run)'}\")\n        day += dt.timedelta(days=1)\n\n\nif __name__ == \"__main__\":\n    main()\n"
	g.w.create([]part{thinking("Reuse the DAG's transforms; dry run unless --apply.")}, path, src)
	g.w.bash(nil, "python "+path+" --start 2025-09-01 --end 2025-09-03", "Dry-run the script", "2025-09-01: 8133 rows (dry run)\n2025-09-02: 7920 rows (dry run)\n2025-09-03: 8412 rows (dry run)\n", 0)
	g.add(Fact{Category: CatExtraction, Kind: "path", Question: "Where is the backfill script the agent wrote?", Expect: []string{path}})
	g.w.respond(text(g.pick("Added the script. It only prints what it would load unless you pass --apply.", "Done: "+path+" dry-runs by default; pass --apply to load.")))
}
