package sessiongen

import (
	"fmt"
	"strings"
)

func dbPrefReversible(g *ugen) {
	g.w.prompt("Can you add a created_by column to payments? Nullable is fine for now, we'll fill it from the audit log later. And a rule for this repo while I think of it: every migration has to be reversible, write a real downgrade even if it's ugly, the deploy tool rolls back on its own when the health check fails. Thanks.")
	f := g.fileWith("app/models/")
	g.w.read([]part{thinking("Check the model, then write the migration with both directions.")}, f.path, f.src)
	g.migration("add_created_by_to_payments", "    op.add_column(\"payments\", sa.Column(\"created_by\", sa.BigInteger(), nullable=True))\n", "    op.drop_column(\"payments\", \"created_by\")\n")
	g.w.respond(text("Added the column with its downgrade; up, down and up again all ran cleanly on the local database."))
	g.add(Fact{Category: CatExtraction, Kind: "preference", Question: "What does the user require of every migration in this repo?", Expect: []string{"reversible"}})
}

func dbPrefConcurrently(g *ugen) {
	g.w.prompt("The customer page is slow, can you add an index on payments (customer_id, created_at)? Always build indexes CONCURRENTLY on this database by the way, we can't lock the payments table during business hours, not even for a minute.")
	g.migration("index_payments_customer_created",
		"    with op.get_context().autocommit_block():\n        op.create_index(\"ix_payments_customer_created\", \"payments\", [\"customer_id\", \"created_at\"], postgresql_concurrently=True)\n",
		"    with op.get_context().autocommit_block():\n        op.drop_index(\"ix_payments_customer_created\", postgresql_concurrently=True)\n")
	g.w.respond(text("Added the index migration, built outside a transaction so it doesn't block writes; it ran up, down and up locally."))
	g.add(Fact{Category: CatExtraction, Kind: "preference", Question: "How does the user want indexes built on this database?", Expect: []string{"CONCURRENTLY"}})
}

func dbTableSize(g *ugen) {
	n := 20 + g.r.IntN(70)
	size := fmt.Sprintf("%d GB", n)
	g.w.prompt(g.pick("How big is the invoices table on the replica now? I need it for the migration plan.", "Can you check the table sizes on the replica? Mostly I care about invoices, for planning the rewrite."))
	rows := [][]string{{"invoices", size, fmt.Sprintf("%d GB", n/2-3), fmt.Sprint(900000 + g.r.IntN(99000))}}
	for i := 0; i < 14; i++ {
		rows = append(rows, []string{g.word() + "s", fmt.Sprintf("%d MB", 900-i*60+g.r.IntN(50)), fmt.Sprintf("%d MB", 400-i*25+g.r.IntN(20)), fmt.Sprint(g.r.IntN(99000))})
	}
	q := "select relname, pg_size_pretty(pg_total_relation_size(relid)) as total, pg_size_pretty(pg_relation_size(relid)) as heap, n_live_tup from pg_stat_user_tables order by pg_total_relation_size(relid) desc limit 15"
	g.w.bash([]part{thinking("Ask the replica for the biggest tables.")}, "psql \"$REPLICA_URL\" -c \""+q+"\"", "List the largest tables", tableOf([]string{"relname", "total", "heap", "n_live_tup"}, rows), 0)
	g.add(Fact{Category: CatExtraction, Kind: "value", Question: "What is the invoices table's total size on the replica?", Expect: []string{size}})
	g.w.respond(text("invoices is by far the largest table, and more than half of it is indexes. Anything that rewrites it will take a while, so we should plan for changes that don't."))
}

func dbRevision(g *ugen) {
	rev := fmt.Sprintf("%012x", g.r.Int64N(1<<48))
	g.w.prompt(g.pick("Which revision is staging at? I think someone applied a migration by hand last week.", "Can you check what alembic thinks staging is at? Something feels off."))
	g.w.bash([]part{thinking("Ask alembic on staging for its current revision.")}, "make alembic ENV=staging ARGS=current", "Show staging's revision",
		"INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\nINFO  [alembic.runtime.migration] Will assume transactional DDL.\n"+rev+"\n", 0)
	g.add(Fact{Category: CatExtraction, Kind: "value", Question: "Which alembic revision is staging currently at?", Expect: []string{rev}})
	g.w.bash(nil, "ls migrations/versions | tail -3", "List the newest migrations", fmt.Sprintf("%012x_%s_%s.py\n%s_%s_%s.py\n%012x_%s_%s.py\n", g.r.Int64N(1<<48), g.word(), g.word(), rev, g.word(), g.word(), g.r.Int64N(1<<48), g.word(), g.word()), 0)
	g.w.respond(text("Staging is one revision behind head, on the second-newest migration, which is what the deploy log says too. Nothing looks applied by hand."))
}

