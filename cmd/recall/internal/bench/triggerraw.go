package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// rawAckDurable is the raw consumer's durable on every shard stream.
const rawAckDurable = "bench-raw-ack"

// rawAckConsume reads every record of the transcript's shard streams (up
// to last[k] in shard k) the way the trigger does, without deciding
// anything: a durable per shard configured like the trigger's
// (cfg.ConsumerConfig: AckAll, the pinned priority group, MaxAckPending),
// pulling cfg.PullBatch at once, acknowledging every cfg.AckEvery-th
// record and the last. It is the floor trigger.cpu_ratio_vs_raw and
// trigger.ratio_vs_raw_consume compare the trigger with. It returns the
// phase (from creating the consumers to the last acknowledgement
// confirmed); the durables are deleted afterwards.
func rawAckConsume(ctx context.Context, e *env, cfg triggersvc.Config, last shardSeqs) (wall, cpu time.Duration, cpuOK bool, err error) {
	cfg = cfg.WithDefaults()
	defer e.deleteDurable(context.WithoutCancel(ctx), rawAckDurable)
	p := startPhase()
	var wg sync.WaitGroup
	errs := make([]error, len(last))
	for k, stream := range e.layout().Streams() {
		if last[k] == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = rawAckShard(ctx, e.js, cfg, stream, last[k])
		}()
	}
	wg.Wait()
	wall, cpu, cpuOK = p.end()
	return wall, cpu, cpuOK, errors.Join(errs...)
}

// rawAckShard is rawAckConsume on one shard stream.
func rawAckShard(ctx context.Context, js jetstream.JetStream, cfg triggersvc.Config, stream string, last uint64) error {
	cc := cfg.ConsumerConfig()
	cc.Durable, cc.Description = rawAckDurable, "recall bench: raw consumer acknowledging like the trigger"
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, cc)
	if err != nil {
		return fmt.Errorf("creating a consumer on %s: %w", stream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(cfg.PullBatch), jetstream.PullPriorityGroup(triggersvc.PriorityGroup))
	if err != nil {
		return fmt.Errorf("consuming %s: %w", stream, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	deadline := time.AfterFunc(2*time.Minute, it.Stop)
	defer deadline.Stop()
	for n := 1; ; n++ {
		m, err := it.Next()
		if err != nil {
			return fmt.Errorf("consuming %s: %d records of %d: %w", stream, n-1, last, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if md.Sequence.Stream >= last {
			if err := m.DoubleAck(ctx); err != nil {
				return fmt.Errorf("acknowledging %s: %w", stream, err)
			}
			return nil
		}
		if n%cfg.AckEvery == 0 {
			_ = m.Ack()
		}
	}
}
