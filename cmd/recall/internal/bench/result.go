package bench

import "time"

// Result is the one JSON object `recall bench --json` prints. Every group is
// a nested object; the dotted names of the issue (raw.js_publish_msgs_per_s)
// are paths into it. Numbers a run did not measure are null, and the group's
// Skipped says why; a number is never invented.
type Result struct {
	Meta       Meta             `json:"meta"`
	Raw        RawResult        `json:"raw"`
	Ingest     IngestResult     `json:"ingest"`
	Trigger    TriggerResult    `json:"trigger"`
	Compaction CompactionResult `json:"compaction"`
	Extraction ExtractionResult `json:"extraction"`
	Pipeline   PipelineResult   `json:"pipeline"`
	Query      QueryResult      `json:"query"`
	Gateway    GatewayResult    `json:"gateway"` // gateway.go
	// Targets lists every target of the full run and whether this run met
	// it (null when not measured). Quick runs report them too, but their
	// sizes are too small for the verdicts to mean anything.
	Targets []Target `json:"targets"`
}

// Meta describes the run.
type Meta struct {
	Quick      bool      `json:"quick"`
	Started    time.Time `json:"started"`
	DurationS  float64   `json:"duration_s"`
	GoVersion  string    `json:"go_version"`
	GOOS       string    `json:"goos"`
	GOARCH     string    `json:"goarch"`
	CPUs       int       `json:"cpus"`
	CPUModel   string    `json:"cpu_model,omitempty"`
	NATS       string    `json:"nats"` // "embedded (file storage)" or the external URL's host
	Storage    string    `json:"storage"`
	Scenarios  []string  `json:"scenarios"`
	EventBytes Stats     `json:"event_bytes"` // size of the generated transcript messages (headers + data)
}

// Stats summarizes a size distribution.
type Stats struct {
	Min  int     `json:"min"`
	Mean float64 `json:"mean"`
	Max  int     `json:"max"`
}

// RawResult holds the NATS ceilings measured on the same server in the same
// run, with messages of the same sizes as the ingest scenarios.
type RawResult struct {
	Skipped           string   `json:"skipped,omitempty"`
	Messages          int      `json:"messages"`
	JSPublishMsgsPerS *float64 `json:"js_publish_msgs_per_s"`
	JSConsumeMsgsPerS *float64 `json:"js_consume_msgs_per_s"`
	RequestReplyP50US *float64 `json:"request_reply_p50_us"`
	RequestReplyP99US *float64 `json:"request_reply_p99_us"`
	KVGetP50US        *float64 `json:"kv_get_p50_us"`
	KVGetP99US        *float64 `json:"kv_get_p99_us"`
	// CompactionFloorP50US and _P99US are the compaction floor of the
	// largest transcript (see CompactionSize), measured by the compaction
	// scenario.
	CompactionFloorP50US *float64 `json:"compaction_floor_p50_us"`
	CompactionFloorP99US *float64 `json:"compaction_floor_p99_us"`
}

// IngestResult measures Recall's ingest paths against raw publish.
type IngestResult struct {
	Skipped string `json:"skipped,omitempty"`
	Events  int    `json:"events"`
	// NATSEventsPerS is the pkg/client path: validation, binary-mode
	// encoding and JetStream async publish with acks awaited.
	NATSEventsPerS *float64 `json:"nats_events_per_s"`
	// NATSOrderedEventsPerS is the same with client.Ordered (each
	// session's events one after the other, sessions concurrently).
	NATSOrderedEventsPerS *float64 `json:"nats_ordered_events_per_s"`
	RatioNATSOrderedVsRaw *float64 `json:"ratio_nats_ordered_vs_raw"`
	// NATSEndpointEventsPerS is the ingest service's NATS micro endpoint
	// (request-reply per batch); null when the service does not serve it.
	NATSEndpointEventsPerS *float64 `json:"nats_endpoint_events_per_s"`
	NATSEndpointSkipped    string   `json:"nats_endpoint_skipped,omitempty"`
	// NATSEndpointBatchEventsPerS is the same endpoint sent batches: a
	// JSON array of up to 100 of one session's events per request.
	NATSEndpointBatchEventsPerS *float64 `json:"nats_endpoint_batch_events_per_s"`
	RatioNATSEndpointBatchVsRaw *float64 `json:"ratio_nats_endpoint_batch_vs_raw"`
	HTTPBatchEventsPerS         *float64 `json:"http_batch_events_per_s"`
	HTTPSkipped                 string   `json:"http_skipped,omitempty"`
	RatioNATSVsRaw              *float64 `json:"ratio_nats_vs_raw"`
	RatioNATSEndpointVsRaw      *float64 `json:"ratio_nats_endpoint_vs_raw"`
	RatioHTTPVsRaw              *float64 `json:"ratio_http_vs_raw"`
	// CPUUSPerEvent is the process's CPU time (user + system, the
	// embedded server's included) per event published through pkg/client;
	// RawCPUUSPerEvent the same for raw async publish of the very messages
	// pkg/client builds, into the same shard streams; CPURatioVsRaw is
	// their ratio. The throughput ratios above are information.
	CPUUSPerEvent    *float64 `json:"cpu_us_per_event"`
	RawCPUUSPerEvent *float64 `json:"raw_cpu_us_per_event"`
	CPURatioVsRaw    *float64 `json:"cpu_ratio_vs_raw"`
	RawEventsPerS    *float64 `json:"raw_same_streams_events_per_s"`
}