func dbNotValid(g *ugen) {
	g.w.prompt("We need a CHECK that amount_cents >= 0 on invoices, but the table is huge. How do we add it without locking writes for ages?")
	g.w.respond(thinking("ADD CONSTRAINT ... CHECK scans the whole table under an ACCESS EXCLUSIVE lock. Adding it NOT VALID takes the lock only briefly and checks new rows from then on; VALIDATE CONSTRAINT later scans with a SHARE UPDATE EXCLUSIVE lock, which doesn't block reads or writes."),
		text("A plain `ADD CONSTRAINT … CHECK` scans all of invoices while holding a lock that blocks writes. I'd do it in two migrations: first add the constraint as `NOT VALID` (brief lock, new and updated rows are checked from then on), then run `VALIDATE CONSTRAINT` in a second migration, which scans the old rows without blocking writes. Shall I write both?"))
	g.w.prompt(g.confirm())
	g.migration("check_invoice_amount_not_valid", "    op.execute(\"ALTER TABLE invoices ADD CONSTRAINT invoices_amount_nonneg CHECK (amount_cents >= 0) NOT VALID\")\n", "    op.drop_constraint(\"invoices_amount_nonneg\", \"invoices\")\n")
	g.migration("validate_invoice_amount", "    op.execute(\"ALTER TABLE invoices VALIDATE CONSTRAINT invoices_amount_nonneg\")\n", "    pass  # validation has nothing to undo\n")
	g.w.respond(text("Both migrations are in and ran locally; on staging the second one will take a while but won't block writes."))
	g.add(Fact{Category: CatExtraction, Kind: "decision", Question: "How did we decide to add the amount check on invoices?", Expect: []string{"NOT VALID", "VALIDATE CONSTRAINT"}})
}

func dbTwoPhase(g *ugen) {
	g.w.prompt("invoices.tax_region has to become NOT NULL eventually, but most old rows don't have it. What's the safe way to get there?")
	g.w.respond(thinking("Setting NOT NULL now would fail on old rows and would scan the table under an exclusive lock. Add the column nullable now, backfill out of band in batches, and add the constraint once the backfill is verified, using a NOT VALID check to avoid the long lock."),
		text("Not in one step. This migration adds `tax_region` as nullable; a backfill script fills old rows in batches outside the deploy; and the NOT NULL goes in a follow-up migration once the backfill is verified (via a validated CHECK first, so it doesn't hold a long lock). Want me to start with the first migration?"))
	g.w.prompt(g.confirm())
	g.migration("add_tax_region_to_invoices", "    op.add_column(\"invoices\", sa.Column(\"tax_region\", sa.Text(), nullable=True))\n", "    op.drop_column(\"invoices\", \"tax_region\")\n")
	g.w.respond(text("First migration done: the column is nullable for now."))
	g.add(Fact{Category: CatExtraction, Kind: "decision", Question: "When will invoices.tax_region get its NOT NULL constraint?", Expect: []string{"follow-up migration"}})
}

func dbScript(g *ugen) {
	name := g.pick("backfill_tax_region", "reconcile_ledger", "purge_archived")
	path := "scripts/" + name + ".py"
	g.w.prompt(fmt.Sprintf("I need a script for the %s job: batches of a few thousand rows by id range, a sleep between batches, a --dry-run flag, and it must be safe to stop and restart.", strings.ReplaceAll(name, "_", " ")))
	g.w.create([]part{thinking("Resume from the highest id done, which is stored in a small progress table.")}, path,
		"\"\"\""+strings.ReplaceAll(name, "_", " ")+" in id-range batches; safe to stop and restart.\"\"\"\nimport argparse\nimport time\n\nfrom app.db import session\n\nBATCH = 5000\n\n\ndef main() -> None:\n    p = argparse.ArgumentParser()\n    p.add_argument(\"--dry-run\", action=\"store_true\")\n    p.add_argument(\"--sleep\", type=float, default=0.5)\n    a = p.parse_args()\n    with session() as s:\n        start = s.scalar(\"select coalesce(max(last_id), 0) from job_progress where job = :j\", {\"j\": \""+name+"\"})\n        while True:\n            n = run_batch(s, start, start + BATCH, dry_run=a.dry_run)\n            if n == 0:\n                break\n            start += BATCH\n            time.sleep(a.sleep)\n\n\nif __name__ == \"__main__\":\n    main()\n")
	g.w.bash(nil, "python "+path+" --dry-run --sleep 0", "Dry-run the script", "batch 0-5000: 4981 rows (dry run)\nbatch 5000-10000: 4993 rows (dry run)\nbatch 10000-15000: 0 rows (dry run)\n", 0)
	g.add(Fact{Category: CatExtraction, Kind: "path", Question: "Where is the batch script the agent wrote?", Expect: []string{path}})
	g.w.respond(text(g.pick("Added it; it records progress per batch, so stopping and restarting picks up where it left off.", "Wrote "+path+": id-range batches, resumable, --dry-run supported.")))
}

