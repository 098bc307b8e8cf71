package sessiongen

// Two vocabularies that share no word: filler code and requests draw from
// fillerWords, planted facts from factWords, so a fact's answer never occurs
// in the filler by chance.
var fillerWords = []string{
	"amount", "entry", "total", "row", "batch", "record", "field", "value", "parse", "format",
	"index", "count", "merge", "split", "window", "buffer", "period", "line", "column", "header",
	"scale", "limit", "offset", "cursor", "state", "owner", "label", "group", "filter", "sort",
	"range", "bucket", "digest", "marker", "cycle", "slot", "chunk", "frame", "stage", "queue",
}

var factWords = []string{
	"harvest", "meadow", "lantern", "copper", "willow", "falcon", "granite", "saffron", "harbor", "thistle",
	"orchid", "walnut", "ember", "glacier", "juniper", "marble", "nectar", "pepper", "quill", "raven",
	"summit", "tidal", "velvet", "whisker", "yarrow", "zenith", "bramble", "cinder", "dune", "fjord",
}

var tagWords = []string{"ZEPHYR", "ORCA", "MAPLE", "COBALT", "QUARTZ", "TUNDRA", "BEACON", "PRISM"}

// project is the synthetic repository a session works on.
type project struct {
	name string
	pkgs []string // every project has importer, export, report and rates
}

var projects = []project{
	{"tally", []string{"importer", "export", "report", "rates", "ledger", "budget"}},
	{"freight", []string{"importer", "export", "report", "rates", "route", "carrier"}},
	{"kiln", []string{"importer", "export", "report", "rates", "graph", "worker"}},
	{"mooring", []string{"importer", "export", "report", "rates", "manifest", "schedule"}},
}

// abstentions are questions about things no session ever mentions, with the
// answers a confabulating summary would invent. Neither vocabulary above
// nor the generated code contains any of them.
var abstentions = []struct {
	question string
	invented []string
}{
	{"Which database did the user choose for storing the exports?", []string{"postgres", "postgresql", "mysql", "sqlite", "mongodb", "redis", "dynamodb"}},
	{"Which CI service did the user ask to configure?", []string{"jenkins", "circleci", "buildkite", "travis", "github actions", "gitlab ci"}},
	{"Which cloud region was chosen for the deployment?", []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"}},
	{"Which logging library did the user ask to switch to?", []string{"zap", "zerolog", "logrus", "log15"}},
}
