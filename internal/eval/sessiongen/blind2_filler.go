package sessiongen

import (
	"fmt"
	"strings"
)

// lang is how filler code of one language looks and how its project is
// tested and linted: the generic filler turns of the blind2 family.
type lang struct {
	comment string // line comment marker
	// fn writes one function of a source file from three filler words.
	fn func(b *bgen, a, c, d string) string
	// header starts a source file.
	header func(b *bgen, path string) string
	// test is the command that runs the tests, and its output's last line
	// for a package or path.
	test     string
	testLine func(b *bgen, name string) string
	testTail func(b *bgen) string
	// lint is the linter's command and one finding at a path and line.
	lint     string
	lintLine func(b *bgen, path string, line int) string
}

// fillerPool is the files a session's filler turns read and edit: a few
// files, read and edited again and again, as an agent does.
type fillerPool struct {
	lang  *lang
	files []srcFile
}

// source writes a plausible file of 2,500–5,500 tokens.
func (b *bgen) source(l *lang, path string) string {
	var s strings.Builder
	s.WriteString(l.header(b, path))
	target := 10000 + b.r.IntN(12000)
	for s.Len() < target {
		s.WriteString(l.fn(b, b.fw(), b.fw(), b.fw()))
		s.WriteString("\n")
	}
	return s.String()
}

func (b *bgen) newPool(l *lang, paths ...string) *fillerPool {
	p := &fillerPool{lang: l}
	for _, path := range paths {
		p.files = append(p.files, srcFile{path: path, src: b.source(l, path)})
	}
	return p
}

// get returns the pool's file at path (a new one if the pool has none).
func (p *fillerPool) get(b *bgen, path string) *srcFile {
	for i := range p.files {
		if p.files[i].path == path {
			return &p.files[i]
		}
	}
	p.files = append(p.files, srcFile{path: path, src: b.source(p.lang, path)})
	return &p.files[len(p.files)-1]
}

// rename follows a move: later turns read and edit the new path.
func (p *fillerPool) rename(from, to string) {
	for i := range p.files {
		if p.files[i].path == from {
			p.files[i].path = to
		}
	}
}

// remove drops a deleted file from the pool.
func (p *fillerPool) remove(path string) {
	out := p.files[:0]
	for _, f := range p.files {
		if f.path != path {
			out = append(out, f)
		}
	}
	p.files = out
}

// testOutput is a long run of the tests, passing.
func (b *bgen) testOutput(l *lang) string {
	return b.longLog(25+b.r.IntN(70), func(int) string { return l.testLine(b, b.fw()+"_"+b.fw()) }, l.testTail(b))
}

// filler writes one ordinary turn on the pool's files.
func (b *bgen) fillerTurn(p *fillerPool) {
	f := &p.files[b.r.IntN(len(p.files))]
	l := p.lang
	switch b.r.IntN(4) {
	case 0:
		b.w.prompt(pick(b,
			fmt.Sprintf("%s has a lot of duplicated %s handling, can you fold it into one helper? Keep behaviour identical.", f.path, b.fw()),
			fmt.Sprintf("clean up %s a bit — the %s and %s code paths read the same thing twice", f.path, b.fw(), b.fw()),
			fmt.Sprintf("Can you simplify the %s loop in %s? It's hard to follow.", b.fw(), f.path)))
		b.w.read([]part{text("Let me read it first.")}, f.path, f.src)
		b.editLine(nil, f.path, f.src, "", func(s string) string { return s + " " + l.comment + " " + b.fw() + " " + b.fw() })
		f.src += "\n" + l.comment + " " + b.fw() + "\n"
		b.w.bash(nil, l.test, "Run the tests", b.testOutput(l), 0)
		b.w.respond(text(fmt.Sprintf("Folded it into one place in %s; tests still pass.", f.path)))
	case 1:
		o := &p.files[b.r.IntN(len(p.files))]
		b.w.prompt(fmt.Sprintf("Quick question: how does %s get from the %s to the %s? I want to understand it before we change anything.", f.path, b.fw(), b.fw()))
		b.w.read([]part{thinking("Read the file and the one it calls into.")}, f.path, f.src)
		if o.path != f.path {
			b.w.read(nil, o.path, o.src)
		}
		var s strings.Builder
		for i := 0; i < 5+b.r.IntN(6); i++ {
			fmt.Fprintf(&s, "%d. The %s step takes each %s, checks its %s and hands the %s on to the %s.\n", i+1, b.fw(), b.fw(), b.fw(), b.fw(), b.fw())
		}
		b.w.respond(text("Roughly:\n" + s.String()))
	case 2:
		b.w.prompt(pick(b, "run the linter and fix whatever it complains about", "lint is red on my machine, can you look", "Fix the lint warnings please."))
		var out strings.Builder
		for i := 0; i < 8+b.r.IntN(30); i++ {
			g := &p.files[b.r.IntN(len(p.files))]
			out.WriteString(l.lintLine(b, g.path, 10+b.r.IntN(300)) + "\n")
		}
		b.w.bash(nil, l.lint, "Run the linter", out.String(), 1)
		b.multiEdit([]part{text("Most of these are the same two patterns; fixing them in one go.")}, f.path,
			firstLine(f.src, 3), firstLine(f.src, 3)+" "+l.comment+" "+b.fw(), firstLine(f.src, 5), firstLine(f.src, 5)+" "+l.comment+" "+b.fw())
		b.w.bash(nil, l.lint, "Run the linter again", "", 0)
		b.w.respond(text("Lint is clean now."))
	default:
		b.w.prompt(pick(b, "run the full test suite, I want to see it green before we go on", "Tests?", "can you run everything once more"))
		b.w.bash(nil, l.test, "Run the full test suite", b.testOutput(l), 0)
		b.w.respond(text(pick(b, "All green.", "Everything passes.", "The suite passes.")))
	}
}

// firstLine is the n-th non-empty line of src (the last one if there are
// fewer).
func firstLine(src string, n int) string {
	last := ""
	for _, l := range strings.Split(src, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		last = l
		if n--; n <= 0 {
			break
		}
	}
	return last
}
