package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: recall-extractor
spec:
  replicas: 2
  selector:
    matchLabels: {app.kubernetes.io/name: recall-extractor}
  template:
    metadata:
      labels: {app.kubernetes.io/name: recall-extractor}
    spec:
      containers:
        - name: extractor
          image: ghcr.io/recallhq/recall:v1
`

func TestDecodeManifestsIsStrict(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"valid", deployment, ""},
		{"unknown field", strings.Replace(deployment, "  replicas: 2", "  replica: 2", 1), `unknown field "replica"`},
		{"wrong type", strings.Replace(deployment, "  replicas: 2", "  replicas: two", 1), "replicas"},
		{"unknown kind", "apiVersion: v1\nkind: Pod2\nmetadata: {name: x}\n", "unknown apiVersion/kind"},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", "missing apiVersion or kind"},
		{"duplicate key", deployment + "  replicas: 3\n", "replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, errs := decodeManifests("test", []byte(tt.doc))
			if tt.wantErr == "" {
				if len(errs) != 0 || len(objs) != 1 {
					t.Fatalf("objs=%d errs=%v", len(objs), errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs[0].Error(), tt.wantErr) {
				t.Fatalf("errs = %v, want one containing %q", errs, tt.wantErr)
			}
		})
	}
}

func TestSplitDocs(t *testing.T) {
	docs := splitDocs([]byte("# header only\n---\na: 1\n---\n\n---\nb: 2\n"))
	if len(docs) != 2 {
		t.Fatalf("got %d docs: %q", len(docs), docs)
	}
}

func TestScaledObjectCappedAtPartitions(t *testing.T) {
	scaled := `apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: recall-extractor}
spec:
  scaleTargetRef: {name: recall-extractor}
  minReplicaCount: 2
  maxReplicaCount: 32
  triggers:
    - type: prometheus
      metadata:
        serverAddress: http://prometheus:9090
        query: sum({__name__=~"nats_consumer_num_pending|nats_consumer_num_ack_pending", stream_name="RECALL_EXTRACT", consumer_name=~"recall-extract-[0-9]+"})
        threshold: "8"
`
	config := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: recall-config}\ndata: {RECALL_PARTITIONS: \"16\"}\n"
	objs, errs := decodeManifests("test", []byte(deployment+"---\n"+scaled+"---\n"+config))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	c := &checker{}
	c.checkSet("test", objs)
	found := false
	for _, e := range c.errs {
		found = found || strings.Contains(e, "maxReplicaCount 32 must equal RECALL_PARTITIONS 16")
	}
	if !found {
		t.Errorf("errors %q lack the partition cap", c.errs)
	}
	// The bare Deployment also lacks hardening, probes and a PDB.
	for _, want := range []string{"runAsNonRoot", "no securityContext", "liveness probe", "PodDisruptionBudget"} {
		if !strings.Contains(strings.Join(c.errs, "\n"), want) {
			t.Errorf("errors lack %q", want)
		}
	}
}

func TestShardReadersDivideShards(t *testing.T) {
	trigger := strings.NewReplacer("recall-extractor", "recall-trigger", "replicas: 2", "replicas: 5").Replace(deployment)
	config := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: recall-config}\ndata: {RECALL_SHARDS: \"12\"}\n"
	objs, errs := decodeManifests("test", []byte(trigger+"---\n"+config))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	c := &checker{}
	c.checkSet("test", objs)
	if !strings.Contains(strings.Join(c.errs, "\n"), "5 replicas do not divide RECALL_SHARDS=12") {
		t.Errorf("errors %q lack the shard division", c.errs)
	}
}

// TestComposeNeedsThreeNodeCluster checks that a compose file with one NATS
// server (the layout before shards) is rejected for the cluster rules.
func TestComposeNeedsThreeNodeCluster(t *testing.T) {
	dir := t.TempDir()
	single := `services:
  nats:
    image: nats:2.14.2-alpine
    command: [nats-server, --jetstream, --http_port=8222]
    healthcheck: {test: ["CMD", "true"]}
  trigger:
    image: recall:local
    command: [trigger]
    read_only: true
    cap_drop: [ALL]
    healthcheck: {test: ["CMD", "true"]}
    environment: {RECALL_NATS_URL: "nats://nats:4222", RECALL_REPLICAS: "1"}
`
	if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte(single), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &checker{root: dir}
	c.checkCompose("docker-compose.yml")
	got := strings.Join(c.errs, "\n")
	for _, want := range []string{`no service "nats-2"`, "must join the cluster", "RECALL_NATS_URL must list every NATS node",
		"RECALL_REPLICAS must be 3", "RECALL_SHARDS must be set"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
}

func TestAllInterfacesPort(t *testing.T) {
	for addr, want := range map[string]string{"0.0.0.0:8090": "8090", ":8090": "8090", "[::]:8090": "8090",
		"127.0.0.1:8090": "", "localhost:8090": "", "0.0.0.0:0": "", "": "", "8090": ""} {
		port, ok := allInterfacesPort(addr)
		if got := map[bool]string{true: port}[ok]; got != want {
			t.Errorf("allInterfacesPort(%q) = %q, %v; want %q", addr, port, ok, want)
		}
	}
}
