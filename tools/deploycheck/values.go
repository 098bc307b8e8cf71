package main

import (
	"os"

	"sigs.k8s.io/yaml"
)

// natsValues is the part of the NATS Helm chart's values Recall relies on.
// The chart's own schema is not available offline, so the file is decoded
// loosely and the keys that matter are checked.
type natsValues struct {
	Config struct {
		Cluster struct {
			Enabled  bool `json:"enabled"`
			Replicas int  `json:"replicas"`
		} `json:"cluster"`
		JetStream struct {
			Enabled   bool `json:"enabled"`
			FileStore struct {
				Enabled *bool `json:"enabled"`
				PVC     struct {
					Enabled *bool  `json:"enabled"`
					Size    string `json:"size"`
				} `json:"pvc"`
			} `json:"fileStore"`
		} `json:"jetstream"`
		Monitor struct {
			Enabled *bool `json:"enabled"`
		} `json:"monitor"`
	} `json:"config"`
	PromExporter struct {
		Enabled    bool `json:"enabled"`
		PodMonitor struct {
			Enabled bool `json:"enabled"`
		} `json:"podMonitor"`
	} `json:"promExporter"`
}

func (c *checker) checkNATSValues(rel string) {
	data, err := os.ReadFile(c.path(rel))
	if err != nil {
		c.fail("%s: %v", rel, err)
		return
	}
	var v natsValues
	if err := yaml.Unmarshal(data, &v); err != nil {
		c.fail("%s: %v", rel, err)
		return
	}
	n := len(c.errs)
	if !v.Config.Cluster.Enabled || v.Config.Cluster.Replicas != 3 {
		c.fail("%s: config.cluster must be enabled with replicas: 3", rel)
	}
	js := v.Config.JetStream
	if !js.Enabled || (js.FileStore.Enabled != nil && !*js.FileStore.Enabled) ||
		(js.FileStore.PVC.Enabled != nil && !*js.FileStore.PVC.Enabled) || js.FileStore.PVC.Size == "" {
		c.fail("%s: JetStream must be enabled with a file store on a sized PVC", rel)
	}
	if v.Config.Monitor.Enabled != nil && !*v.Config.Monitor.Enabled {
		c.fail("%s: monitoring must stay enabled (the exporter and KEDA read it)", rel)
	}
	if !v.PromExporter.Enabled || !v.PromExporter.PodMonitor.Enabled {
		c.fail("%s: promExporter and its podMonitor must be enabled (KEDA's query reads the consumer metrics)", rel)
	}
	if len(c.errs) == n {
		c.ok("%s: 3-node JetStream cluster, file store PVCs, exporter with PodMonitor", rel)
	}
}
