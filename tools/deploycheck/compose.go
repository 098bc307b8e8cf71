package main

import (
	"context"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// recallServices are the compose services that run the recall image, by
// subcommand.
var recallServices = []string{"ingest", "trigger", "extractor", "compactor", "indexer", "longterm", "gateway"}

// shardReaders are the services whose replicas share the transcript's
// shards: a replica count that divides RECALL_SHARDS gives every replica
// as many shards.
var shardReaders = []string{"trigger", "indexer", "longterm"}

// checkCompose loads the compose file the way `docker compose` does (schema
// validation, interpolation with an empty environment) and checks the
// pipeline it describes.
func (c *checker) checkCompose(rel string) {
	details := types.ConfigDetails{
		WorkingDir:  c.root,
		ConfigFiles: []types.ConfigFile{{Filename: c.path(rel)}},
		Environment: types.Mapping{},
	}
	p, err := loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("recall", true)
	})
	if err != nil {
		c.fail("%s: %v", rel, err)
		return
	}
	c.ok("%s: valid against the Compose specification (%d services)", rel, len(p.Services))
	n := len(c.errs)
	for _, want := range append(append([]string{"nats-exporter", "jaeger", "prometheus"}, natsNodes...), recallServices...) {
		if _, ok := p.Services[want]; !ok {
			c.fail("%s: no service %q", rel, want)
		}
	}
	c.checkComposeRecall(rel, p)
	c.checkComposeGateway(rel, p)
	c.checkComposeShards(rel, p)
	c.checkComposeNATS(rel, p)
	c.checkComposeMounts(rel, p)
	if len(c.errs) == n {
		c.ok("%s: one image, health checks, the gateway on all interfaces and published, extractor x3, offline provider, known RECALL_* names, a 3-node NATS cluster every service reaches, RECALL_REPLICAS=3, shard readers dividing RECALL_SHARDS, mounted files exist", rel)
	}
}

// checkComposeRecall checks the services that run the recall image.
func (c *checker) checkComposeRecall(rel string, p *types.Project) {
	image := ""
	for _, name := range recallServices {
		s, ok := p.Services[name]
		if !ok {
			continue
		}
		if len(s.Command) == 0 || s.Command[0] != name {
			c.fail("%s: service %s must run `recall %s`, runs %v", rel, name, name, s.Command)
		}
		if image == "" {
			image = s.Image
		} else if s.Image != image {
			c.fail("%s: service %s uses image %q, others %q: one image runs every service", rel, name, s.Image, image)
		}
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
			c.fail("%s: service %s has no health check", rel, name)
		}
		if !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") {
			c.fail("%s: service %s must be read_only with cap_drop ALL", rel, name)
		}
		var names []string
		for k := range s.Environment {
			names = append(names, k)
		}
		sort.Strings(names)
		c.checkEnvNames(rel+": service "+name, names)
		if v := s.Environment["RECALL_NATS_URL"]; v == nil || *v != natsURLs() {
			c.fail("%s: service %s: RECALL_NATS_URL must list every NATS node, %s", rel, name, natsURLs())
		}
		if v := s.Environment["RECALL_REPLICAS"]; v == nil || *v != strconv.Itoa(len(natsNodes)) {
			c.fail("%s: service %s: RECALL_REPLICAS must be %d (one replica per NATS node)", rel, name, len(natsNodes))
		}
		if v := s.Environment["RECALL_SHARDS"]; v == nil || *v == "" {
			c.fail("%s: service %s: RECALL_SHARDS must be set (fixed once the streams exist)", rel, name)
		}
	}
	if ex, ok := p.Services["extractor"]; ok {
		if ex.Deploy == nil || ex.Deploy.Replicas == nil || *ex.Deploy.Replicas != 3 {
			c.fail("%s: extractor must run 3 replicas (deploy.replicas)", rel)
		}
		if v := ex.Environment["RECALL_LLM_PROVIDER"]; v == nil || *v != "offline" {
			c.fail("%s: the extractor's default LLM provider must be offline", rel)
		}
	}
}