func dbColumnName(g *ugen, step int) {
	switch step {
	case corrInstruction:
		g.w.prompt("Add a currency column to invoices, call it currency_code, char(3), nullable for now.")
		g.migration("add_currency_code_to_invoices", "    op.add_column(\"invoices\", sa.Column(\"currency_code\", sa.CHAR(3), nullable=True))\n", "    op.drop_column(\"invoices\", \"currency_code\")\n")
		g.w.respond(text("Added invoices.currency_code (char(3), nullable); the migration runs both ways."))
		return
	case corrNow:
		g.w.prompt("scratch that, call it iso_currency. That's what the payments service uses and I don't want two names.")
	default:
		g.w.prompt(g.pick("The currency column from earlier: scratch that name, call it iso_currency, that's what the payments service uses. It hasn't shipped, so just change the migration.",
			"No on currency_code after all, the payments team calls it iso_currency and I'd rather match. Rename it in the migration, it's not deployed."))
	}
	g.w.bash(nil, "make db-downgrade && grep -rl currency_code migrations/ app/ | xargs sed -i 's/currency_code/iso_currency/g' && make db-upgrade", "Rename the column in the migration and rerun it",
		"INFO  [alembic.runtime.migration] Running downgrade\nINFO  [alembic.runtime.migration] Running upgrade\n", 0)
	g.w.respond(text("Renamed: the migration adds invoices.iso_currency now, and the model matches."))
	g.add(Fact{Category: CatKnowledgeUpdate, Kind: "correction", Question: "What is the new currency column on invoices called?", Expect: []string{"iso_currency"}, Superseded: []string{"currency_code"}})
}

func dbDryRunTarget(g *ugen, step int) {
	line := func(host string) string { return "dry_run_host = \"" + host + "\"\n" }
	switch step {
	case corrInstruction:
		g.w.prompt("Set the migration dry-run target in migrate.toml to billing-replica-2, I want a feel for timings on real data.")
		g.w.read(nil, "migrate.toml", "[dry_run]\n"+line("localhost")+"statement_timeout = \"30min\"\n")
		g.w.edit(nil, "migrate.toml", line("localhost"), line("billing-replica-2"))
		g.w.respond(text("The dry run now targets billing-replica-2."))
		return
	case corrNow:
		g.w.prompt("no — the staging primary, billing-stg-primary, not the replica. The replica is read-only, the dry run has to write.")
	default:
		g.w.prompt(g.pick("Thinking about the dry run again: scratch the replica, it's read-only and the dry run writes. Use the staging primary, billing-stg-primary.",
			"The dry-run target is wrong, that replica is read-only. No — billing-stg-primary."))
	}
	g.w.edit(nil, "migrate.toml", line("billing-replica-2"), line("billing-stg-primary"))
	g.w.respond(text("Changed: the dry run targets billing-stg-primary."))
	g.add(Fact{Category: CatKnowledgeUpdate, Kind: "correction", Question: "Which database host does the migration dry run target?", Expect: []string{"billing-stg-primary"}, Superseded: []string{"billing-replica-2"}})
}

// dbChange is the agent's work on a request: a migration run both ways.
func dbChange(name, upgrade, downgrade, reply string) func(g *ugen) {
	return func(g *ugen) {
		g.migration(name, upgrade, downgrade)
		g.w.respond(text(reply))
	}
}

var dbRequests = []ureq{
	{key: "partial index", prompt: "Add a partial index on invoices for the unpaid ones only, the dunning job scans for them every five minutes.",
		work: dbChange("partial_index_unpaid_invoices", "    op.execute(\"CREATE INDEX ix_invoices_unpaid ON invoices (due_at) WHERE paid_at IS NULL\")\n", "    op.drop_index(\"ix_invoices_unpaid\")\n", "Added the index on due_at for unpaid invoices.")},
	{key: "legacy_tax_code", prompt: "Drop the legacy_tax_code column from invoices, nothing has read it since the tax service took over.",
		work: dbChange("drop_invoices_legacy_tax_code", "    op.drop_column(\"invoices\", \"legacy_tax_code\")\n", "    op.add_column(\"invoices\", sa.Column(\"legacy_tax_code\", sa.Text(), nullable=True))\n", "Dropped it; the downgrade re-adds it empty.")},
	{key: "updated_at trigger", prompt: "Can you add an updated_at trigger to invoices and payments? Half our code forgets to set it.",
		work: dbChange("updated_at_triggers", "    op.execute(\"CREATE TRIGGER set_updated_at BEFORE UPDATE ON invoices FOR EACH ROW EXECUTE FUNCTION set_updated_at()\")\n", "    op.execute(\"DROP TRIGGER set_updated_at ON invoices\")\n", "Both tables stamp the column on every update now.")},
	{key: "soft-delete", prompt: "Customers need soft-delete: a deleted_at column, and the default queries should skip deleted rows.",
		work: dbChange("customers_deleted_at", "    op.add_column(\"customers\", sa.Column(\"deleted_at\", sa.DateTime(timezone=True), nullable=True))\n", "    op.drop_column(\"customers\", \"deleted_at\")\n", "Added deleted_at; the repository's default query filters on it.")},
}
