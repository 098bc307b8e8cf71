package provision

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// consumerPage is one page of $JS.API.CONSUMER.LIST.<stream>'s answer. On
// a cluster the meta leader asks every consumer's leader for its info and
// lists those that did not answer (no leader, or every peer offline) in
// Missing; nats.go's lister drops them, which would make an incomplete view
// look complete.
type consumerPage struct {
	Total     int                       `json:"total"`
	Offset    int                       `json:"offset"`
	Limit     int                       `json:"limit"`
	Consumers []*jetstream.ConsumerInfo `json:"consumers"`
	Missing   []string                  `json:"missing"`
	Error     *apiError                 `json:"error"`
}

// readConsumerLeaders reads the leaders of the durable consumers on the
// given streams (one consumer list request per stream, each page bounded
// by AttemptTimeout) and returns them as sets, one per durable name (sorted
// by name), each in the streams' order. A durable the server lists as
// missing on a stream has leader "" in its set; a missing consumer that is
// not one of the durables listed elsewhere (an ephemeral one) is ignored.
func readConsumerLeaders(ctx context.Context, js jetstream.JetStream, streams []string) ([][]groupLeader, error) {
	byDurable := map[string]map[string]groupLeader{} // durable → stream → leader
	missing := map[string][]string{}                 // stream → consumers that did not answer
	for _, stream := range streams {
		infos, miss, err := listConsumers(ctx, js, stream)
		if err != nil {
			return nil, err
		}
		missing[stream] = miss
		for _, info := range infos {
			if info.Config.Durable == "" {
				continue
			}
			g := groupLeader{name: stream, consumer: info.Config.Durable}
			g.setLeader(info.Cluster, info.Created, info.TimeStamp)
			if byDurable[g.consumer] == nil {
				byDurable[g.consumer] = map[string]groupLeader{}
			}
			byDurable[g.consumer][stream] = g
		}
	}
	for stream, names := range missing {
		for _, name := range names {
			if set := byDurable[name]; set != nil {
				set[stream] = groupLeader{name: stream, consumer: name} // no leader
			}
		}
	}
	var sets [][]groupLeader
	for _, durable := range slices.Sorted(maps.Keys(byDurable)) {
		var set []groupLeader
		for _, stream := range streams {
			if g, ok := byDurable[durable][stream]; ok {
				set = append(set, g)
			}
		}
		sets = append(sets, set)
	}
	return sets, nil
}

// listConsumers lists stream's consumers, page after page: those that
// answered, and the names of those that did not.
func listConsumers(ctx context.Context, js jetstream.JetStream, stream string) ([]*jetstream.ConsumerInfo, []string, error) {
	var infos []*jetstream.ConsumerInfo
	var missing []string
	for offset := 0; ; {
		var page consumerPage
		if err := apiRequest(ctx, js, "CONSUMER.LIST."+stream, map[string]int{"offset": offset}, &page); err != nil {
			return nil, nil, fmt.Errorf("listing the consumers of %s: %w", stream, err)
		}
		if page.Error != nil {
			return nil, nil, fmt.Errorf("listing the consumers of %s: %s", stream, page.Error.Description)
		}
		infos = append(infos, page.Consumers...)
		missing = append(missing, page.Missing...)
		offset = page.Offset + page.Limit
		if page.Limit <= 0 || offset >= page.Total {
			return infos, missing, nil
		}
	}
}
