package sessiongen

// The blind2 family's two vocabularies, which share no word: filler code,
// logs and requests draw from blindFillerWords, the session's answers from
// blindFactWords, so an answer occurs in a session only where the session
// says it. Neither holds an answer any abstention question lists.
var blindFillerWords = []string{
	"span", "payload", "handler", "option", "input", "output", "schema", "series", "widget", "screen",
	"layout", "event", "worker", "shard", "token", "metric", "probe", "signal", "channel", "socket",
	"stream", "reader", "writer", "config", "context", "session", "request", "reply", "item", "node",
	"edge", "path", "mode", "level", "unit", "block", "page", "tile", "view", "panel",
}

var blindFactWords = []string{
	"ptarmigan", "sorrel", "kestrel", "obsidian", "tamarack", "larkspur", "quokka", "bergamot", "chert", "wombat",
	"sumac", "tansy", "gannet", "loess", "marten", "cassia", "plover", "scree", "tupelo", "vetch",
	"wrasse", "ocelot", "jacana", "fescue", "galena", "hornbeam", "ibex", "kudu", "lupine", "mica",
	"nutmeg", "osprey", "pika", "quince", "rook", "sedge", "teal", "umber", "vole", "yucca",
}
