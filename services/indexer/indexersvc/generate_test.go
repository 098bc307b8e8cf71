package indexersvc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// answers is a provider answering with texts in order (then errors).
type answers struct {
	texts []string
	reqs  []llm.Request
}

func (a *answers) Name() string  { return "fake" }
func (a *answers) Model() string { return "fake-model" }
func (a *answers) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	a.reqs = append(a.reqs, req)
	if len(a.texts) == 0 {
		return nil, errors.New("no answer left")
	}
	t := a.texts[0]
	a.texts = a.texts[1:]
	return &llm.Response{Text: t}, nil
}

// TestGenerateAsksAgainWithinItsBound: a malformed answer is asked again
// with the error shown to the model; after maxIndexAttempts malformed
// answers generate fails with ErrIndexOutput, having made that many calls.
func TestGenerateAsksAgainWithinItsBound(t *testing.T) {
	good := `{"name": "Fix login", "description": "Fixes the login.", "summary": "Fixed it.", "tags": ["auth"]}`
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	p := &answers{texts: []string{"not json", good}}
	var out events.SessionIndexed
	md, err := (&Indexer{provider: p, log: log}).generate(context.Background(), "hello", &out)
	if err != nil || md.Name == "" || out.Attempts != 2 {
		t.Fatalf("malformed then good: %+v, %v after %d attempts", md, err, out.Attempts)
	}
	last := p.reqs[1].Messages[len(p.reqs[1].Messages)-1]
	if !strings.Contains(last.Content[0].Text, "That answer is invalid") {
		t.Fatalf("the second call does not show the error: %+v", last)
	}

	p = &answers{texts: []string{"a", "b", "c", good}}
	out = events.SessionIndexed{}
	_, err = (&Indexer{provider: p, log: log}).generate(context.Background(), "hello", &out)
	if !errors.Is(err, memory.ErrIndexOutput) || out.Attempts != maxIndexAttempts || len(p.reqs) != maxIndexAttempts ||
		!strings.HasPrefix(err.Error(), "3 answers were not valid metadata") {
		t.Fatalf("always malformed: %v after %d attempts (%d calls), want ErrIndexOutput after %d", err, out.Attempts, len(p.reqs), maxIndexAttempts)
	}

	p = &answers{}
	out = events.SessionIndexed{}
	if _, err = (&Indexer{provider: p, log: log}).generate(context.Background(), "hello", &out); err == nil || len(p.reqs) != 1 ||
		!strings.HasPrefix(err.Error(), "calling fake: ") {
		t.Fatalf("a failed call: %v after %d calls, want it at once", err, len(p.reqs))
	}
}