// TriggerResult measures the trigger's decision throughput on a pre-filled
// transcript.
type TriggerResult struct {
	Skipped    string   `json:"skipped,omitempty"`
	Sessions   *int     `json:"sessions"`
	Events     int      `json:"events"`
	EventsPerS *float64 `json:"events_per_s"`
	// RawConsumeMsgsPerS is a raw consumer of the same records that
	// acknowledges the way the trigger does (AckAll every AckEvery
	// records, the same pull batch and consumer configuration);
	// RatioVsRawConsume is information, the target is CPURatioVsRaw.
	RawConsumeMsgsPerS *float64 `json:"raw_consume_same_data_msgs_per_s"`
	RatioVsRawConsume  *float64 `json:"ratio_vs_raw_consume"`
	// CPUUSPerEvent and RawCPUUSPerEvent are the process's CPU time (user
	// + system, the embedded server's included) per event while one
	// trigger replica, and the raw consumer, read the same records;
	// CPURatioVsRaw is their ratio.
	CPUUSPerEvent    *float64 `json:"cpu_us_per_event"`
	RawCPUUSPerEvent *float64 `json:"raw_cpu_us_per_event"`
	CPURatioVsRaw    *float64 `json:"cpu_ratio_vs_raw"`
	BytesPerSession  *float64 `json:"bytes_per_session"`
	Requests         int      `json:"extraction_requests"`
	// RestartRecoveryS is the time from a restart of the trigger to the
	// acknowledgement of one new record in every session (each rebuilt from
	// its transcript).
	RestartRecoveryS *float64 `json:"restart_recovery_s"`
	// RestartRecoveryCPUS is the process's CPU time meanwhile (the
	// embedded server's included). Over RestartRecoveryS it is the cores
	// the recovery kept busy: near the machine's core count it is bounded
	// by the CPU; well below, by waits or by other work on the machine.
	RestartRecoveryCPUS *float64 `json:"restart_recovery_cpu_s"`
	// ReplicasScaling is the trigger on the same transcript with 1, 2
	// and 4 replicas sharing its shards.
	ReplicasScaling []ReplicaStep `json:"replicas_scaling"`
	// LongSessionRebuild is one long session's rebuild after a restart,
	// without and with snapshots of its state.
	LongSessionRebuild []LongRebuild `json:"long_session_rebuild"`
}

// ReplicaStep is the trigger with one replica count, reading the whole
// transcript from its start.
type ReplicaStep struct {
	Replicas int   `json:"replicas"`
	Shards   int   `json:"shards"`
	Records  int64 `json:"records"` // records in the shard streams
	// DeliveredMost is the most records any one replica received
	// (Stats.Delivered, redeliveries included); DeliveredFraction is
	// DeliveredMost / Records: 1/Replicas when the shards and their
	// records are shared evenly and no replica receives another's.
	DeliveredMost     int64   `json:"delivered_most"`
	DeliveredFraction float64 `json:"delivered_fraction"`
	// EventsPerS is information: on one machine the replicas share its
	// cores with the server.
	EventsPerS float64 `json:"events_per_s"`
	Seconds    float64 `json:"seconds"`
	// CPUUSPerEvent is the process's CPU time per record from the
	// replicas' start to the last acknowledgement (information).
	CPUUSPerEvent *float64 `json:"cpu_us_per_event"`
}

