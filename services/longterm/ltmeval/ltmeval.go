// Package ltmeval measures long-term memory hygiene: it runs generated
// sessions of a few users through the long-term memory service — the
// real longtermsvc.Run on an embedded NATS server — and scores each user's
// memory after 10, 50 and 200 sessions with eval.Hygiene: entries no
// message grounds, duplicates, superseded values still stated, and what
// the memory costs a new session in tokens. `recall eval --ltm` and
// TestLongTermMemoryHygiene (longtermsvc) run it; docs/eval.md#long-term-memory-hygiene
// has the figures.
//
// Every session is stored as the importer reads the generated Claude Code
// transcript — its messages, after a session.started naming the user —
// and committed through the service's commit API, one session after the
// other per user (users run side by side; a user's memory depends on that
// user's sessions only, so the figures do not depend on the interleaving).
// Sessions carry no session.ended or compaction, so the service queues no
// commit of its own. Only self memory is measured (the families have no
// peers).
package ltmeval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/embedded"
	"github.com/recallhq/recall/internal/eval"
	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/longterm/longtermsvc"
)

// Defaults of Options.
const (
	DefaultSessions = 200
	DefaultTokens   = 14000
	// Tenant is the tenant every user belongs to.
	Tenant = "acme"
)

// Checkpoints are the session counts after which a user's memory is
// scored (those up to Options.Sessions, and Options.Sessions itself).
var Checkpoints = []int{10, 50, 200}

// User is one user of the measure: the sessions of one generated family
// and seed.
type User struct {
	ID     string `json:"user"`
	Family string `json:"family"`
	Seed   uint64 `json:"seed"`
}

// DefaultUsers work through sessions of the families written blind to the
// memory rules (sessiongen's blind2 and blind3), one seed a user.
var DefaultUsers = []User{{"u-ada", sessiongen.FamilyBlind3, 101}, {"u-bo", sessiongen.FamilyBlind2, 102}, {"u-cy", sessiongen.FamilyBlind3, 103}}

// Options configures a run. Zero values take the defaults.
type Options struct {
	Sessions int    // sessions a user (DefaultSessions)
	Tokens   int64  // size of a session (DefaultTokens)
	Users    []User // DefaultUsers
	// Provider is the model of the commits (nil: the offline provider).
	Provider llm.Provider
	// Log receives the service's logs (nil: discarded).
	Log *slog.Logger
	// DumpDir, when set, receives the memory at every checkpoint as
	// text: <user>.<sessions>.txt, the context block the service answers.
	DumpDir string
	// Progress, when set, is called after every committed session with
	// the sessions committed so far and the total; calls do not overlap.
	Progress func(done, total int)
}

// Report is a run's figures.
type Report struct {
	Tenant           string       `json:"tenant"`
	Provider         string       `json:"provider"`
	SessionsPerUser  int          `json:"sessions_per_user"`
	TokensPerSession int64        `json:"tokens_per_session"`
	Users            []UserReport `json:"users"`
	ElapsedSeconds   float64      `json:"elapsed_seconds"`
}

// UserReport is one user's memory after each checkpoint.
type UserReport struct {
	User
	After []Checkpoint `json:"after"`
}

// Checkpoint is a user's memory after Sessions sessions.
type Checkpoint struct {
	Sessions int `json:"sessions"`
	// ContextTokens is the estimated size of the <long-term-memory> block
	// a new session would get (the service's answer).
	ContextTokens int64 `json:"context_tokens"`
	// Types are the figures per document (self/<type>), by name.
	Types []eval.TypeHygiene `json:"types"`
	// Superseded counts the values a later session replaced;
	// SupersededStated are those the memory still states, and
	// BesideReplacement how many of them sit beside every value that
	// replaced them (a supersede failure; the others' replacement never
	// reached the memory).
	Superseded        int      `json:"superseded"`
	SupersededStated  []string `json:"superseded_stated"`
	BesideReplacement int      `json:"beside_replacement"`
	// Current counts the preferences' latest values (the distinctive ones
	// of single-valued questions), CurrentHeld those the memory states:
	// a memory that forgets everything has nothing stale, so hygiene is
	// read beside it.
	Current     int `json:"current"`
	CurrentHeld int `json:"current_held"`
}

