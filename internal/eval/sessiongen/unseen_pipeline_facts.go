package sessiongen

import (
	"fmt"
	"strings"
)

func pipelineBucket(g *ugen, org string, step int) {
	prod, staging := "s3://"+org+"-lake-prod/reruns/2025-09/", "s3://"+org+"-lake-staging/reruns/2025-09/"
	cfg := "config/rerun.yaml"
	src := "# September re-run of the orders pipeline\nstart: 2025-09-01\nend: 2025-09-30\nsteps: [clean, enrich, load]\noutput_uri: s3://" + org + "-lake-scratch/reruns/tmp/\nworkers: 4\n"
	switch step {
	case corrInstruction:
		g.w.prompt(g.pick("For the September re-run, write the output to "+prod+" and set it in "+cfg+", I'll kick it off tonight.",
			"Set the re-run's output_uri in "+cfg+" to "+prod+" please. I want it ready before I leave."))
		g.w.read(nil, cfg, src)
		g.w.edit(nil, cfg, "output_uri: s3://"+org+"-lake-scratch/reruns/tmp/\n", "output_uri: "+prod+"\n")
		g.w.respond(text("Set `output_uri` to " + prod + " in " + cfg + "."))
		return
	case corrNow:
		g.w.prompt(g.pick("no — the staging bucket, not prod. "+staging+", nothing writes to prod without a review.",
			"Wait, scratch that: use "+staging+". Prod only gets written by the DAG."))
	default:
		g.w.prompt(g.pick("Going back to the September re-run: scratch that bucket, it should write to "+staging+", not prod. We check the output there first.",
			"Hm, about the re-run config: no, the staging bucket, not prod — "+staging+". Nothing writes to prod without a review."))
	}
	g.w.edit(nil, cfg, "output_uri: "+prod+"\n", "output_uri: "+staging+"\n")
	g.w.respond(text("Switched: the re-run writes to " + staging + " now."))
	g.add(Fact{Category: CatKnowledgeUpdate, Kind: "correction", Question: "Which bucket should the September re-run write its output to?",
		Expect: []string{org + "-lake-staging"}, Superseded: []string{org + "-lake-prod"}})
}

func pipelineTable(g *ugen, step int) {
	ddl := func(name string) string {
		return "create table if not exists analytics." + name + " (\n    order_id text not null,\n    source_system text not null,\n    corrected_at timestamptz not null,\n    amount numeric(12, 2) not null,\n    primary key (order_id, source_system, corrected_at)\n);\n"
	}
	switch step {
	case corrInstruction:
		g.w.prompt("We need a table for the corrected late orders. Call it analytics.fct_orders_late: the same key as fct_orders plus corrected_at, and the amount.")
		g.w.create([]part{thinking("Write the DDL next to the other table definitions.")}, "sql/fct_orders_late.sql", ddl("fct_orders_late"))
		g.w.respond(text("Added sql/fct_orders_late.sql with the table definition."))
		return
	case corrNow:
		g.w.prompt("scratch that, name it fct_order_corrections. 'late' confuses the finance people. Same schema.")
	default:
		g.w.prompt(g.pick("About the late orders table: scratch that name, call it analytics.fct_order_corrections. Finance kept reading 'late' as 'delayed'. Same schema.",
			"One change to the table you added earlier: rename it to fct_order_corrections, not the 'late' name, same columns."))
	}
	g.w.bash(nil, "git mv sql/fct_orders_late.sql sql/fct_order_corrections.sql", "Rename the DDL file", "", 0)
	g.w.edit(nil, "sql/fct_order_corrections.sql", "create table if not exists analytics.fct_orders_late (\n", "create table if not exists analytics.fct_order_corrections (\n")
	g.w.respond(text("Renamed: the table is analytics.fct_order_corrections, defined in sql/fct_order_corrections.sql."))
	g.add(Fact{Category: CatKnowledgeUpdate, Kind: "correction", Question: "What is the table for corrected late orders called?",
		Expect: []string{"fct_order_corrections"}, Superseded: []string{"fct_orders_late"}})
}

// pyCheck is the agent's work on a request for a new check module.
func pyCheck(path, what string) func(g *ugen) {
	return func(g *ugen) {
		f := g.fileWith("etl/transforms/clean.py")
		g.w.read([]part{thinking("See what the clean step hands on before adding the check.")}, f.path, f.src)
		src := "\"\"\"" + what + "\"\"\"\nimport logging\n\nimport pandas as pd\n\nlog = logging.getLogger(__name__)\n\n\nclass CheckFailed(Exception):\n    pass\n\n\ndef run(df: pd.DataFrame, **limits) -> None:\n    \"\"\"Raise CheckFailed when the limits are exceeded; log the measured values either way.\"\"\"\n    ...\n"
		g.w.create(nil, path, src)
		cmd, out := g.sc.tools.tests(g)
		g.w.bash(nil, cmd, "Run the tests", out, 0)
		g.w.respond(text("Added " + path + " and wired it after the clean step. Tests pass."))
	}
}

