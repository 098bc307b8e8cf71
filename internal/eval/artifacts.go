package eval

import (
	"encoding/json"
	"strings"

	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// artifactNear is how many words from a file's path the word saying what
// happened to it may be.
const artifactNear = 8

// Words that say what happened to a file, by what happened.
var (
	wordsDeleted = []string{"deleted", "delete", "removed", "remove", "rm", "unlink"}
	wordsMoved   = []string{"moved", "move", "mv", "renamed", "rename"}
	wordsCreated = []string{"created", "create", "write", "wrote", "written", "new", "added", "add"}
	wordsEdited  = []string{"edited", "edit", "modified", "changed", "updated", "replaced", "sed", "patched", "rewritten", "multiedit", "notebookedit", "appended", "write", "written"}
)

// ArtifactMiss is a changed file a context does not account for.
type ArtifactMiss struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// CheckArtifacts scores the artifact probe of a session against a context:
// every file the transcript's tool calls changed (truth,
// memory.ArtifactsOf) is one point, passed when its path — as the agent
// wrote it, or relative to cwd — occurs within artifactNear words of a word
// saying what happened to it (deleted, moved, created, else edited: the
// last that applies), and for a moved file its old path occurs too. It
// returns the files passed and the misses.
func CheckArtifacts(truth []events.TrailFile, cwd, text string) (pass int, misses []ArtifactMiss) {
	return checkArtifacts(truth, cwd, prepareText(text))
}

func checkArtifacts(truth []events.TrailFile, cwd string, t scoredText) (int, []ArtifactMiss) {
	pass := 0
	var misses []ArtifactMiss
	for _, f := range truth {
		words, fate := wordsEdited, "edited"
		switch {
		case f.Deleted:
			words, fate = wordsDeleted, "deleted"
		case f.From != "":
			words, fate = wordsMoved, "moved"
		case f.Created:
			words, fate = wordsCreated, "created"
		}
		switch {
		case !pathNear(t.norm, pathForms(f.Path, cwd), words):
			misses = append(misses, ArtifactMiss{Path: f.Path, Why: "not said to be " + fate})
		case f.From != "" && !pathNear(t.norm, pathForms(f.From, cwd), nil):
			misses = append(misses, ArtifactMiss{Path: f.Path, Why: "moved, but from where is missing: " + f.From})
		default:
			pass++
		}
	}
	return pass, misses
}

// pathForms are the normalized forms a path may be written in: as it is,
// and relative to cwd when under it.
func pathForms(p, cwd string) []string {
	forms := []string{Normalize(p)}
	if cwd != "" && strings.HasPrefix(p, strings.TrimSuffix(cwd, "/")+"/") {
		forms = append(forms, Normalize(p[len(strings.TrimSuffix(cwd, "/"))+1:]))
	}
	return forms
}

// pathNear reports whether one of forms occurs in norm with one of words
// within artifactNear words before or after it (any occurrence when words
// is nil).
func pathNear(norm string, forms, words []string) bool {
	for _, form := range forms {
		for from := 0; ; {
			i := strings.Index(norm[from:], form)
			if i < 0 {
				break
			}
			i += from
			if words == nil || hasWord(lastWords(norm[:i], artifactNear), words) || hasWord(firstWords(norm[i+len(form):], artifactNear), words) {
				return true
			}
			from = i + 1
		}
	}
	return false
}

func lastWords(s string, n int) []string {
	f := strings.Fields(s[max(0, len(s)-n*24):])
	return f[max(0, len(f)-n):]
}

func firstWords(s string, n int) []string {
	f := strings.Fields(s[:min(len(s), n*24)])
	return f[:min(len(f), n)]
}

func hasWord(ws, words []string) bool {
	for _, w := range ws {
		for _, x := range words {
			if w == x {
				return true
			}
		}
	}
	return false
}

// transcriptArtifacts is the truth of a prepared session's artifact probe
// and its working directory (the first record's cwd).
func transcriptArtifacts(s *sessiongen.Session, transcript []Record) ([]events.TrailFile, string) {
	msgs := make([]*events.Message, 0, len(transcript))
	for _, r := range transcript {
		if r.Message != nil {
			msgs = append(msgs, r.Message)
		}
	}
	var first struct {
		Cwd string `json:"cwd"`
	}
	for _, line := range strings.SplitN(string(s.JSONL), "\n", 20) {
		if json.Unmarshal([]byte(line), &first) == nil && first.Cwd != "" {
			break
		}
	}
	return memory.ArtifactsOf(msgs), first.Cwd
}
