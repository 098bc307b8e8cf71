// Command deploycheck validates Recall's deployment files statically, without
// a Docker engine or a cluster:
//
//   - docker-compose.yml is loaded with compose-go (the loader of Docker
//     Compose v2: schema validation, interpolation, merge of anchors);
//   - every Kubernetes manifest under deploy/k8s and every `kustomize build`
//     output passed with -rendered is decoded strictly (unknown or mistyped
//     fields fail) into the k8s.io/api types, or, for the KEDA and Prometheus
//     Operator kinds, into local structs of the fields Recall uses;
//   - Recall's own rules are checked on top: hardened pods (non-root,
//     read-only root, no capabilities, RuntimeDefault seccomp), probes on
//     declared ports, resources, anti-affinity, a disruption budget per
//     Deployment, Services that select pods, RECALL_* names that `recall
//     config` knows, KEDA's maxReplicaCount equal to RECALL_PARTITIONS, the
//     Prometheus rules identical in compose and Kubernetes, the NATS Helm
//     values a 3-node JetStream cluster.
//
// Usage:
//
//	deploycheck -root . -config recall-config.txt -rendered base=/tmp/base.yaml -rendered production=/tmp/prod.yaml
//
// It prints one line per check and exits 1 after listing every problem.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type renderedFlag []string

func (r *renderedFlag) String() string     { return strings.Join(*r, ",") }
func (r *renderedFlag) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	root := flag.String("root", ".", "repository root")
	configFile := flag.String("config", "", "output of `recall config` (RECALL_* names); empty skips the name checks")
	var rendered renderedFlag
	flag.Var(&rendered, "rendered", "name=path of a `kustomize build` output (repeatable)")
	flag.Parse()

	c := &checker{root: *root}
	if *configFile != "" {
		names, err := readConfigNames(*configFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "deploycheck:", err)
			os.Exit(2)
		}
		c.known = names
	}
	c.run(rendered)
	for _, l := range c.log {
		fmt.Println(l)
	}
	if len(c.errs) > 0 {
		fmt.Fprintf(os.Stderr, "\ndeploycheck: %d problem(s):\n", len(c.errs))
		for _, e := range c.errs {
			fmt.Fprintln(os.Stderr, "  -", e)
		}
		os.Exit(1)
	}
	fmt.Println("deploycheck: all deployment files valid")
}

// checker accumulates results; every check reports all its problems.
type checker struct {
	root  string
	known map[string]bool // RECALL_* names from `recall config`; nil = unchecked
	log   []string
	errs  []string
	// composeRules are the rules of deploy/prometheus/recall-rules.yml, which
	// every PrometheusRule must repeat.
	composeRules []RuleGroup
}

func (c *checker) ok(format string, args ...any) {
	c.log = append(c.log, "ok   "+fmt.Sprintf(format, args...))
}

func (c *checker) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *checker) path(rel string) string { return filepath.Join(c.root, rel) }

func (c *checker) run(rendered []string) {
	n := len(c.errs)
	c.checkCompose("docker-compose.yml")
	c.checkPrometheusConfig("deploy/prometheus/prometheus.yml", "deploy/prometheus/recall-rules.yml")
	c.checkNATSValues("deploy/k8s/nats-values.yaml")
	c.checkManifestTree("deploy/k8s")
	for _, r := range rendered {
		name, p, ok := strings.Cut(r, "=")
		if !ok {
			c.fail("-rendered %q: want name=path", r)
			continue
		}
		c.checkRendered(name, p)
	}
	if len(c.errs) == n {
		c.ok("%d checks passed", len(c.log))
	}
}

// readConfigNames collects the RECALL_* names at the start of the lines of
// `recall config` output.
func readConfigNames(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading config names: %w", err)
	}
	defer f.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 && strings.HasPrefix(fields[0], "RECALL_") {
			names[fields[0]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading config names: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("reading config names: no RECALL_ variable in %s", path)
	}
	return names, nil
}

// checkEnvNames reports RECALL_* names that `recall config` does not list.
func (c *checker) checkEnvNames(where string, names []string) {
	if c.known == nil {
		return
	}
	var unknown []string
	for _, n := range names {
		if strings.HasPrefix(n, "RECALL_") && !c.known[n] {
			unknown = append(unknown, n)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		c.fail("%s: RECALL_* variables unknown to `recall config`: %s", where, strings.Join(unknown, ", "))
	}
}