var pipelineRequests = []ureq{
	{key: "null-rate check", prompt: "Add a null-rate check after the clean step: fail the run if more than 2% of rows have no customer_id, and log the rate either way.",
		work: pyCheck("etl/checks/null_rate.py", "Fail the run when too many rows have no customer_id.")},
	{key: "row-count reconciliation", prompt: "I want a row-count reconciliation between the source export and what we load. Log both counts, fail if they differ by more than ten rows.",
		work: pyCheck("etl/checks/reconcile.py", "Compare the source export's row count with the loaded one.")},
	{key: "schema drift alert", prompt: "Can you add a schema drift alert on the partner feed? If a column appears or disappears, log it loudly with the column names and carry on.",
		work: pyCheck("etl/checks/schema_drift.py", "Log columns that appear in or disappear from the partner feed.")},
	{key: "freshness check", prompt: "Add a freshness check: if the newest ordered_at in the raw table is more than six hours old when the DAG starts, fail fast with a clear message.",
		work: pyCheck("etl/checks/freshness.py", "Fail fast when the raw table is stale.")},
}

func pipelineArrowError(g *ugen) {
	g.w.prompt(g.pick("I merged main into the branch, can you run the tests?", "Run the test suite please, main got merged in."))
	fail := "tests/test_enrich.py::test_partner_prices - pyarrow.lib.ArrowInvalid: Could not convert '12,50' with type str: tried to convert to double"
	out := "collected 212 items\n\ntests/test_clean.py ............................                        [ 13%]\ntests/test_enrich.py ....F.............................................    [ 37%]\n" +
		"=================================== FAILURES ===================================\n___________________________ test_partner_prices ____________________________\n\n    def test_partner_prices():\n>       df = enrich.load_partner_prices(FIXTURES / \"partner_prices.csv\")\n\ntests/test_enrich.py:88:\n" +
		"pyarrow/error.pxi:91: in pyarrow.lib.check_status\nE   pyarrow.lib.ArrowInvalid: Could not convert '12,50' with type str: tried to convert to double\n=========================== short test summary info ============================\nFAILED " + fail + "\n========================= 1 failed, 211 passed in 12.40s =========================\n"
	g.w.bash([]part{text("Running the suite.")}, "make test", "Run the tests", out, 1)
	g.w.read([]part{thinking("The failing test loads a fixture; look at its contents.")}, "tests/fixtures/partner_prices.csv", "sku;price;currency\nA-1001;12,50;EUR\nA-1002;7,95;EUR\nA-1003;104,00;EUR\n")
	f := g.fileWith("etl/transforms/clean.py")
	g.w.edit([]part{thinking("The feed uses decimal commas. Parse them explicitly instead of letting pyarrow cast the strings.")}, f.path,
		"def clean(df: pd.DataFrame) -> pd.DataFrame:\n",
		"def parse_eu_decimal(s: pd.Series) -> pd.Series:\n    \"\"\"Parse '1.234,50'-style decimal strings.\"\"\"\n    return pd.to_numeric(s.str.replace(\".\", \"\", regex=False).str.replace(\",\", \".\", regex=False))\n\n\ndef clean(df: pd.DataFrame) -> pd.DataFrame:\n")
	cmd, pass := g.sc.tools.tests(g)
	g.w.bash(nil, cmd, "Run the tests again", pass, 0)
	g.w.respond(text(g.pick("Fixed. The partner price fixture that came in with main uses decimal commas (\"12,50\"), which pyarrow can't cast to double. I added parse_eu_decimal() to clean.py for that feed's price columns; everything passes now.",
		"Fixed — the suite is green again.")))
	g.add(Fact{Category: CatErrorsFixes, Kind: "error_fix", Question: "What broke the tests after main was merged, and what fixed it?", Expect: []string{"ArrowInvalid", "parse_eu_decimal"}})
}

