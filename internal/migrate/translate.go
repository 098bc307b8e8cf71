package migrate

import "context"

// translate translates every stored position, empties the caches, and
// creates the services' durables on the shards, all from one scan of the
// shards taken after the copy.
func (m *Migrator) translate(ctx context.Context) error {
	p := newPositions(m.layout)
	kvs, err := m.collectKV(ctx, p)
	if err != nil {
		return err
	}
	reqs, err := m.collectRequests(ctx, p)
	if err != nil {
		return err
	}
	if p.durables, err = m.legacyDurables(ctx); err != nil {
		return err
	}
	if err := m.scan(ctx, p); err != nil {
		return err
	}
	if err := m.checkComplete(ctx, p); err != nil {
		return err
	}
	m.log.Info("translating stored positions", "records", len(kvs), "requests", len(reqs), "durables", len(p.durables))
	if err := m.applyKV(ctx, kvs, p); err != nil {
		return err
	}
	if err := m.applyRequests(ctx, reqs, p); err != nil {
		return err
	}
	if err := m.purgeCaches(ctx); err != nil {
		return err
	}
	return m.createDurables(ctx, p.durables)
}
