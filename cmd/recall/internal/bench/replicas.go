package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// triggerReplica is one trigger replica run in the bench process on its
// own connection. It runs triggersvc.New and Trigger.Run — what
// triggersvc.Run does once its lifecycle started, without the manual
// extraction endpoint and the operational endpoints, which are not on the
// measured path — so that the bench can read its Stats.
type triggerReplica struct {
	id     string
	tr     *triggersvc.Trigger
	svc    *service
	nc     *nats.Conn
	cancel context.CancelFunc
}

// startTriggerReplica starts one replica named id.
func startTriggerReplica(ctx context.Context, e *env, cfg triggersvc.Config, id string) (*triggerReplica, error) {
	cfg.MemberID = id
	nc, err := nats.Connect(e.url, nats.Name("recall-bench-"+id))
	if err != nil {
		return nil, fmt.Errorf("connecting trigger replica %s: %w", id, err)
	}
	rctx, cancel := context.WithCancel(ctx)
	fail := func(err error) (*triggerReplica, error) {
		cancel()
		nc.Close()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	log := e.log.With("service", "trigger", "replica", id)
	tenants, err := tenantcfg.Watch(rctx, js, log)
	if err != nil {
		return fail(fmt.Errorf("watching the tenant configuration: %w", err))
	}
	tr, err := triggersvc.New(nc, cfg, tenants, log)
	if err != nil {
		return fail(err)
	}
	svc, err := startService(rctx, "trigger", tr.Run, nil)
	if err != nil {
		return fail(err)
	}
	return &triggerReplica{id: id, tr: tr, svc: svc, nc: nc, cancel: cancel}, nil
}

// stop stops the replica (it hands its shards over) and closes its
// connection.
func (r *triggerReplica) stop() error {
	err := r.svc.stop()
	r.cancel()
	r.nc.Close()
	return err
}

// stopReplicas stops every replica of rs.
func stopReplicas(rs []*triggerReplica) {
	for _, r := range rs {
		_ = r.stop()
	}
}

// services returns the replicas' services (to notice one that stops).
func services(rs []*triggerReplica) []*service {
	out := make([]*service, len(rs))
	for i, r := range rs {
		out[i] = r.svc
	}
	return out
}

// startTriggerReplicas starts n replicas named <name>-<i> with cfg and
// returns once their group settled: the shards are shared (each replica
// follows ⌊S/n⌋ or ⌈S/n⌉ of them, every shard once) and every shard's
// durable is pulling or delivered records. Records stored before would
// otherwise count the join (a replica waits a moment after joining before
// it takes shards) as trigger lag or throughput.
func startTriggerReplicas(ctx context.Context, e *env, cfg triggersvc.Config, n int, name string) ([]*triggerReplica, error) {
	var rs []*triggerReplica
	for i := range n {
		r, err := startTriggerReplica(ctx, e, cfg, fmt.Sprintf("%s-%d", name, i))
		if err != nil {
			stopReplicas(rs)
			return nil, err
		}
		rs = append(rs, r)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := settled(ctx, e, rs)
		if err == nil {
			return rs, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stopReplicas(rs)
			return nil, fmt.Errorf("%d trigger replicas did not share the shards within 30s: %w", n, err)
		}
		retry.Pause(ctx.Done(), 20*time.Millisecond)
	}
}

// settled tells why the replicas' group has not settled yet (nil once it
// has): see startTriggerReplicas.
func settled(ctx context.Context, e *env, rs []*triggerReplica) error {
	shards := e.layout().Shards()
	lo, hi := shards/len(rs), (shards+len(rs)-1)/len(rs)
	sum := 0
	for _, r := range rs {
		select {
		case <-r.svc.done:
			return fmt.Errorf("replica %s stopped: %v", r.id, r.svc.err)
		default:
		}
		l := r.tr.Stats().Lanes
		if l < lo || l > hi {
			return fmt.Errorf("replica %s follows %d shards", r.id, l)
		}
		sum += l
	}
	if sum != shards {
		return fmt.Errorf("the replicas follow %d shards of %d", sum, shards)
	}
	for _, stream := range e.layout().Streams() {
		c, err := e.js.Consumer(ctx, stream, events.DurableTrigger)
		if err != nil {
			return err
		}
		if info := c.CachedInfo(); info.NumWaiting == 0 && info.Delivered.Stream == 0 {
			return errors.New(stream + " is not pulled yet")
		}
	}
	return nil
}

// delivered returns the records delivered to the replicas in all and to
// the one that received the most (Stats.Delivered, redeliveries
// included).
func delivered(rs []*triggerReplica) (sum, most int64) {
	for _, r := range rs {
		d := r.tr.Stats().Delivered
		sum += d
		most = max(most, d)
	}
	return sum, most
}

// waitProcessed waits until the replicas processed n records in all and
// returns when the first was delivered (zero when one was delivered
// before the call). It reads the replicas' counters only: polling the
// server would add its own load to the CPU measured meanwhile.
func waitProcessed(ctx context.Context, rs []*triggerReplica, n int64) (first time.Time, err error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var records int64
		for _, r := range rs {
			select {
			case <-r.svc.done:
				return first, fmt.Errorf("trigger replica %s stopped: %v", r.id, r.svc.err)
			default:
			}
			records += r.tr.Stats().Records
		}
		if sum, _ := delivered(rs); first.IsZero() && sum > 0 {
			first = time.Now()
		}
		if records >= n {
			return first, nil
		}
		if time.Now().After(deadline) {
			return first, fmt.Errorf("the trigger processed %d of %d records within 5m", records, n)
		}
		if !retry.Pause(ctx.Done(), 2*time.Millisecond) {
			return first, ctx.Err()
		}
	}
}