// CompactionSize is the compaction latency of sessions with one transcript
// length.
type CompactionSize struct {
	TranscriptMessages int     `json:"transcript_messages"`
	Requests           int     `json:"requests"`
	P50US              float64 `json:"p50_us"`
	P99US              float64 `json:"p99_us"`
	KeptMessages       int     `json:"kept_messages"`
	// FloorP50US and FloorP99US are the raw I/O of the same compaction on
	// the same server (KV get + batch Direct Get of the kept records + a
	// reply of the same bytes), measured right after each compaction.
	FloorP50US      float64 `json:"floor_p50_us"`
	FloorP99US      float64 `json:"floor_p99_us"`
	RatioP50VsFloor float64 `json:"ratio_p50_vs_floor"`
	RatioP99VsFloor float64 `json:"ratio_p99_vs_floor"`
}

// CompactionResult measures compaction latency by transcript length.
type CompactionResult struct {
	Skipped       string           `json:"skipped,omitempty"`
	Sessions      int              `json:"sessions"`
	BySize        []CompactionSize `json:"by_size"`
	RatioP99VsRaw *float64         `json:"ratio_p99_vs_raw"`
	// RatioP50VsFloor and RatioP99VsFloor are the worst size's compaction
	// latency over its floor.
	RatioP50VsFloor *float64 `json:"ratio_p50_vs_floor"`
	RatioP99VsFloor *float64 `json:"ratio_p99_vs_floor"`
	Flatness        *float64 `json:"flatness"`
	// Concurrent is compactions issued 64 at a time (16 in a quick run)
	// over every background session, against the same reads issued at
	// the same concurrency; ConcurrentOverShare the same at 256 (96),
	// beyond the compactor's per-tenant share, whose excess it refuses
	// with 429.
	Concurrent          *ConcurrentCompaction `json:"concurrent"`
	ConcurrentOverShare *ConcurrentCompaction `json:"concurrent_over_share"`
}

// ConcurrentCompaction is one concurrency of compaction requests. Its
// floor is the reads a compaction of each session does — the KV get of its
// memory and one batch Direct Get of its records — issued at the same
// concurrency in the same run, without the reply.
type ConcurrentCompaction struct {
	Concurrency int `json:"concurrency"`
	Sessions    int `json:"sessions"`
	Requests    int `json:"requests"`
	Served      int `json:"served"`
	// Refused429 is the requests the compactor refused (the tenant's
	// share was in flight); they are not in the rate nor the latencies.
	Refused429      int     `json:"refused_429"`
	CompactionsPerS float64 `json:"compactions_per_s"`
	P50US           float64 `json:"p50_us"`
	P99US           float64 `json:"p99_us"`
	FloorPerS       float64 `json:"floor_per_s"`
	FloorP50US      float64 `json:"floor_p50_us"`
	FloorP99US      float64 `json:"floor_p99_us"`
	RateVsFloor     float64 `json:"rate_vs_floor"`
	P99VsFloor      float64 `json:"p99_vs_floor"`
	// CPUUSPerCompaction and FloorCPUUSPerRead are the process's CPU
	// (bench, compactor and embedded server) per served compaction and per
	// floor read, and CPUVsFloor their ratio (information: it holds on a
	// shared machine, where the rates do not).
	CPUUSPerCompaction *float64 `json:"cpu_us_per_compaction,omitempty"`
	FloorCPUUSPerRead  *float64 `json:"floor_cpu_us_per_read,omitempty"`
	CPUVsFloor         *float64 `json:"cpu_vs_floor,omitempty"`
}

