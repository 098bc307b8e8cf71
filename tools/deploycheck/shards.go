package main

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// checkShardReaders checks the Deployments whose replicas share the
// transcript's shards (trigger, indexer, long-term memory) against
// RECALL_SHARDS: a replica count that divides it gives every replica as
// many shards. A set whose ConfigMaps do not set RECALL_SHARDS is left
// alone (the default, 4, is for a single server).
func (c *checker) checkShardReaders(set string, deps []*appsv1.Deployment, configMaps map[string]*corev1.ConfigMap) {
	shards := 0
	for _, cm := range configMaps {
		v, ok := cm.Data["RECALL_SHARDS"]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			c.fail("%s: ConfigMap %s: RECALL_SHARDS %q is not a positive number", set, cm.Name, v)
			return
		}
		shards = n
	}
	if shards == 0 {
		return
	}
	for _, d := range deps {
		switch d.Name {
		case "recall-trigger", "recall-indexer", "recall-longterm":
		default:
			continue
		}
		if d.Spec.Replicas != nil && shards%int(*d.Spec.Replicas) != 0 {
			c.fail("%s: Deployment %s: %d replicas do not divide RECALL_SHARDS=%d (some replicas would read more shards than others)",
				set, d.Name, *d.Spec.Replicas, shards)
		}
	}
}
