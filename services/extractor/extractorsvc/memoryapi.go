package extractorsvc

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
)

// ServiceName is the name of the extractor's micro service.
const ServiceName = "recall-extractor"

// MemoryEndpointSubject is the subject of the memory endpoint:
// recall.api.memory.<tenant>.<session>.
const MemoryEndpointSubject = events.SubjectAPIRoot + "." + events.VerbMemory + ".*.*"

// memoryEndpoint answers VerbMemory with the session's
// events.MemoryReply: one KV read (within 10 s), answered later under the
// read admission (microapi.NewReadAdmission: a tenant over its share is
// refused with 429, never queued before another tenant's read); memory
// documents can be large, so replies are chunked. A session without
// memory is a 404.
func memoryEndpoint(kv jetstream.KeyValue) microapi.Endpoint {
	return microapi.Endpoint{Verb: events.VerbMemory, Subject: MemoryEndpointSubject, Mode: microapi.AnswerLater,
		Admission: microapi.NewReadAdmission(),
		Handle: microapi.WithTimeout(10*time.Second, func(ctx context.Context, r microapi.Request) (any, *microapi.Error) {
			key := events.MemoryKey(r.Tenant, r.Session)
			e, err := kv.Get(ctx, key)
			if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
				return nil, microapi.Fail(404, "session %s has no memory yet", r.Session)
			}
			if err != nil {
				return nil, microapi.Fail(503, "reading memory: %v", err)
			}
			rec, err := store.DecodeMemory(key, e.Revision(), e.Value())
			if err != nil {
				return nil, microapi.Fail(500, "%v", err)
			}
			return events.MemoryReply{Key: key, Revision: e.Revision(), Record: rec}, nil
		})}
}

// serveMemoryAPI adds the micro service with the memory endpoint on
// later's connection; the caller stops the service, then later.
func serveMemoryAPI(later *microapi.Later, kv jetstream.KeyValue) (micro.Service, error) {
	return microapi.Serve(later, microapi.Service{Name: ServiceName, Description: "Recall extractor: session memory documents",
		Endpoints: []microapi.Endpoint{memoryEndpoint(kv)}})
}
