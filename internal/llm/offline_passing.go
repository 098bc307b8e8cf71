package llm

import (
	"regexp"
	"strings"
)

// The offline provider's reading of what is said in passing (issue 45,
// point 2): a standing instruction or a preference in one clause of a long
// message, a proposal the user accepts with a bare "yes", the line of a
// tool's output that names what failed, and the summary lines at the end of
// a long output. The rules read the grammar of requests (clauses, directive
// and preference markers, imperative verbs, affirmative replies) and the
// shapes of common tools' output (compiler diagnostics, tracebacks, test
// runners, package managers, summary lines), never the words of a
// particular session.

// Bounds of what is said in passing.
const (
	offlineClause    = 200 // a standing instruction kept
	offlineProposal  = 400 // a confirmed proposal kept
	offlineErrorText = 320 // the error lines of a failed call
	offlineMaxSaid   = 24  // standing instructions and confirmations listed
)

// Prefixes of the Task specification's list lines (the next extraction reads
// them back).
const (
	standingPrefix  = "- Standing: "
	confirmedPrefix = "- Confirmed: "
)

var (
	// clauseBreak splits a sentence into clauses: at a semicolon, a dash
	// between words, or a comma before a conjunction or a discourse marker.
	clauseBreak = regexp.MustCompile(`(?i)\s*(;|\s[—–-]\s|,\s+(and|but|so|though|also|plus|oh and|and also)\s|\((by the way|btw)\b|,\s+(by the way|btw|incidentally)\b)\s*`)
	// discourse opens a clause said in passing; it is cut from the clause.
	discourse = regexp.MustCompile(`(?i)^(and|but|so|also|plus|oh|oh and|one more thing|by the way|btw|incidentally|side note|ps|p\.s\.|and by the way|and also|just)\b[,:]?\s*`)
	// directive matches a clause that binds later work: a standing adverb
	// (always, never, from now on, every time), a modal of obligation or
	// preference (must, should, prefer, I'd rather, make sure, don't), or a
	// constraint (only, at most, not allowed, instead of).
	directive = regexp.MustCompile(`(?i)\b(always|never|every ?time|each time|whenever|from now on|going forward|from here on|by default|in (the )?future|prefer(ably|red|s)?|i'?d rather|i would rather|i'?d like|i want|we want|make sure|be sure|remember|keep in mind|don'?t|do not|doesn'?t|avoid|must(n'?t)?|should(n'?t)?|needs? to|ha(ve|s) to|only|not allowed|(is|are) allowed|no more than|at most|at least|stick (to|with)|off.limits|rather than|instead of|under no circumstances)\b`)
	// imperative is a clause that opens with a verb of instruction (after a
	// discourse marker or "please").
	imperative = regexp.MustCompile(`(?i)^(please\s+)?(use|put|keep|write|name|call|store|save|send|post|prefix|start|end|leave|set|pin|tag|format|indent|commit|push|target|default|route|place|log|report|mention|skip|run)\b`)
)