// ExtractionStep is extraction throughput with one worker count.
type ExtractionStep struct {
	Workers          int     `json:"workers"`
	Extractions      int     `json:"extractions"`
	ExtractionsPerS  float64 `json:"extractions_per_s"`
	Efficiency       float64 `json:"efficiency"`
	OrderingProblems int     `json:"ordering_violations"`
	// BusiestWorkerSessions is the number of sessions whose partitions the
	// busiest worker owns (pcgroup.Assign over the session hashes). Without
	// work sharing, with PerWorker extractions at once, the run cannot take
	// less than ceil(BusiestWorkerSessions × Rounds / PerWorker) model
	// latencies, which bounds Efficiency (EfficiencyBound); with sharing,
	// idle workers take the busiest one's waiting requests (Shared counts
	// them).
	BusiestWorkerSessions int     `json:"busiest_worker_sessions"`
	EfficiencyBound       float64 `json:"efficiency_bound"`
	Shared                int     `json:"shared"`
	// CapacityPerS is what the workers could do if every slot always had a
	// model call in flight: workers × PerWorker / latency; Utilization is
	// ExtractionsPerS / CapacityPerS.
	CapacityPerS float64 `json:"capacity_per_s"`
	Utilization  float64 `json:"utilization"`
	// OverheadP50MS and OverheadP99MS are Recall's time in a model-calling
	// extraction besides the model: the handler's duration
	// (ExtractionCompleted.DurationMS: reads, model call, commit) less the
	// model latency. With a fixed latency the slots end their calls
	// together, so this is the time a step loses at each wave; time spent
	// waiting for a slot is not in it.
	OverheadP50MS float64 `json:"overhead_p50_ms"`
	OverheadP99MS float64 `json:"overhead_p99_ms"`
	// CPUS is the process CPU time (user + system, getrusage) from the
	// step's first request to its last outcome; CPUMSPerExtraction is it
	// per model-calling extraction, CPUCores it over the wall time. See
	// ExtractionResult.CPUMSPerExtraction for what it includes. Null where
	// the process CPU time cannot be read.
	CPUS               *float64 `json:"cpu_s"`
	CPUMSPerExtraction *float64 `json:"cpu_ms_per_extraction"`
	CPUCores           *float64 `json:"cpu_cores"`
	// RunQueueCores is how long the process's threads waited for a CPU
	// while runnable (Linux schedstat) over the wall time: the average
	// number of them waiting. Well above zero the machine's CPUs were
	// short (other processes, or the step's own load) and the step's
	// efficiency measured them, not the scheduling. Null off Linux.
	RunQueueCores *float64 `json:"run_queue_wait_cores"`
}

// ExtractionResult measures extraction scaling against a fake LLM with a
// fixed latency.
type ExtractionResult struct {
	Skipped string `json:"skipped,omitempty"`
	// LLMLatencyMS is the fake model's latency in the scaling steps (2,000
	// in a full run, 50 in a quick one).
	LLMLatencyMS int `json:"llm_latency_ms"`
	Sessions     int `json:"sessions"`
	// PerWorker is each worker's concurrency (extractions at once).
	PerWorker int `json:"extractions_per_worker"`
	// Rounds is the model-calling extractions of each session, one after
	// the other: a session's next request is published when its previous
	// one settled. Each is followed by a late request for an older point,
	// which must be answered as covered.
	Rounds             int              `json:"extractions_per_session"`
	Scaling            []ExtractionStep `json:"scaling"`
	OrderingViolations *int             `json:"ordering_violations"`
	ViolationExamples  []string         `json:"violation_examples,omitempty"`
	// CPUMSPerExtraction is Recall's own CPU per model-calling extraction
	// over all scaling steps: the process CPU time (user + system,
	// getrusage RUSAGE_SELF) from each step's first request to its last
	// outcome, minus nothing, over the step's extractions. The fake
	// model's latency is a sleep and costs no CPU, but its HTTP serving is
	// in the process and counted, and so are the bench's publishing of the
	// requests and reading of the outcomes, the late requests' answers and
	// the idle workers' pulls and heartbeats. The embedded NATS server
	// shares the process, so its CPU is included (with --url it is not).
	// Null where the process CPU time cannot be read.
	CPUMSPerExtraction *float64 `json:"cpu_ms_per_extraction"`
	// LongSession is one long session extracted three times: the third
	// reads from the window the second kept (MemoryRecord.ContextSeq).
	LongSession []LongSessionStep `json:"long_session"`
}

