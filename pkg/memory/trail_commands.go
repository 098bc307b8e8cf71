package memory

import (
	"path"
	"slices"
	"strings"
)

// commandOps returns the file changes of one simple command (its words,
// redirections removed).
func commandOps(cmd []string) []fileOp {
	cmd = stripWrappers(cmd)
	if len(cmd) == 0 {
		return nil
	}
	name := path.Base(cmd[0])
	args := cmd[1:]
	if name == "git" && len(args) > 0 {
		return gitOps(args)
	}
	line := strings.Join(cmd, " ")
	switch name {
	case "mv":
		return moveOps(operands(args), "moved ("+clipUnits(line, 60)+")")
	case "cp":
		return copyOps(operands(args), "copied ("+clipUnits(line, 60)+")")
	case "rm", "unlink":
		return eachOp(opDelete, operands(args), "deleted ("+clipUnits(line, 60)+")")
	case "touch":
		return eachOp(opTouch, operands(args), "touched")
	case "tee":
		op, what := opWrite, "written by tee"
		for _, a := range args {
			if a == "-a" || a == "--append" {
				op, what = opEdit, "appended to by tee -a"
			}
		}
		return eachOp(op, operands(args), what)
	case "truncate":
		return eachOp(opEdit, operandsAfterValue(args, "-s", "--size"), "truncated ("+clipUnits(line, 60)+")")
	case "sed", "perl":
		return inPlaceOps(name, args, line)
	}
	return nil
}

// stripWrappers drops what runs a command without changing it: sudo, env
// and variable assignments, time, nohup, command.
func stripWrappers(cmd []string) []string {
	for len(cmd) > 0 {
		switch c := cmd[0]; {
		case c == "sudo" || c == "time" || c == "nohup" || c == "command" || c == "env" || c == "exec":
			cmd = cmd[1:]
		case strings.Contains(c, "=") && !strings.HasPrefix(c, "-") && !strings.HasPrefix(c, "="):
			cmd = cmd[1:]
		default:
			return cmd
		}
	}
	return cmd
}

// operands are the arguments that are not options (everything after --).
func operands(args []string) []string {
	var out []string
	dash := false
	for _, a := range args {
		switch {
		case dash:
			out = append(out, a)
		case a == "--":
			dash = true
		case strings.HasPrefix(a, "-") && a != "-":
		default:
			out = append(out, a)
		}
	}
	return out
}

// operandsAfterValue is operands with the value of the named options
// removed (truncate -s 0 f: f).
func operandsAfterValue(args []string, opts ...string) []string {
	var rest []string
	for i := 0; i < len(args); i++ {
		if slices.Contains(opts, args[i]) {
			i++
			continue
		}
		rest = append(rest, args[i])
	}
	return operands(rest)
}

func eachOp(op string, paths []string, what string) []fileOp {
	out := make([]fileOp, 0, len(paths))
	for _, p := range paths {
		out = append(out, fileOp{op: op, path: p, what: what})
	}
	return out
}

// destinations pairs each source with where it goes: into the last
// operand when it is a directory (several sources, or a trailing slash),
// else onto it.
func destinations(ops []string) [][2]string {
	if len(ops) < 2 {
		return nil
	}
	dst, srcs := ops[len(ops)-1], ops[:len(ops)-1]
	into := len(srcs) > 1 || strings.HasSuffix(dst, "/") || dst == "." || dst == ".."
	out := make([][2]string, 0, len(srcs))
	for _, s := range srcs {
		to := dst
		if into {
			to = path.Join(dst, path.Base(s))
		}
		out = append(out, [2]string{s, to})
	}
	return out
}

func moveOps(ops []string, what string) []fileOp {
	var out []fileOp
	for _, d := range destinations(ops) {
		out = append(out, fileOp{op: opMove, from: d[0], path: d[1], what: what})
	}
	return out
}

func copyOps(ops []string, what string) []fileOp {
	var out []fileOp
	for _, d := range destinations(ops) {
		out = append(out, fileOp{op: opWrite, path: d[1], what: what})
	}
	return out
}