func (o Options) withDefaults() Options {
	if o.Sessions <= 0 {
		o.Sessions = DefaultSessions
	}
	if o.Tokens <= 0 {
		o.Tokens = DefaultTokens
	}
	if o.Users == nil {
		o.Users = DefaultUsers
	}
	if o.Provider == nil {
		o.Provider = llm.NewOffline()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Run starts an embedded server (its store in a temporary directory,
// removed on return) and the long-term memory service on it, runs the
// users' sessions and returns the figures. It stops the service and the
// server before it returns; an error of any commit ends the run.
func Run(ctx context.Context, o Options) (*Report, error) {
	o = o.withDefaults()
	start := time.Now()
	dir, err := os.MkdirTemp("", "recall-ltm-eval-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Options{DataDir: dir})
	if err != nil {
		return nil, err
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	prov := provision.Config{MemoryStorage: true}
	svcCtx, stop := context.WithCancel(ctx)
	var runErr error
	stopped := make(chan struct{}) // closed when Run returned (runErr set)
	go func() {
		defer close(stopped)
		cfg := longtermsvc.Config{NATS: natsconn.Config{URL: srv.ClientURL()}, Config: prov, Provider: o.Provider, ID: "ltm-eval"}
		runErr = longtermsvc.Run(svcCtx, cfg, o.Log.With("service", "longterm"))
	}()
	defer func() { stop(); <-stopped }()

	nc, err := nats.Connect(srv.ClientURL(), nats.Name("recall-ltm-eval"))
	if err != nil {
		return nil, fmt.Errorf("connecting to the embedded NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if err := awaitService(ctx, nc, stopped); err != nil {
		select {
		case <-stopped:
			return nil, fmt.Errorf("the long-term memory service stopped while starting: %v", runErr)
		default:
			return nil, err
		}
	}
	cl, err := client.New(js, Tenant)
	if err != nil {
		return nil, err
	}
	r := &runner{o: o, cl: cl, total: o.Sessions * len(o.Users)}
	rep := &Report{Tenant: Tenant, Provider: o.Provider.Name(), SessionsPerUser: o.Sessions, TokensPerSession: o.Tokens,
		Users: make([]UserReport, len(o.Users))}
	var wg sync.WaitGroup
	errs := make([]error, len(o.Users))
	for i, u := range o.Users {
		rep.Users[i].User = u
		wg.Go(func() { rep.Users[i].After, errs[i] = r.user(ctx, u) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rep.ElapsedSeconds = time.Since(start).Seconds()
	return rep, nil
}

// awaitService waits until the long-term memory service answers a
// discovery ping, or it stopped (stopped closed), or ctx ends.
func awaitService(ctx context.Context, nc *nats.Conn, stopped <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := nc.Request("$SRV.PING."+longtermsvc.ServiceName, nil, 250*time.Millisecond); err == nil {
			return nil
		}
		select {
		case <-stopped:
			return errors.New("the long-term memory service stopped while starting")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("the long-term memory service did not answer within 30s")
		}
	}
}

// runner runs the users' sessions.
type runner struct {
	o     Options
	cl    *client.Client
	mu    sync.Mutex // serializes Progress
	done  int
	total int
}

// user runs u's sessions in order and scores the memory at every
// checkpoint.
func (r *runner) user(ctx context.Context, u User) ([]Checkpoint, error) {
	h := newHistory()
	var out []Checkpoint
	for i := 0; i < r.o.Sessions; i++ {
		s := sessiongen.Generate(sessiongen.Spec{Seed: u.Seed, Index: i, Tokens: r.o.Tokens, Family: u.Family})
		h.learn(s)
		if err := r.commit(ctx, u.ID, fmt.Sprintf("%s-%d", u.ID, i), s, h); err != nil {
			return nil, err
		}
		r.step()
		if k := i + 1; k == r.o.Sessions || slices.Contains(Checkpoints, k) {
			c, err := r.score(ctx, u.ID, h, k)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func (r *runner) step() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done++
	if r.o.Progress != nil {
		r.o.Progress(r.done, r.total)
	}
}

// commit stores the session's messages for user, after its own
// session.started, and commits them through the service's API.
func (r *runner) commit(ctx context.Context, user, id string, s *sessiongen.Session, h *history) error {
	res, err := importer.ClaudeCode(bytes.NewReader(s.JSONL), importer.Options{Tenant: Tenant, Session: id})
	if err != nil {
		return fmt.Errorf("importing %s: %w", id, err)
	}
	started := event.New()
	started.SetID(id + "-ltm-started")
	started.SetSource(importer.DefaultSource)
	started.SetType(events.TypeSessionStarted)
	started.SetSubject(id)
	started.SetExtension(events.ExtTenant, Tenant)
	if err := started.SetData(event.ApplicationJSON, events.SessionStarted{UserID: user}); err != nil {
		return err
	}
	evs := []event.Event{started}
	for _, e := range res.Events {
		if e.Type() != events.TypeMessage {
			continue // the importer's own start names no user; no compaction
		}
		var m events.Message
		if err := e.DataAs(&m); err != nil {
			return fmt.Errorf("decoding a message of %s: %w", id, err)
		}
		h.addContent(m.Content)
		evs = append(evs, e)
	}
	results, err := r.cl.PublishBatch(ctx, evs)
	if err != nil {
		return fmt.Errorf("storing %s: %w", id, err)
	}
	for _, res := range results {
		if res.Err != nil {
			return fmt.Errorf("storing %s: %w", id, res.Err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := r.cl.Commit(cctx, id)
	if err != nil {
		return fmt.Errorf("committing %s: %w", id, err)
	}
	if !out.Success {
		return fmt.Errorf("committing %s: %s", id, out.Error)
	}
	return nil
}

// score reads user's memory through the service's API and scores it.
func (r *runner) score(ctx context.Context, user string, h *history, k int) (Checkpoint, error) {
	reply, err := r.cl.UserMemory(ctx, user)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("reading the memory of %s: %w", user, err)
	}
	if r.o.DumpDir != "" {
		name := filepath.Join(r.o.DumpDir, fmt.Sprintf("%s.%d.txt", user, k))
		if err := os.WriteFile(name, []byte(reply.Context+"\n"), 0o644); err != nil {
			return Checkpoint{}, err
		}
	}
	docs := map[string]string{}
	for _, d := range reply.Documents {
		docs[d.Target+"/"+d.Type] = d.Content
	}
	superseded := h.supersededValues()
	types, stated := eval.Hygiene(docs, h.corpus, superseded)
	c := Checkpoint{Sessions: k, ContextTokens: memory.EstimateText(reply.Context), Types: types,
		Superseded: len(superseded), SupersededStated: stated}
	if c.SupersededStated == nil {
		c.SupersededStated = []string{}
	}
	current := h.currentValues()
	_, held := eval.Hygiene(docs, h.corpus, current)
	c.Current, c.CurrentHeld = len(current), len(held)
	for _, v := range stated {
		cur := h.current[h.superseded[v]]
		if len(cur) == 0 {
			continue
		}
		if _, held := eval.Hygiene(docs, h.corpus, cur); len(held) == len(cur) {
			c.BesideReplacement++
		}
	}
	return c, nil
}

// addContent adds the words of every block of c — text, thinking, tool
// names, the string values of tool inputs, tool results — to the corpus.
func (h *history) addContent(c events.Content) {
	for i := range c {
		b := &c[i]
		eval.AddCorpus(h.corpus, b.Text+" "+b.Thinking+" "+b.Name)
		if len(b.Input) > 0 {
			var v any
			_ = json.Unmarshal(b.Input, &v)
			addStrings(h.corpus, v)
		}
		h.addContent(b.Content)
	}
}

func addStrings(corpus map[string]bool, v any) {
	switch v := v.(type) {
	case string:
		eval.AddCorpus(corpus, v)
	case map[string]any:
		for _, x := range v {
			addStrings(corpus, x)
		}
	case []any:
		for _, x := range v {
			addStrings(corpus, x)
		}
	}
}
