package indexersvc

import "github.com/recallhq/recall/pkg/events"

// testLayout is the layout the tests provision (the default shard count).
var testLayout = events.NewLayout(events.DefaultShards)
