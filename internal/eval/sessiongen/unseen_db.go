package sessiongen

import (
	"fmt"
	"strings"
)

// dbScenario: schema migrations (Alembic, SQLAlchemy) on a large Postgres
// billing database.
var dbScenario = uscenario{
	projects: []string{"billing-service", "invoicing-api", "accounts-core"},
	branches: []string{"db/invoice-migrations", "feature/currency", "main"},
	users:    []string{"ana", "rgupta", "backend"},
	words: []string{"payment", "customer", "subscription", "plan", "credit", "discount", "account", "dunning", "receipt", "adjustment",
		"charge", "usage", "meter", "seat", "trial", "statement", "refund", "payout", "mandate", "coupon"},
	files: dbFiles,
	tools: utooling{
		tests: func(g *ugen) (string, string) {
			var fs []string
			for i := 0; i < 5+g.r.IntN(8); i++ {
				fs = append(fs, "tests/db/test_"+g.word()+".py")
			}
			return "make db-test", "docker compose up -d postgres-test\n[+] Running 1/1\n ✔ Container billing-postgres-test-1  Running\n" + g.pytestOutput(fs)
		},
		lint:    func(g *ugen, f ufile) (string, string, string, string, string) { return g.ruffLint(f) },
		testFor: func(g *ugen, f ufile, topic string) (string, string) { return g.pyTestFile(f, topic) },
		grepLine: func(g *ugen, f ufile, sym string) string {
			return fmt.Sprintf("%s:%d:    %s = sa.Column(sa.BigInteger, nullable=False)\n", f.path, 10+g.r.IntN(300), sym)
		},
		inspect: dbInspect,
	},
	plants: dbPlants,
	latest: dbLatest,
	work:   "the billing database's schema and its Alembic migrations",
}

func dbFiles(g *ugen) []ufile {
	paths := []string{"app/models/invoice.py", "app/repo/invoice_repo.py"}
	for i := 0; i < 5; i++ {
		w := g.word()
		paths = append(paths, g.pick("app/models/"+w+".py", "app/repo/"+w+"_repo.py", fmt.Sprintf("migrations/versions/%012x_%s_%s.py", g.r.Int64N(1<<48), w, g.word())))
	}
	var out []ufile
	seen := map[string]bool{}
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			out = append(out, ufile{path: p, src: g.dbSource(p)})
		}
	}
	return out
}

// dbSource writes a plausible model, repository or migration module of
// 3,000–6,000 tokens.
func (g *ugen) dbSource(path string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\"\"\"%s and %s persistence.\"\"\"\nfrom __future__ import annotations\n\nimport logging\nimport os\n\nimport sqlalchemy as sa\n", g.word(), g.word())
	if strings.HasPrefix(path, "migrations/versions/") {
		fmt.Fprintf(&b, "from alembic import op\n\nrevision = \"%012x\"\ndown_revision = \"%012x\"\n\n\ndef upgrade() -> None:\n", g.r.Int64N(1<<48), g.r.Int64N(1<<48))
		pad(&b, 10000+g.r.IntN(10000), func() {
			fmt.Fprintf(&b, "    op.add_column(\"%ss\", sa.Column(\"%s_%s\", sa.%s(), nullable=True))\n", g.word(), g.word(), g.word(), g.pick("BigInteger", "Text", "Boolean", "Numeric"))
		})
		b.WriteString("\n\ndef downgrade() -> None:\n    pass\n")
		return b.String()
	}
	b.WriteString("from sqlalchemy.orm import Mapped, mapped_column\n\nfrom app.db import Base\n\nlog = logging.getLogger(__name__)\n\n")
	pad(&b, 12000+g.r.IntN(12000), func() {
		a, c := g.word(), g.word()
		fmt.Fprintf(&b, "\nclass %s%s(Base):\n    __tablename__ = \"%s_%ss\"\n\n    id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)\n", pascal(a), pascal(c), a, c)
		for i, n := 0, 3+g.r.IntN(7); i < n; i++ {
			fmt.Fprintf(&b, "    %s_%s: Mapped[%s] = mapped_column(%s)\n", g.word(), g.word(), g.pick("int", "str", "bool"), g.pick("sa.BigInteger, nullable=False", "sa.Text", "sa.Boolean, server_default=sa.false()", "sa.ForeignKey(\"accounts.id\")"))
		}
		fmt.Fprintf(&b, "\n    def is_%s(self) -> bool:\n        return self.%s_%s is not None\n\n", c, a, g.word())
	})
	return b.String()
}

