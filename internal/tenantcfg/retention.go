package tenantcfg

import "github.com/recallhq/recall/pkg/events"

// Retentions returns the retention of every tenant that configures one
// (events.TenantConfig.Retention), for the retention sweeper.
func (s *Store) Retentions() map[string]events.Retention {
	out := map[string]events.Retention{}
	if s == nil {
		return out
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for tenant, c := range s.tenants {
		if c.Retention != nil {
			out[tenant] = *c.Retention
		}
	}
	return out
}
