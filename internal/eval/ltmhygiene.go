package eval

import (
	"sort"
	"strings"
)

// DuplicateSimilarity is how alike two entries of one memory document must
// be to count as duplicates: the Jaccard similarity of their sets of
// normalized words. Fixed before any hygiene figure was measured.
const DuplicateSimilarity = 0.8

// TypeHygiene is the hygiene of one memory type's documents.
type TypeHygiene struct {
	Type    string `json:"type"`
	Entries int    `json:"entries"`
	// Ungrounded entries hold a word no message of the user's sessions
	// holds: something the memory says that nobody said.
	Ungrounded int `json:"ungrounded"`
	// Duplicates are entries at least DuplicateSimilarity alike to an
	// earlier entry of the same document.
	Duplicates int `json:"duplicates"`
	// DuplicatesPercent is Duplicates in percent of Entries.
	DuplicatesPercent float64 `json:"duplicates_percent"`
	// SupersededStated counts the superseded values this type's documents
	// still state.
	SupersededStated int      `json:"superseded_stated"`
	Examples         []string `json:"examples,omitempty"` // a few ungrounded or duplicate entries
}

// Hygiene scores a user's memory documents (content by type) against the
// words of every message of the user's sessions (corpus, Normalize'd
// words) and the values the user replaced later (superseded): it returns
// the per-type figures, by type name, and the superseded values the
// memory still states (anywhere: a memory lists no history, so a value
// it holds is stated as current); each type counts those its own
// documents state.
func Hygiene(docs map[string]string, corpus map[string]bool, superseded []string) ([]TypeHygiene, []string) {
	var out []TypeHygiene
	all := ""
	for typ, content := range docs {
		h := TypeHygiene{Type: typ}
		var seen [][]string
		for _, line := range strings.Split(content, "\n") {
			words := strings.Fields(Normalize(line))
			if len(words) == 0 {
				continue
			}
			h.Entries++
			if !grounded(words, corpus) {
				h.Ungrounded++
				h.example(line)
			}
			if duplicateOf(words, seen) {
				h.Duplicates++
				h.example(line)
			}
			seen = append(seen, words)
		}
		if h.Entries > 0 {
			h.DuplicatesPercent = 100 * float64(h.Duplicates) / float64(h.Entries)
		}
		h.SupersededStated = len(statedIn(content, superseded))
		out = append(out, h)
		all += " " + content
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out, statedIn(all, superseded)
}

// statedIn returns the values content states: a value occurs in it as
// written (case and runs of whitespace aside) and not as part of a longer
// token — "@alder" is not stated by "testdata/alder", "ALDER_" not by
// "alder.pb.go", "kestrel" not by "reports/figures/kestrel/". (The facts'
// scorer matches normalized words, which cannot tell these apart: values
// of different facts that share a word were counted as stated.)
func statedIn(content string, values []string) []string {
	if len(values) == 0 {
		return nil
	}
	text := strings.ToLower(strings.Join(strings.Fields(content), " "))
	var stated []string
	for _, v := range values {
		if statesValue(text, strings.ToLower(strings.Join(strings.Fields(v), " "))) {
			stated = append(stated, v)
		}
	}
	return stated
}

// statesValue reports whether v occurs in text as a whole token (both
// lower case, whitespace collapsed).
func statesValue(text, v string) bool {
	if v == "" {
		return false
	}
	for from := 0; ; {
		i := strings.Index(text[from:], v)
		if i < 0 {
			return false
		}
		i += from
		if !joined(text, i-1, -1) && !joined(text, i+len(v), +1) {
			return true
		}
		from = i + 1
	}
}

// joined reports whether the byte of text at i continues a token past a
// value's edge (dir -1: before it, +1: after it): a letter, digit or
// underscore, or a joining mark (/ . - @ # :) with a letter or digit
// beyond it — a sentence's closing period or a trailing slash ends a
// token, "/kestrel" or ".pb" continues one.
func joined(text string, i, dir int) bool {
	if i < 0 || i >= len(text) {
		return false
	}
	c := text[i]
	if wordByte(c) {
		return true
	}
	if strings.IndexByte("/.-@#:", c) < 0 {
		return false
	}
	j := i + dir
	return j >= 0 && j < len(text) && wordByte(text[j])
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}
func (h *TypeHygiene) example(line string) {
	if len(h.Examples) < 3 {
		if line = strings.TrimSpace(line); len(line) > 160 {
			line = line[:160] + "…"
		}
		h.Examples = append(h.Examples, line)
	}
}

func grounded(words []string, corpus map[string]bool) bool {
	for _, w := range words {
		if !corpus[w] {
			return false
		}
	}
	return true
}

func duplicateOf(words []string, seen [][]string) bool {
	for _, s := range seen {
		if jaccard(words, s) >= DuplicateSimilarity {
			return true
		}
	}
	return false
}

func jaccard(a, b []string) float64 {
	set := map[string]int{}
	for _, w := range a {
		set[w] |= 1
	}
	for _, w := range b {
		set[w] |= 2
	}
	both := 0
	for _, v := range set {
		if v == 3 {
			both++
		}
	}
	return float64(both) / float64(len(set))
}

// AddCorpus adds text's normalized words to corpus.
func AddCorpus(corpus map[string]bool, text string) {
	for _, w := range strings.Fields(Normalize(text)) {
		corpus[w] = true
	}
}