func dbInspect(g *ugen) (ask, cmd, desc, out, answer string) {
	t := g.word() + "s"
	if g.r.IntN(2) == 0 {
		var rows [][]string
		for i, n := 0, 12+g.r.IntN(20); i < n; i++ {
			rows = append(rows, []string{g.word() + "_" + g.word(), g.pick("bigint", "text", "boolean", "numeric(12,2)", "timestamp with time zone"), "", g.pick("not null", ""), g.pick("", "false", "now()"), g.pick("plain", "extended")})
		}
		return fmt.Sprintf("What does the %s table look like on staging? I don't trust the model file.", t),
			fmt.Sprintf("psql \"$STAGING_RO_URL\" -c '\\d+ %s'", t), "Describe the table",
			fmt.Sprintf("Table \"public.%s\"\n", t) + tableOf([]string{"Column", "Type", "Collation", "Nullable", "Default", "Storage"}, rows),
			fmt.Sprintf("It matches the model apart from column order; nullability and defaults are the same as in the %s model.", t)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Gather  (cost=1000.00..%d.00 rows=%d width=%d) (actual time=%d.%03d..%d.%03d rows=%d loops=1)\n  Workers Planned: 2\n  Workers Launched: 2\n", 1000+g.r.IntN(9000), g.r.IntN(9000), 8+g.r.IntN(200), g.r.IntN(9), g.r.IntN(1000), 10+g.r.IntN(90), g.r.IntN(1000), g.r.IntN(9000))
	for i := 0; i < 8+g.r.IntN(20); i++ {
		fmt.Fprintf(&b, "  ->  Parallel Index Scan using ix_%s_%s on %s  (cost=0.43..%d.%02d rows=%d width=%d) (actual time=0.0%d..%d.%03d rows=%d loops=3)\n        Index Cond: (%s_id = %d)\n", t, g.word(), t, g.r.IntN(900), g.r.IntN(100), g.r.IntN(900), 8+g.r.IntN(90), g.r.IntN(10), g.r.IntN(9), g.r.IntN(1000), g.r.IntN(900), g.word(), g.r.IntN(9000))
	}
	fmt.Fprintf(&b, "Planning Time: 0.%03d ms\nExecution Time: %d.%03d ms\n", g.r.IntN(1000), 1+g.r.IntN(90), g.r.IntN(1000))
	return fmt.Sprintf("Is the %s lookup using the index on staging? Explain it for me.", t),
		fmt.Sprintf("psql \"$STAGING_RO_URL\" -c 'explain analyze select * from %s where %s_id = 42'", t, g.word()), "Explain the query", b.String(),
		"Yes, it's an index scan all the way down and runs in a few milliseconds; no sequential scan anywhere."
}

// dbPlants returns the database scenario's planted events.
func dbPlants(g *ugen) []*uevent {
	events := []*uevent{
		{run: g.either(dbPrefReversible, dbPrefConcurrently)},
		{run: g.either(dbTableSize, dbRevision)},
		{run: g.either(dbNotValid, dbTwoPhase)},
		{run: dbScript},
		{run: g.either(dbEnumError, dbLockTimeout)},
		{run: g.either(dbNoPooler, dbNoArchive)},
	}
	if g.r.IntN(2) == 0 {
		events = append(events, g.correction(dbColumnName)...)
	} else {
		events = append(events, g.correction(dbDryRunTarget)...)
	}
	return append(events, g.requestPair(dbRequests)...)
}

// migration is the agent writing a migration and running it up, down and
// up again against the local database.
func (g *ugen) migration(name, upgrade, downgrade string) string {
	rev := fmt.Sprintf("%012x", g.r.Int64N(1<<48))
	path := "migrations/versions/" + rev + "_" + name + ".py"
	g.w.create(nil, path, "\"\"\""+strings.ReplaceAll(name, "_", " ")+"\"\"\"\nimport sqlalchemy as sa\nfrom alembic import op\n\nrevision = \""+rev+"\"\ndown_revision = \"head\"\n\n\ndef upgrade() -> None:\n"+upgrade+"\n\ndef downgrade() -> None:\n"+downgrade)
	g.w.bash(nil, "make db-upgrade && make db-downgrade && make db-upgrade", "Run the migration up, down and up",
		"INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\nINFO  [alembic.runtime.migration] Will assume transactional DDL.\nINFO  [alembic.runtime.migration] Running upgrade  -> "+rev+", "+strings.ReplaceAll(name, "_", " ")+"\nINFO  [alembic.runtime.migration] Running downgrade "+rev+" -> , "+strings.ReplaceAll(name, "_", " ")+"\nINFO  [alembic.runtime.migration] Running upgrade  -> "+rev+", "+strings.ReplaceAll(name, "_", " ")+"\n", 0)
	return path
}

func dbEnumError(g *ugen) {
	g.w.prompt(g.pick("Run the migrations against the local db, I added the refunded status from the ticket.", "Can you apply the new migrations locally? The refunded-status one is mine."))
	path := fmt.Sprintf("migrations/versions/%012x_add_refunded_status.py", g.r.Int64N(1<<48))
	g.w.bash([]part{text("Applying the migrations.")}, "make db-upgrade", "Apply the migrations",
		"INFO  [alembic.runtime.migration] Running upgrade  -> add_refunded_status\nTraceback (most recent call last):\n  File \""+path+"\", line 14, in upgrade\n    op.execute(\"UPDATE invoices SET status = 'refunded' WHERE refunded_at IS NOT NULL\")\n"+
			"sqlalchemy.exc.NotSupportedError: (psycopg.errors.UnsafeNewEnumValueUsage) unsafe use of new value \"refunded\" of enum type invoice_status\nHINT:  New enum values must be committed before they can be used.\n[SQL: UPDATE invoices SET status = 'refunded' WHERE refunded_at IS NOT NULL]\nmake: *** [Makefile:31: db-upgrade] Error 1\n", 1)
	g.w.read([]part{thinking("The migration adds the enum value and uses it in the same transaction. Read it.")}, path,
		"\"\"\"add refunded status\"\"\"\nfrom alembic import op\n\n\ndef upgrade() -> None:\n    op.execute(\"ALTER TYPE invoice_status ADD VALUE 'refunded'\")\n    op.execute(\"UPDATE invoices SET status = 'refunded' WHERE refunded_at IS NOT NULL\")\n")
	g.w.edit([]part{text("Committing the new enum value on its own before the update uses it.")}, path,
		"    op.execute(\"ALTER TYPE invoice_status ADD VALUE 'refunded'\")\n",
		"    with op.get_context().autocommit_block():\n        op.execute(\"ALTER TYPE invoice_status ADD VALUE IF NOT EXISTS 'refunded'\")\n")
	g.w.bash(nil, "make db-upgrade", "Apply the migrations again", "INFO  [alembic.runtime.migration] Running upgrade  -> add_refunded_status\n", 0)
	g.w.respond(text(g.pick("Fixed. Postgres won't let a transaction use an enum value it added itself, so the UPDATE failed. The ADD VALUE now runs in an autocommit_block (committed on its own, and idempotent with IF NOT EXISTS) before the update; the migration applies cleanly.",
		"Applied cleanly now.")))
	g.add(Fact{Category: CatErrorsFixes, Kind: "error_fix", Question: "What failed when applying the refunded-status migration and how was it fixed?", Expect: []string{"unsafe use of new value", "autocommit_block"}})
}

func dbLockTimeout(g *ugen) {
	g.w.prompt(g.pick("The staging deploy failed in the migration step, can you check?", "Deploy to staging died during migrations. What happened?"))
	g.w.bash(nil, "make deploy-logs ENV=staging STEP=migrate", "Read the migration step's log",
		"INFO  [alembic.runtime.migration] Running upgrade  -> add_invoice_notes\nsqlalchemy.exc.OperationalError: (psycopg.errors.LockNotAvailable) canceling statement due to lock timeout\n[SQL: ALTER TABLE invoices ADD COLUMN notes TEXT]\n(Background on this error at: https://sqlalche.me/e/20/e3q8)\n", 0)
	g.w.bash([]part{thinking("Something held a lock on invoices. Look for long transactions on staging.")}, "psql \"$STAGING_RO_URL\" -c \"select pid, state, now() - xact_start as age, left(query, 60) from pg_stat_activity where xact_start < now() - interval '1 minute'\"", "Find long transactions",
		tableOf([]string{"pid", "state", "age", "left"}, [][]string{{"48121", "active", "00:14:02.1183", "select customer_id, sum(amount_cents) from invoices group by"}}), 0)
	g.w.create([]part{thinking("The ALTER waits behind the report's lock and times out. Retry a few times with a short lock_timeout instead of failing the deploy, and don't queue other writers behind us for long.")}, "migrations/lock_retry.py",
		"import time\n\nfrom alembic import op\n\n\ndef run_with_lock_retry(sql: str, attempts: int = 5, timeout: str = \"3s\") -> None:\n    for i in range(attempts):\n        try:\n            op.execute(f\"SET LOCAL lock_timeout = '{timeout}'\")\n            op.execute(sql)\n            return\n        except Exception:\n            if i == attempts - 1:\n                raise\n            time.sleep(2 ** i)\n")
	cmd, out := g.sc.tools.tests(g)
	g.w.bash(nil, cmd, "Run the database tests", out, 0)
	g.w.respond(text(g.pick("A 14-minute report query was holding a lock on invoices, so the ALTER timed out waiting behind it. Migrations that touch busy tables now go through run_with_lock_retry: a short lock_timeout and a few retries with backoff, so they neither fail the deploy nor stall other writers. Tests pass; re-run the deploy.",
		"Fixed; re-run the deploy and the migration will get through.")))
	g.add(Fact{Category: CatErrorsFixes, Kind: "error_fix", Question: "Why did the staging migration fail and what was changed to fix it?", Expect: []string{"LockNotAvailable", "run_with_lock_retry"}})
}

func dbNoPooler(g *ugen) {
	g.w.prompt("We keep running out of connections at month-end. Someone suggested putting a connection pooler in front of Postgres, someone else wants to just raise max_connections. I'm not deciding that today. Can you show me the connection counts per application right now?")
	var rows [][]string
	for i := 0; i < 12; i++ {
		rows = append(rows, []string{g.word() + "-" + g.pick("api", "worker", "cron"), fmt.Sprint(2 + g.r.IntN(60)), fmt.Sprint(g.r.IntN(40))})
	}
	g.w.bash(nil, "psql \"$STAGING_RO_URL\" -c \"select application_name, count(*), count(*) filter (where state = 'idle') as idle from pg_stat_activity group by 1 order by 2 desc\"", "Count connections per application", tableOf([]string{"application_name", "count", "idle"}, rows), 0)
	g.w.respond(text("Most connections are idle, held open by the workers' pools. That's the number to watch whichever way you go."))
	g.abstain("Which connection pooler did the user choose to put in front of Postgres?", "pgbouncer", "pgcat", "odyssey", "rds proxy", "pgpool")
}

func dbNoArchive(g *ugen) {
	g.w.prompt("At some point we have to get invoices older than seven years out of the primary; legal says we must keep them but nobody reads them. Where they end up is an open question. For now just count them per year.")
	var rows [][]string
	for y := 2012; y <= 2025; y++ {
		rows = append(rows, []string{fmt.Sprint(y), fmt.Sprint(1000 + g.r.IntN(8999))})
	}
	g.w.bash(nil, "psql \"$REPLICA_URL\" -c \"select extract(year from issued_at)::int as year, count(*) from invoices group by 1 order by 1\"", "Count invoices per year", tableOf([]string{"year", "count"}, rows), 0)
	g.w.respond(text("Counts per year are above; everything up to 2018 is past the seven years. I haven't touched anything."))
	g.abstain("Where did the user decide to archive invoices older than seven years?", "glacier", "s3", "bigquery", "snowflake", "cold storage", "parquet")
}

func dbLatest(g *ugen) {
	if g.r.IntN(2) == 0 {
		g.latestRequest("Last thing today: write the migration for an invoice status history table. Something like this:\n\n```sql\ncreate table invoice_status_history (\n  id bigserial primary key,\n  invoice_id bigint not null references invoices(id),\n  status invoice_status not null,\n  changed_at timestamptz not null default now()\n);\n```\n\nIndex (invoice_id, changed_at), and remember the downgrade. Don't run it on staging.",
			g.fileWith("app/models/invoice.py"), "Look at the invoice model, then write the migration.")
		return
	}
	g.latestRequest("One more before I log off. The invoice repository should expose the overdue invoices for the dunning job, oldest first, in pages. Roughly:\n\n```python\ndef overdue(self, before: datetime, limit: int = 500, after_id: int = 0) -> list[Invoice]:\n    ...\n```\n\nKeyset pagination on id, not OFFSET. Add a test against the local database.",
		g.fileWith("app/repo/invoice_repo.py"), "Read the repository to match its query style.")
}
