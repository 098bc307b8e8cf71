package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"
)

// promConfig is the part of a Prometheus configuration the compose setup
// uses; unknown fields fail the strict decode.
type promConfig struct {
	Global struct {
		ScrapeInterval     string `json:"scrape_interval,omitempty"`
		EvaluationInterval string `json:"evaluation_interval,omitempty"`
	} `json:"global"`
	RuleFiles     []string `json:"rule_files,omitempty"`
	ScrapeConfigs []struct {
		JobName       string `json:"job_name"`
		MetricsPath   string `json:"metrics_path,omitempty"`
		StaticConfigs []struct {
			Targets []string          `json:"targets"`
			Labels  map[string]string `json:"labels,omitempty"`
		} `json:"static_configs,omitempty"`
		DNSSDConfigs []struct {
			Names           []string `json:"names"`
			Type            string   `json:"type,omitempty"`
			Port            int      `json:"port,omitempty"`
			RefreshInterval string   `json:"refresh_interval,omitempty"`
		} `json:"dns_sd_configs,omitempty"`
		RelabelConfigs []map[string]any `json:"relabel_configs,omitempty"`
	} `json:"scrape_configs"`
}

// RuleGroup is a Prometheus rule group (rule files and PrometheusRule).
type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []struct {
		Record      string            `json:"record,omitempty"`
		Alert       string            `json:"alert,omitempty"`
		Expr        string            `json:"expr"`
		For         string            `json:"for,omitempty"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"rules"`
}

type ruleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// checkPrometheusConfig decodes the compose Prometheus configuration and its
// rules strictly, checks every Recall service and NATS are scraped, and
// that the Kubernetes PrometheusRule carries the same rules.
func (c *checker) checkPrometheusConfig(rel, rulesRel string) {
	data, err := os.ReadFile(c.path(rel))
	if err != nil {
		c.fail("%s: %v", rel, err)
		return
	}
	var pc promConfig
	if err := yaml.UnmarshalStrict(data, &pc); err != nil {
		c.fail("%s: %v", rel, err)
		return
	}
	n := len(c.errs)
	jobs := map[string]bool{}
	for _, sc := range pc.ScrapeConfigs {
		jobs[sc.JobName] = true
		if len(sc.StaticConfigs) == 0 && len(sc.DNSSDConfigs) == 0 {
			c.fail("%s: job %s has no targets", rel, sc.JobName)
		}
	}
	for _, want := range []string{"recall-ingest", "recall-trigger", "recall-extractor", "recall-compactor", "recall-gateway", "nats"} {
		if !jobs[want] {
			c.fail("%s: no scrape job %s", rel, want)
		}
	}
	for _, rf := range pc.RuleFiles {
		if filepath.Base(rf) != filepath.Base(rulesRel) {
			c.fail("%s: rule file %s is not %s", rel, rf, rulesRel)
		}
	}
	if len(c.errs) == n {
		c.ok("%s: decodes strictly; scrapes every service and NATS", rel)
	}

	rdata, err := os.ReadFile(c.path(rulesRel))
	if err != nil {
		c.fail("%s: %v", rulesRel, err)
		return
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(rdata, &rf); err != nil {
		c.fail("%s: %v", rulesRel, err)
		return
	}
	c.checkRuleGroups(rulesRel, rf.Groups)
	c.composeRules = rf.Groups
}

func (c *checker) checkRuleGroups(where string, groups []RuleGroup) {
	n := len(c.errs)
	if len(groups) == 0 {
		c.fail("%s: no rule groups", where)
	}
	for _, g := range groups {
		for i, r := range g.Rules {
			if (r.Record == "") == (r.Alert == "") {
				c.fail("%s: group %s rule %d needs exactly one of record, alert", where, g.Name, i)
			}
			if strings.TrimSpace(r.Expr) == "" {
				c.fail("%s: group %s rule %d has no expr", where, g.Name, i)
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") || strings.Count(r.Expr, "{") != strings.Count(r.Expr, "}") {
				c.fail("%s: group %s rule %d: unbalanced brackets in %q", where, g.Name, i, r.Expr)
			}
		}
	}
	if c.composeRules != nil && !reflect.DeepEqual(c.composeRules, groups) {
		c.fail("%s: rules differ from deploy/prometheus/recall-rules.yml; keep them identical", where)
	}
	if len(c.errs) == n {
		c.ok("%s: %d rule group(s) well-formed", where, len(groups))
	}
}