// passingInstructions returns the clauses of a user's message that state a
// standing instruction, a preference or a constraint, each clipped to
// offlineClause characters: wherever they stand in the message, even in the
// second half of a sentence about something else. Questions are left out.
func passingInstructions(text string) []string {
	var out []string
	for _, s := range sentences(text) {
		if strings.HasSuffix(s, "?") {
			continue
		}
		for _, c := range clauses(s) {
			c = strings.TrimSpace(discourse.ReplaceAllString(c, ""))
			if !directive.MatchString(c) && !imperative.MatchString(c) {
				continue
			}
			if len(strings.Fields(c)) < 3 {
				c = s // too short to stand alone: the whole sentence
			}
			c = clip(strings.TrimRight(c, ",;"), offlineClause)
			if !contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// clauses splits a sentence at clauseBreak; the breaks' own words go.
func clauses(s string) []string {
	var out []string
	rest := s
	for {
		loc := clauseBreak.FindStringIndex(rest)
		if loc == nil {
			break
		}
		if p := strings.TrimSpace(rest[:loc[0]]); p != "" {
			out = append(out, p)
		}
		rest = rest[loc[1]:]
	}
	if p := strings.TrimSpace(strings.TrimRight(rest, ")")); p != "" {
		out = append(out, p)
	}
	return out
}

var (
	affirmative = regexp.MustCompile(`(?i)^(yes|yeah|yep|yup|ya|sure|ok|okay|agreed|correct|right|exactly|absolutely|definitely|perfect|great|fine|lgtm|approved|confirmed|go ahead|go for it|do it|do that|please do|sounds (good|great|right)|makes sense|let'?s (do (it|that)|go)|ship it|works for me|that works|👍)\b`)
	negative    = regexp.MustCompile(`(?i)^(no|nope|nah|not)\b|\b(don'?t|hold on|wait|rather not)\b`)
)

// confirms reports whether a user's message accepts what was proposed: a
// short reply (at most 12 words) that opens affirmatively and does not
// refuse.
func confirms(text string) bool {
	t := strings.TrimSpace(strings.Trim(text, "!. "))
	return t != "" && len(strings.Fields(t)) <= 12 && affirmative.MatchString(t) && !negative.MatchString(t)
}

// proposalCue marks the sentences of a reply that propose or give reasons.
var proposalCue = regexp.MustCompile(`(?i)\b(propose|suggest|recommend|i'?d|i would|let'?s|we could|we should|option|plan|go with|switch|instead|because|since|so that|which means|to avoid|trade.?off|rather than|\?)`)

// confirmedLine is the Task specification's line for a proposal the user
// accepted with reply: the proposal whole up to offlineProposal characters,
// else its first sentence and those that propose or give reasons; the
// user's words when they add to a bare yes.
func confirmedLine(proposal, reply string) string {
	p := clip(proposal, offlineProposal+1)
	if len([]rune(p)) > offlineProposal {
		parts := sentences(proposal)
		p = clip(parts[0], offlineProposal/2)
		for _, s := range parts[1:] {
			if !proposalCue.MatchString(s) || len([]rune(p))+3+len([]rune(s)) > offlineProposal {
				continue
			}
			p += " … " + s
		}
	}
	line := confirmedPrefix + p
	if r := clip(reply, 100); len(strings.Fields(r)) > 2 {
		line += " (user: " + r + ")"
	}
	return line
}

// passing notes what a user's message says in passing: the proposal it
// confirms (the agent's latest words) and its standing instructions.
func (d *deriver) passing(text string) {
	if confirms(text) && d.f.latestReply != "" {
		d.addSaid(confirmedLine(d.f.latestReply, text))
		return
	}
	for _, c := range passingInstructions(text) {
		d.addSaid(standingPrefix + c)
	}
}

func (d *deriver) addSaid(line string) {
	if i := indexKey(d.f.said, line, saidKey); i >= 0 {
		d.f.said = append(d.f.said[:i], d.f.said[i+1:]...)
	}
	d.f.said = append(d.f.said, line)
}

// saidKey keys a Task specification line by its words, case and
// punctuation aside.
func saidKey(l string) string {
	return strings.Join(codeTokens(strings.ToLower(l)), " ")
}

// taskSpec is the Task specification: the first request (set once, clipped
// to 600 characters), then the standing instructions and confirmed
// proposals, merged with those the notes hold and bounded like every list
// (the oldest folded into a line counting them). An instruction the first
// request's text already holds is not repeated.
func taskSpec(old string, f facts) string {
	var spec, listed []string
	for _, l := range strings.Split(old, "\n") {
		if strings.HasPrefix(l, standingPrefix) || strings.HasPrefix(l, confirmedPrefix) || foldLine.MatchString(l) {
			listed = append(listed, l)
		} else if strings.TrimSpace(l) != "" {
			spec = append(spec, l)
		}
	}
	head := strings.Join(spec, "\n")
	if head == "" && f.firstRequest != "" {
		head = clip(f.firstRequest, 600)
	}
	have := saidKey(head)
	var add []string
	for _, l := range f.said {
		if k := saidKey(strings.TrimPrefix(strings.TrimPrefix(l, standingPrefix), confirmedPrefix)); !strings.Contains(have, k) {
			add = append(add, l)
		}
	}
	body := mergeLines(strings.Join(listed, "\n"), add, saidKey, nil, offlineMaxSaid, "instructions")
	switch {
	case body == "":
		return head
	case head == "":
		return body
	}
	return head + "\n" + body
}
