package memory

import (
	"path"
	"strings"
)

// What a change does to a file.
const (
	opWrite  = "write"  // written whole: created when the path is new
	opEdit   = "edit"   // changed in place
	opDelete = "delete" // removed
	opMove   = "move"   // moved from From to Path
	opTouch  = "touch"  // created when new, else left as it is
)

// fileOp is one change a tool call or a command makes to a file.
type fileOp struct {
	op, path, from string
	what           string // the change in a phrase
}

// shellWord is a word of a command line, or an operator.
type shellWord struct {
	s  string
	op bool // an operator: && || ; | & newline, or a redirection
}

// ShellFileOps returns the file changes a shell command line makes, as far
// as its words say: mv, git mv, rm, git rm (not --cached), unlink, cp,
// touch, sed -i, perl -i, tee, truncate, git checkout -- / git restore,
// output redirections (> and >>, not to /dev/…), a cd earlier on the line
// (its directory prefixes later relative paths), and inline patches
// (apply_patch's "*** Add File:" lines, a unified diff's ---/+++ lines).
// It does not run or expand anything: globs, variables and command
// substitutions stay as written, and a command it does not know changes
// nothing.
func ShellFileOps(line string) []fileOp {
	ops := patchOps(line, strings.Contains(line, "patch") || strings.Contains(line, "git apply"))
	words := shellWords(line)
	dir := ""
	for start := 0; start < len(words); {
		end := start
		for end < len(words) && !(words[end].op && isSeparator(words[end].s)) {
			end++
		}
		cmd, redirs := splitRedirections(words[start:end])
		for _, r := range redirs {
			ops = append(ops, fileOp{op: r.op, path: joinDir(dir, r.path), what: r.what})
		}
		if len(cmd) >= 2 && cmd[0] == "cd" {
			dir = joinDir(dir, cmd[1])
		}
		for _, o := range commandOps(cmd) {
			o.path, o.from = joinDir(dir, o.path), joinDir(dir, o.from)
			ops = append(ops, o)
		}
		start = end + 1
	}
	return ops
}

func isSeparator(s string) bool {
	switch s {
	case "&&", "||", ";", "|", "&", "\n":
		return true
	}
	return false
}

func joinDir(dir, p string) string {
	if p == "" || dir == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return p
	}
	return path.Join(dir, p)
}

// shellWords splits a command line into words and operators, keeping
// quoted text whole and skipping here-document bodies.
func shellWords(line string) []shellWord {
	var words []shellWord
	var cur strings.Builder
	in, quote := false, byte(0)
	var heredocs []string
	flush := func() {
		if in {
			words = append(words, shellWord{s: cur.String()})
			cur.Reset()
			in = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(line) {
				i++
				cur.WriteByte(line[i])
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(line):
			i++
			if line[i] != '\n' {
				cur.WriteByte(line[i])
				in = true
			}
		case c == ' ' || c == '\t':
			flush()
		case c == '\n':
			flush()
			words = append(words, shellWord{s: "\n", op: true})
			if len(heredocs) > 0 {
				i = skipHeredocs(line, i+1, heredocs) - 1
				heredocs = nil
			}
		case strings.IndexByte("&|;<>", c) >= 0:
			if c == '>' && in && isDigits(cur.String()) {
				cur.Reset() // 2>, the file descriptor
				in = false
			}
			flush()
			j := i + 1
			for j < len(line) && strings.IndexByte("&|;<>", line[j]) >= 0 && j-i < 3 {
				j++
			}
			op := line[i:j]
			words = append(words, shellWord{s: op, op: true})
			i = j - 1
			if op == "<<" || op == "<<-" {
				heredocs = append(heredocs, heredocDelimiter(line[j:]))
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	flush()
	return words
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// heredocDelimiter is the word after << (quotes and a leading - removed).
func heredocDelimiter(rest string) string {
	rest = strings.TrimLeft(rest, " \t-")
	end := strings.IndexAny(rest, " \t\n;&|<>")
	if end < 0 {
		end = len(rest)
	}
	return strings.Trim(rest[:end], `'"`)
}

// skipHeredocs returns the offset after the here-document bodies that
// start at from, each ending at a line that is its delimiter.
func skipHeredocs(line string, from int, delims []string) int {
	for _, d := range delims {
		for from < len(line) {
			end := strings.IndexByte(line[from:], '\n')
			if end < 0 {
				return len(line)
			}
			l := strings.TrimSpace(line[from : from+end])
			from += end + 1
			if l == d {
				break
			}
		}
	}
	return from
}

// splitRedirections separates a simple command's words from its output
// redirections.
func splitRedirections(ws []shellWord) ([]string, []fileOp) {
	var cmd []string
	var ops []fileOp
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if !w.op {
			cmd = append(cmd, w.s)
			continue
		}
		if (w.s == ">" || w.s == ">>" || w.s == "&>" || w.s == ">|") && i+1 < len(ws) && !ws[i+1].op {
			target := ws[i+1].s
			i++
			if strings.HasPrefix(target, "/dev/") || strings.HasPrefix(target, "&") {
				continue
			}
			if w.s == ">>" {
				ops = append(ops, fileOp{op: opEdit, path: target, what: "appended to (>>)"})
			} else {
				ops = append(ops, fileOp{op: opWrite, path: target, what: "written by a redirection (>)"})
			}
		} else if i+1 < len(ws) && !ws[i+1].op && (w.s == "<" || strings.HasPrefix(w.s, "<<") || strings.HasPrefix(w.s, ">&")) {
			i++ // the input file, the here-document's delimiter, 2>&1's 1
		}
	}
	return cmd, ops
}