// PipelineResult measures the trigger lag under steady ingest at 50 % and
// 80 % of the client ingest capacity, with trigger replicas sharing the
// transcript's shards. The top-level rate, requests and lags are the 50 %
// step's.
type PipelineResult struct {
	Skipped            string         `json:"skipped,omitempty"`
	CapacityEventsPerS *float64       `json:"capacity_events_per_s"`
	TriggerReplicas    int            `json:"trigger_replicas"`
	RateEventsPerS     *float64       `json:"rate_events_per_s"`
	Requests           int            `json:"extraction_requests"`
	TriggerLagP50MS    *float64       `json:"trigger_lag_p50_ms"`
	TriggerLagP99MS    *float64       `json:"trigger_lag_p99_ms"`
	TriggerLag80P50MS  *float64       `json:"trigger_lag_80_p50_ms"`
	TriggerLag80P99MS  *float64       `json:"trigger_lag_80_p99_ms"`
	Steps              []PipelineStep `json:"steps"`
	// RawCapacityEventsPerS is the raw async publish rate into the shards
	// (ingest.raw_events_per_s) the raw floor's loads are fractions of.
	RawCapacityEventsPerS *float64 `json:"raw_capacity_events_per_s"`
	// RawSteps is the raw floor at the same loads: a raw publisher and
	// raw consumers acking like the trigger, deciding nothing.
	RawSteps []RawPipelineStep `json:"raw_steps"`
	// RawLag80P99MS is the raw floor's lag p99 at 80 % of its capacity.
	RawLag80P99MS *float64 `json:"raw_lag_80_p99_ms"`
	// RawLagAtRecall80P99MS is the raw floor's lag p99 at the rate of the
	// pipeline's 80 % step (the last of RawSteps).
	RawLagAtRecall80P99MS *float64 `json:"raw_lag_at_recall_80_p99_ms"`
	// TriggerLag80P99VsRaw is TriggerLag80P99MS ÷ RawLagAtRecall80P99MS:
	// Recall's lag against JetStream's at the same offered load.
	TriggerLag80P99VsRaw *float64 `json:"trigger_lag_80_p99_vs_raw"`
	// CPUUSPerEvent is the CPU per ingested event of the 80 % step (the
	// load generator's pkg/client, the server, the trigger replicas and
	// their decisions); RawCPUUSPerEvent is the raw floor's at the same
	// offered rate, and CPURatioVsRaw the first ÷ the second.
	CPUUSPerEvent    *float64 `json:"cpu_us_per_event"`
	RawCPUUSPerEvent *float64 `json:"raw_cpu_us_per_event"`
	CPURatioVsRaw    *float64 `json:"cpu_ratio_vs_raw"`
}

// RawPipelineStep is one load of the raw floor; its lag is from when a
// record was due to be published to a raw consumer receiving it (so it
// includes the publisher's backlog when the floor cannot keep up).
type RawPipelineStep struct {
	Load               float64  `json:"load"`
	RateEventsPerS     float64  `json:"rate_events_per_s"`
	AchievedEventsPerS float64  `json:"achieved_events_per_s"`
	LagP50MS           float64  `json:"lag_p50_ms"`
	LagP99MS           float64  `json:"lag_p99_ms"`
	CPUCores           *float64 `json:"cpu_cores"`
	CPUUSPerEvent      *float64 `json:"cpu_us_per_event"`
}

// PipelineStep is one steady load of the pipeline scenario.
type PipelineStep struct {
	Load               float64 `json:"load"`
	RateEventsPerS     float64 `json:"rate_events_per_s"`
	AchievedEventsPerS float64 `json:"achieved_events_per_s"`
	Requests           int     `json:"extraction_requests"`
	TriggerLagP50MS    float64 `json:"trigger_lag_p50_ms"`
	TriggerLagP99MS    float64 `json:"trigger_lag_p99_ms"`
	// DeliveredFraction is the most records one replica received over the
	// records stored (each replica reads only its shards).
	DeliveredFraction float64 `json:"delivered_fraction"`
	// CPUCores is the process's CPU time over the step's wall time, from
	// the first event published to the last record acknowledged (the
	// client, the replicas and the embedded server together): near the
	// machine's core count, the step is bounded by the CPU.
	// CPUUSPerEvent is that CPU time per event ingested.
	CPUCores      *float64 `json:"cpu_cores"`
	CPUUSPerEvent *float64 `json:"cpu_us_per_event"`
}

// Target is one target of the issue and this run's verdict.
type Target struct {
	Name  string   `json:"name"`
	Want  string   `json:"want"`
	Value *float64 `json:"value"`
	Met   *bool    `json:"met"`
}

func f64(v float64) *float64 { return &v }

func ptrInt(v int) *int { return &v }
