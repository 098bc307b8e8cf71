package main

import (
	"context"
	"os"
	"slices"
	"sort"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// recallServices are the compose services that run the recall image, by
// subcommand.
var recallServices = []string{"ingest", "trigger", "extractor", "compactor"}

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
	for _, want := range append([]string{"nats", "nats-exporter", "jaeger", "prometheus"}, recallServices...) {
		if _, ok := p.Services[want]; !ok {
			c.fail("%s: no service %q", rel, want)
		}
	}
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
		if v := s.Environment["RECALL_NATS_URL"]; v == nil || *v != "nats://nats:4222" {
			c.fail("%s: service %s: RECALL_NATS_URL must be nats://nats:4222", rel, name)
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
	if nats, ok := p.Services["nats"]; ok {
		if !slices.Contains(nats.Command, "--jetstream") || !slices.Contains(nats.Command, "--http_port=8222") {
			c.fail("%s: nats must run with --jetstream and monitoring on 8222", rel)
		}
		if nats.HealthCheck == nil {
			c.fail("%s: nats has no health check", rel)
		}
		// This NATS has no authentication: publishing its ports beyond the
		// host's loopback would open every tenant's data to the network.
		for _, port := range nats.Ports {
			if port.Published != "" && port.HostIP != "127.0.0.1" && port.HostIP != "::1" {
				c.fail("%s: nats publishes port %d on %q: bind it to 127.0.0.1 (the server runs without authentication)", rel, port.Target, port.HostIP)
			}
		}
	}
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				if _, err := os.Stat(v.Source); err != nil {
					c.fail("%s: service %s mounts %s: %v", rel, name, v.Source, err)
				}
			}
		}
	}
	if len(c.errs) == n {
		c.ok("%s: one image, health checks, extractor x3, offline provider, known RECALL_* names, mounted files exist", rel)
	}
}