func pipelineUniqueError(g *ugen) {
	g.w.prompt(g.pick("The load task failed on the 4th, can you see why?", "orders_daily went red for the 4th. What happened?"))
	log := "[2025-10-05, 03:22:51 UTC] {taskinstance.py:2905} ERROR - Task failed with exception\nTraceback (most recent call last):\n  File \"/opt/airflow/etl/io/warehouse.py\", line 41, in load\n    conn.execute(sql)\n" +
		"psycopg2.errors.UniqueViolation: duplicate key value violates unique constraint \"fct_orders_pkey\"\nDETAIL:  Key (order_id)=(A-77120 ) already exists.\n[2025-10-05, 03:22:51 UTC] {taskinstance.py:1206} INFO - Marking task as FAILED.\n"
	g.w.bash([]part{thinking("Read the failed task's log.")}, "make logs DAG=orders_daily RUN=2025-10-04 TASK=load", "Show the failed task's log", log, 0)
	q := "select order_id, length(order_id) from staging.orders_raw where trim(order_id) = 'A-77120'"
	g.w.bash([]part{thinking("The key in DETAIL ends in a space. Check whether the raw data has the id twice, once padded.")}, "make sql Q=\""+q+"\"", "Look for padded ids",
		tableOf([]string{"order_id", "length"}, [][]string{{"A-77120", "7"}, {"A-77120 ", "8"}}), 0)
	f := g.fileWith("etl/transforms/clean.py")
	g.w.read(nil, f.path, f.src)
	g.w.edit([]part{text("Stripping the ids before the dedupe, so padded copies collapse into one.")}, f.path,
		"    df = df.dropna(subset=[\"order_id\"])\n",
		"    df = df.dropna(subset=[\"order_id\"])\n    df = normalize_order_ids(df)\n")
	g.w.edit(nil, f.path, "def clean(df: pd.DataFrame) -> pd.DataFrame:\n",
		"def normalize_order_ids(df: pd.DataFrame) -> pd.DataFrame:\n    return df.assign(order_id=df[\"order_id\"].str.strip())\n\n\ndef clean(df: pd.DataFrame) -> pd.DataFrame:\n")
	cmd, pass := g.sc.tools.tests(g)
	g.w.bash(nil, cmd, "Run the tests", pass, 0)
	g.w.respond(text(g.pick("The source sent order A-77120 twice, once with a trailing space, so the dedupe kept both and the insert hit the primary key. clean() now strips order ids (normalize_order_ids) before deduplicating. Tests pass; you can clear the task.",
		"Found it and fixed it; tests pass. You can clear the failed task and it should go through.")))
	g.add(Fact{Category: CatErrorsFixes, Kind: "error_fix", Question: "Why did the load task fail on the 4th, and what was the fix?", Expect: []string{"UniqueViolation", "normalize_order_ids"}})
}

func pipelineNoAlerting(g *ugen) {
	g.w.prompt("Can you bump the retries on the load task to 2? It flakes whenever the warehouse restarts. Side note, we really should page someone when the nightly run fails instead of me noticing at ten in the morning, but I haven't worked out who owns data on-call yet. Leave alerting out for now.")
	f := g.fileWith("etl/dags/")
	g.w.read(nil, f.path, f.src)
	g.w.edit(nil, f.path, "catchup=False) as dag:\n", "catchup=False, default_args={\"retries\": 2}) as dag:\n")
	g.w.respond(text("Set retries to 2. I left alerting alone; when it's clear who owns on-call, the DAG's failure callback is where it would hook in."))
	g.abstain("Which alerting service did the user choose for paging on failed nightly runs?", "pagerduty", "opsgenie", "victorops", "incident.io")
}

func pipelineNoOrchestrator(g *ugen) {
	g.w.prompt("The scheduler restarted twice overnight and runs got stuck in queued. Did anything of ours cause it? Longer term I think we need to get off this self-hosted Airflow, maybe something managed or another orchestrator entirely, but that's a conversation for next quarter, not now.")
	var b strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, "[2025-10-06T0%d:%02d:%02d.%03d+0000] {scheduler_job_runner.py:%d} INFO - %s\n", 1+i/12, i*2%60, g.r.IntN(60), g.r.IntN(1000), 700+g.r.IntN(900), g.pick("Exiting gracefully upon receiving signal 15", "Starting the scheduler", "Resetting orphaned tasks for active dag runs", "Adopting or resetting orphaned tasks"))
	}
	b.WriteString("kernel: Out of memory: Killed process 2114 (airflow schedul) total-vm:6120404kB, anon-rss:3981220kB\n")
	g.w.bash([]part{thinking("Check the scheduler's logs and the node's kernel log around the restarts.")}, "make logs COMPONENT=scheduler SINCE=12h", "Show the scheduler's logs", b.String(), 0)
	g.w.respond(text("Nothing of ours: the scheduler was OOM-killed by the kernel twice, and the queued runs are the orphaned ones it reset on restart. Giving it more memory would stop it for now. I won't touch the orchestration question."))
	g.abstain("Which orchestrator did the user decide to move the pipeline to?", "dagster", "prefect", "mage", "argo", "luigi", "mwaa", "cloud composer")
}

func pipelineLatest(g *ugen) {
	f := g.fileWith("etl/transforms/clean.py")
	if g.r.IntN(2) == 0 {
		g.latestRequest("OK, last thing before I go: the enrich step should skip partner feeds that are marked paused in the partners table. Something like this, but go through our warehouse helper rather than raw SQL:\n\n```python\npaused = {p.id for p in partners if p.status == \"paused\"}\ndf = df[~df[\"partner_id\"].isin(paused)]\n```\n\nAdd a test for it too, and don't touch the DAG schedule.",
			g.fileWith("etl/transforms/enrich.py"), "Find where enrich reads the partner feeds, then how the warehouse helper reads the partners table.")
		return
	}
	g.latestRequest("Last thing for today. The dedupe in clean.py keeps the first row per order, but the later rows are the corrected ones, so it should keep the latest by updated_at. Roughly:\n\n```python\ndf = (\n    df.sort_values(\"updated_at\")\n      .drop_duplicates(subset=[\"order_id\"], keep=\"last\")\n)\n```\n\nAdd a test with two versions of the same order and check the old one is dropped. Don't push, I'll review it in the morning.",
		f, "Read the current dedupe in clean.py, then write the test first.")
}