// gitOps: git mv, git rm (not --cached), git checkout -- and git restore
// (not --staged alone).
func gitOps(args []string) []fileOp {
	sub, rest := args[0], args[1:]
	line := "git " + strings.Join(args, " ")
	switch sub {
	case "mv":
		return moveOps(operands(rest), "moved ("+clipUnits(line, 60)+")")
	case "rm":
		for _, a := range rest {
			if a == "--cached" {
				return nil
			}
		}
		return eachOp(opDelete, operands(rest), "deleted ("+clipUnits(line, 60)+")")
	case "checkout", "restore":
		var paths []string
		dash := sub == "restore"
		for _, a := range rest {
			switch {
			case a == "--":
				dash = true
			case a == "--staged" && sub == "restore":
				return nil
			case dash && !strings.HasPrefix(a, "-"):
				paths = append(paths, a)
			}
		}
		return eachOp(opEdit, paths, "restored ("+clipUnits(line, 60)+")")
	}
	return nil
}

// inPlaceOps: sed -i / --in-place and perl -i edit the files after their
// script.
func inPlaceOps(name string, args []string, line string) []fileOp {
	inPlace, script := false, false
	var files []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-i" || strings.HasPrefix(a, "-i") && name == "sed" || strings.HasPrefix(a, "--in-place") || name == "perl" && strings.HasPrefix(a, "-") && strings.Contains(a, "i") && !strings.HasPrefix(a, "--"):
			inPlace = true
			if name == "perl" && strings.HasSuffix(a, "e") {
				script = true
				i++
			}
		case a == "-e" || a == "--expression" || a == "-f":
			script = true
			i++
		case strings.HasPrefix(a, "-"):
		case !script:
			script = true // the script itself
		default:
			files = append(files, a)
		}
	}
	if !inPlace {
		return nil
	}
	return eachOp(opEdit, files, "edited in place ("+clipUnits(line, 60)+")")
}

// patchOps reads the files an inline patch names: apply_patch's
// "*** Add File: p", "*** Update File: p" (with "*** Move to: q") and
// "*** Delete File: p", and, when diff is set, a unified diff's
// "--- a/p" / "+++ b/p" lines (/dev/null on one side: created or
// deleted).
func patchOps(text string, diff bool) []fileOp {
	if !strings.Contains(text, "*** ") && !(diff && strings.Contains(text, "+++ ")) {
		return nil
	}
	var out []fileOp
	minus := ""
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimRight(l, "\r")
		switch {
		case strings.HasPrefix(l, "*** Add File: "):
			out = append(out, fileOp{op: opWrite, path: strings.TrimSpace(l[14:]), what: "added by a patch"})
		case strings.HasPrefix(l, "*** Update File: "):
			out = append(out, fileOp{op: opEdit, path: strings.TrimSpace(l[17:]), what: "patched"})
		case strings.HasPrefix(l, "*** Delete File: "):
			out = append(out, fileOp{op: opDelete, path: strings.TrimSpace(l[17:]), what: "deleted by a patch"})
		case strings.HasPrefix(l, "*** Move to: ") && len(out) > 0:
			last := &out[len(out)-1]
			last.op, last.from, last.path, last.what = opMove, last.path, strings.TrimSpace(l[13:]), "moved by a patch"
		case !diff:
		case strings.HasPrefix(l, "--- "):
			minus = diffPath(l[4:])
		case strings.HasPrefix(l, "+++ "):
			plus := diffPath(l[4:])
			switch {
			case plus == "" && minus != "":
				out = append(out, fileOp{op: opDelete, path: minus, what: "deleted by a patch"})
			case minus == "" && plus != "":
				out = append(out, fileOp{op: opWrite, path: plus, what: "added by a patch"})
			case plus != "":
				out = append(out, fileOp{op: opEdit, path: plus, what: "patched"})
			}
		}
	}
	return out
}

// diffPath is a unified diff header's path without a/ or b/ and a
// timestamp; "" for /dev/null.
func diffPath(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return ""
	}
	if strings.HasPrefix(s, "a/") || strings.HasPrefix(s, "b/") {
		s = s[2:]
	}
	return s
}
