package sessiongen

// The holdout family's phrasings. They were written without reading the
// offline provider's rules (STYLE.md lesson 22) and must not be changed to
// make those rules pass: every template says its fact another way, and none
// relies on a marker word.

// preferenceSay states the commit-tag preference inside a long message.
var preferenceSay = []string{
	"every commit subject needs to begin with %s because the release tooling keys on it",
	"please prefix each commit you make with %s, it is how the changelog bot finds our work",
	"the changelog job only picks up commits whose message opens with %s, so do that for all of them",
	"when you commit, lead the message with %s — the auditors grep for it",
}

// instructionSay sets the export path and the preview port.
var instructionSay = []string{
	"Have the exporter write to %s by default, and serve previews on port %d.",
	"Default output goes in %s; the preview server listens on %d.",
	"Point the export at %s and bind the preview server to %d for now.",
}

// pathUpdateSay moves the export without a marker word.
var pathUpdateSay = []string{
	"Let's have the export land in %s from now on — the ops team collects from there.",
	"The export file belongs in %s; please move it there.",
	"Make the default export location %s.",
	"Ops wants the file at %s, so point the exporter there.",
}

// portUpdateSay moves the preview port; the second one names the old port
// after the new one, as people do.
var portUpdateSay = []string{
	"Preview should run on port %[1]d.",
	"Use %[1]d for the preview server — %[2]d clashes with the metrics sidecar.",
	"Move the preview server over to %[1]d.",
	"Please serve previews on %[1]d from here on.",
}

// integrationAsk asks for the integration run and its row count without a
// digit.
var integrationAsk = []string{
	"Can you check the importer's integration suite still works, and what the big fixture comes out to?",
	"Kick off the integration tests for the importer; I want to know how large the big fixture is once loaded.",
	"Is the importer integration suite still green? Curious how many rows big.csv turns into.",
}

// rowsLine is the line of the integration output that carries the count.
var rowsLine = []string{
	"    import_test.go:88: big.csv: %d rows imported, 0 rejected",
	"    import_test.go:91: rows=%d skipped=0 elapsed=2.4s",
	"    import_test.go:77: loaded %d ledger rows from testdata/big.csv",
}

// decisionAsk asks about slow lookups; the answer is only in the code.
var decisionAsk = []string{
	"Year-long reports spend most of their time in rate lookups. Can you make that cheaper?",
	"Rate lookups dominate the profile for annual reports; speed them up please.",
	"The yearly report is slow and the profile points at the rates table. Fix that.",
}

// fixAsk asks to repair the build.
var fixAsk = []string{
	"The merge from upstream went in; get it compiling again.",
	"Something in the last merge broke things, please sort it out.",
	"Make the tree build again after that merge.",
}

// validatorAsk asks for row validation without naming the function.
var validatorAsk = []string{
	"Rows with a negative amount or no category should never get imported.",
	"Reject ledger rows that have a negative amount or a blank category before they reach the importer loop.",
	"Guard the import: a negative amount or a missing category makes a row invalid.",
}

// flagAsk and footerAsk are the two requests in a known order.
var flagAsk = []string{
	"Could the report command take a --%s switch?",
	"Please give report a --%s option.",
	"I need a --%s flag on the report command.",
}

var footerAsk = []string{
	"Then put a %s line at the very bottom of the report output.",
	"After that, the report should end with a %s trailer.",
	"Also print %s as the last line of every report.",
}

// monthlyAsk reports the cent-off totals.
var monthlyAsk = []string{
	"A few months come out one cent low in the totals. Track it down.",
	"The March total is a cent short compared to the spreadsheet; figure out why.",
	"Monthly sums drift by a cent here and there, please look into it.",
}

// chatter are the agent's short replies in filler turns: statements with
// small numbers and the words agents use, none of them a planted fact.
var chatter = []string{
	"Fixed %[1]d lint warnings in %[2]s; decided to leave the %[3]s helpers as they are.",
	"Done. %[1]d call sites updated, the %[2]s tests pass.",
	"Looked at %[1]d functions in %[2]s — nothing to change in the %[3]s path.",
	"Resolved: %[1]d places wrapped their errors without context in %[2]s; the %[3]s loop is fine.",
}

// fillerLead are sentences of a long message around a planted phrase.
var fillerLead = []string{
	"Some background before you start: the %s code was written in a hurry and the %s handling is uneven.",
	"We mostly care about the %s path; the %s bits are rarely used.",
	"Keep the diffs small and run the %s tests after each change to the %s code.",
	"Nobody has touched the %s package in months, so expect some dust around the %s helpers.",
	"If something looks odd in the %s loop, ask before rewriting the %s logic.",
	"The %s totals feed the monthly %s review, so correctness beats speed.",
}
