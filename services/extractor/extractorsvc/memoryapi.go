package extractorsvc

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/replyspace"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
)

// ServiceName is the name of the extractor's micro service.
const ServiceName = "recall-extractor"

// MemoryEndpointSubject is the subject of the memory endpoint:
// recall.api.memory.<tenant>.<session>.
const MemoryEndpointSubject = events.SubjectAPIRoot + "." + events.VerbMemory + ".*.*"

// memoryAPI answers VerbMemory with the session's events.MemoryReply; memory
// documents can be large, so replies use the chunked protocol. A session
// without memory is a 404 micro error.
type memoryAPI struct {
	nc *nats.Conn
	kv jetstream.KeyValue
}

func (a *memoryAPI) Handle(req micro.Request) {
	tenant, session, ok := events.SplitSessionSubject(req.Subject())
	if !ok {
		_ = req.Error("400", "subject must be "+events.SubjectAPIRoot+"."+events.VerbMemory+".<tenant>.<session>", nil)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := events.MemoryKey(tenant, session)
	e, err := a.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		_ = req.Error("404", "session "+session+" has no memory yet", nil)
		return
	}
	if err != nil {
		_ = req.Error("503", "reading memory: "+err.Error(), nil)
		return
	}
	rec, err := store.DecodeMemory(key, e.Revision(), e.Value())
	if err != nil {
		_ = req.Error("500", err.Error(), nil)
		return
	}
	reply := events.MemoryReply{Key: key, Revision: e.Revision(), Record: rec}
	b, _ := json.Marshal(reply)
	_ = chunked.Respond(a.nc, req.Reply(), nats.Header{"Content-Type": []string{"application/json"}}, b)
}

// serveMemoryAPI adds the micro service with the memory endpoint on nc.
func serveMemoryAPI(nc *nats.Conn, kv jetstream.KeyValue, log *slog.Logger) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     "1.0.0",
		Description: "Recall extractor: session memory documents",
	})
	if err != nil {
		return nil, err
	}
	if err := svc.AddEndpoint(events.VerbMemory, replyspace.Guard(log, &memoryAPI{nc: nc, kv: kv}), micro.WithEndpointSubject(MemoryEndpointSubject)); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return svc, nil
}