// checkComposeGateway checks that the model gateway listens on every
// interface of its container (RECALL_GATEWAY_ADDR defaults to loopback,
// which nothing outside the container reaches) and publishes that port.
func (c *checker) checkComposeGateway(rel string, p *types.Project) {
	s, ok := p.Services["gateway"]
	if !ok {
		return // reported with the missing services
	}
	var addr string
	if v := s.Environment["RECALL_GATEWAY_ADDR"]; v != nil {
		addr = *v
	}
	port, ok := allInterfacesPort(addr)
	if !ok {
		c.fail("%s: service gateway: RECALL_GATEWAY_ADDR must listen on all interfaces (0.0.0.0:<port>), not %q", rel, addr)
		return
	}
	if !slices.ContainsFunc(s.Ports, func(pc types.ServicePortConfig) bool {
		return strconv.Itoa(int(pc.Target)) == port && pc.Published != ""
	}) {
		c.fail("%s: service gateway: port %s (RECALL_GATEWAY_ADDR) is not published", rel, port)
	}
}

// allInterfacesPort returns the port of a listen address on every
// interface (0.0.0.0:p, [::]:p or :p).
func allInterfacesPort(addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return "", false
	}
	return port, host == "" || host == "0.0.0.0" || host == "::"
}

// checkComposeShards checks that the shard readers run several replicas,
// each count dividing RECALL_SHARDS.
func (c *checker) checkComposeShards(rel string, p *types.Project) {
	for _, name := range shardReaders {
		s, ok := p.Services[name]
		if !ok {
			continue
		}
		v := s.Environment["RECALL_SHARDS"]
		if v == nil {
			continue // reported by checkComposeRecall
		}
		shards, err := strconv.Atoi(*v)
		if err != nil || shards <= 0 {
			c.fail("%s: service %s: RECALL_SHARDS %q is not a positive number", rel, name, *v)
			continue
		}
		if s.Deploy == nil || s.Deploy.Replicas == nil || *s.Deploy.Replicas < 2 || shards%*s.Deploy.Replicas != 0 {
			c.fail("%s: %s must run several replicas (deploy.replicas) dividing RECALL_SHARDS=%d: they share the shards", rel, name, shards)
		}
	}
}

// natsNodes are the compose services of the NATS cluster.
var natsNodes = []string{"nats", "nats-2", "nats-3"}

// natsURLs is the RECALL_NATS_URL that names every node.
func natsURLs() string {
	u := make([]string, len(natsNodes))
	for i, n := range natsNodes {
		u[i] = "nats://" + n + ":4222"
	}
	return strings.Join(u, ",")
}

// checkComposeNATS checks that the NATS nodes form one JetStream cluster
// (every node routes to every node) and publish nothing beyond loopback.
func (c *checker) checkComposeNATS(rel string, p *types.Project) {
	var routes []string
	for _, n := range natsNodes {
		routes = append(routes, "nats://"+n+":6222")
	}
	wantRoutes := "--routes=" + strings.Join(routes, ",")
	for _, name := range natsNodes {
		nats, ok := p.Services[name]
		if !ok {
			continue
		}
		if !slices.Contains(nats.Command, "--jetstream") || !slices.Contains(nats.Command, "--http_port=8222") {
			c.fail("%s: %s must run with --jetstream and monitoring on 8222", rel, name)
		}
		if !slices.Contains(nats.Command, "--cluster=nats://0.0.0.0:6222") || !slices.Contains(nats.Command, wantRoutes) ||
			!slices.ContainsFunc(nats.Command, func(a string) bool { return strings.HasPrefix(a, "--cluster_name=") }) {
			c.fail("%s: %s must join the cluster: --cluster_name, --cluster=nats://0.0.0.0:6222 and %s", rel, name, wantRoutes)
		}
		if nats.HealthCheck == nil {
			c.fail("%s: %s has no health check", rel, name)
		}
		// This NATS has no authentication: publishing its ports beyond the
		// host's loopback would open every tenant's data to the network.
		for _, port := range nats.Ports {
			if port.Published != "" && port.HostIP != "127.0.0.1" && port.HostIP != "::1" {
				c.fail("%s: %s publishes port %d on %q: bind it to 127.0.0.1 (the server runs without authentication)", rel, name, port.Target, port.HostIP)
			}
		}
	}
}

// checkComposeMounts checks that every bind-mounted file exists.
func (c *checker) checkComposeMounts(rel string, p *types.Project) {
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				if _, err := os.Stat(v.Source); err != nil {
					c.fail("%s: service %s mounts %s: %v", rel, name, v.Source, err)
				}
			}
		}
	}
}
