package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// object is one decoded manifest.
type object struct {
	source     string // file#index
	apiVersion string
	kind       string
	name       string
	obj        any // pointer to the typed value
}

// typeMeta reads a document's apiVersion, kind and name before the strict
// decode picks its type.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

// newTyped returns a pointer to the Go type of apiVersion/kind, or nil.
func newTyped(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1/Namespace":
		return &corev1.Namespace{}
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}
	case "keda.sh/v1alpha1/ScaledObject":
		return &ScaledObject{}
	case "monitoring.coreos.com/v1/PodMonitor":
		return &PodMonitor{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &PrometheusRule{}
	}
	return nil
}

// splitDocs splits a multi-document YAML stream at "---" lines.
func splitDocs(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if len(bytes.TrimSpace(stripComments(cur.Bytes()))) > 0 {
			docs = append(docs, slices.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if t := bytes.TrimRight(line, " \t\r\n"); bytes.Equal(t, []byte("---")) {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs
}

func stripComments(b []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out.Write(line)
		}
	}
	return out.Bytes()
}

// decodeManifests decodes every document of data strictly into its type.
func decodeManifests(source string, data []byte) ([]object, []error) {
	var objs []object
	var errs []error
	for i, doc := range splitDocs(data) {
		src := fmt.Sprintf("%s#%d", source, i)
		var tm typeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			errs = append(errs, fmt.Errorf("%s: not YAML: %w", src, err))
			continue
		}
		if tm.APIVersion == "" || tm.Kind == "" {
			errs = append(errs, fmt.Errorf("%s: missing apiVersion or kind", src))
			continue
		}
		if tm.Metadata.Name == "" {
			errs = append(errs, fmt.Errorf("%s: %s without metadata.name", src, tm.Kind))
		}
		obj := newTyped(tm.APIVersion, tm.Kind)
		if obj == nil {
			errs = append(errs, fmt.Errorf("%s: unknown apiVersion/kind %s/%s (add it to deploycheck)", src, tm.APIVersion, tm.Kind))
			continue
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s %s): %w", src, tm.Kind, tm.Metadata.Name, err))
			continue
		}
		objs = append(objs, object{source: src, apiVersion: tm.APIVersion, kind: tm.Kind, name: tm.Metadata.Name, obj: obj})
	}
	return objs, errs
}

// checkManifestTree strictly decodes every manifest file under dir except
// kustomizations (kustomize build reads those) and Helm values.
func (c *checker) checkManifestTree(dir string) {
	count := 0
	err := filepath.WalkDir(c.path(dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			return nil
		}
		base := filepath.Base(p)
		if base == "kustomization.yaml" || base == "nats-values.yaml" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.root, p)
		objs, errs := decodeManifests(rel, data)
		for _, e := range errs {
			c.fail("%v", e)
		}
		if len(errs) == 0 {
			c.ok("%s: %d object(s) decode strictly", rel, len(objs))
		}
		count++
		return nil
	})
	if err != nil {
		c.fail("walking %s: %v", dir, err)
	}
	if count == 0 {
		c.fail("%s: no manifests found", dir)
	}
}

// checkRendered validates one `kustomize build` output as a whole.
func (c *checker) checkRendered(name, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		c.fail("rendered %s: %v", name, err)
		return
	}
	objs, errs := decodeManifests("kustomize build "+name, data)
	for _, e := range errs {
		c.fail("%v", e)
	}
	if len(errs) > 0 {
		return
	}
	c.ok("kustomize build %s: %d object(s) decode strictly", name, len(objs))
	n := len(c.errs)
	c.checkSet(name, objs)
	if len(c.errs) == n {
		c.ok("kustomize build %s: pods hardened, probes, resources, PDBs, services, config names, scaling", name)
	}
}

func byKind[T any](objs []object) []*T {
	var out []*T
	for _, o := range objs {
		if t, ok := o.obj.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}

// checkSet applies Recall's rules to a rendered set of objects.
func (c *checker) checkSet(set string, objs []object) {
	deps := byKind[appsv1.Deployment](objs)
	if len(deps) == 0 {
		c.fail("%s: no Deployment", set)
	}
	configMaps := map[string]*corev1.ConfigMap{}
	for _, cm := range byKind[corev1.ConfigMap](objs) {
		configMaps[cm.Name] = cm
		var keys []string
		for k := range cm.Data {
			keys = append(keys, k)
		}
		c.checkEnvNames(set+": ConfigMap "+cm.Name, keys)
	}
	pdbs := byKind[policyv1.PodDisruptionBudget](objs)
	for _, d := range deps {
		where := set + ": Deployment " + d.Name
		c.checkPod(where, d.Spec.Template, configMaps)
		if d.Spec.Selector == nil || !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			c.fail("%s: selector does not match the pod template labels", where)
		}
		if !slices.ContainsFunc(pdbs, func(p *policyv1.PodDisruptionBudget) bool {
			return p.Spec.Selector != nil && selects(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}) {
			c.fail("%s: no PodDisruptionBudget selects its pods", where)
		}
	}
	for _, p := range pdbs {
		if (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil) {
			c.fail("%s: PodDisruptionBudget %s needs exactly one of minAvailable, maxUnavailable", set, p.Name)
		}
	}
	for _, s := range byKind[corev1.Service](objs) {
		c.checkService(set, s, deps)
	}
	for _, so := range byKind[ScaledObject](objs) {
		c.checkScaledObject(set, so, deps, configMaps)
	}
	c.checkShardReaders(set, deps, configMaps)
	c.checkServicesPresent(set, deps)
	c.checkGatewayDeployment(set, deps)
	for _, pm := range byKind[PodMonitor](objs) {
		if pm.Spec.Selector.MatchLabels == nil && len(pm.Spec.Selector.MatchExpressions) == 0 {
			c.fail("%s: PodMonitor %s selects nothing", set, pm.Name)
		}
		if len(pm.Spec.PodMetricsEndpoints) == 0 {
			c.fail("%s: PodMonitor %s has no endpoints", set, pm.Name)
		}
	}
	for _, pr := range byKind[PrometheusRule](objs) {
		c.checkRuleGroups(set+": PrometheusRule "+pr.Name, pr.Spec.Groups)
	}
}

// checkServicesPresent checks that every Recall service (recallServices)
// runs as Deployment recall-<service> with that subcommand.
func (c *checker) checkServicesPresent(set string, deps []*appsv1.Deployment) {
	for _, name := range recallServices {
		i := slices.IndexFunc(deps, func(d *appsv1.Deployment) bool { return d.Name == "recall-"+name })
		if i < 0 {
			c.fail("%s: no Deployment recall-%s (every service of `recall config` runs)", set, name)
			continue
		}
		cts := deps[i].Spec.Template.Spec.Containers
		if len(cts) == 0 || len(cts[0].Args) == 0 || cts[0].Args[0] != name {
			c.fail("%s: Deployment recall-%s must run `recall %s`", set, name, name)
		}
	}
}

// checkGatewayDeployment checks that the gateway's container listens on
// every interface (RECALL_GATEWAY_ADDR defaults to loopback, unreachable
// from outside the pod) on a port it declares, and that its readiness does
// not wait for NATS: the gateway fails open, so it is ready when its own
// port answers /healthz.
func (c *checker) checkGatewayDeployment(set string, deps []*appsv1.Deployment) {
	i := slices.IndexFunc(deps, func(d *appsv1.Deployment) bool { return d.Name == "recall-gateway" })
	if i < 0 || len(deps[i].Spec.Template.Spec.Containers) == 0 {
		return // reported by checkServicesPresent
	}
	where := set + ": Deployment recall-gateway"
	ct := deps[i].Spec.Template.Spec.Containers[0]
	addr := ""
	for _, e := range ct.Env {
		if e.Name == "RECALL_GATEWAY_ADDR" {
			addr = e.Value
		}
	}
	port, ok := allInterfacesPort(addr)
	if !ok {
		c.fail("%s: RECALL_GATEWAY_ADDR must listen on all interfaces (0.0.0.0:<port>), not %q", where, addr)
		return
	}
	var name string
	for _, p := range ct.Ports {
		if strconv.Itoa(int(p.ContainerPort)) == port {
			name = p.Name
		}
	}
	if name == "" {
		c.fail("%s: port %s of RECALL_GATEWAY_ADDR is not a container port", where, port)
		return
	}
	if pr := ct.ReadinessProbe; pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/healthz" || (pr.HTTPGet.Port.String() != name && pr.HTTPGet.Port.String() != port) {
		c.fail("%s: readiness must be /healthz on the gateway port %s (it forwards without NATS: fail open)", where, name)
	}
}

func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (c *checker) checkPod(where string, t corev1.PodTemplateSpec, configMaps map[string]*corev1.ConfigMap) {
	ps := t.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		c.fail("%s: pod securityContext.runAsNonRoot must be true", where)
	}
	if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		c.fail("%s: pod seccompProfile must be RuntimeDefault", where)
	}
	if t.Spec.Affinity == nil || t.Spec.Affinity.PodAntiAffinity == nil {
		c.fail("%s: no pod anti-affinity", where)
	}
	volumes := map[string]bool{}
	for _, v := range t.Spec.Volumes {
		volumes[v.Name] = true
	}
	for _, ct := range t.Spec.Containers {
		cw := where + " container " + ct.Name
		if !strings.Contains(ct.Image, "/") {
			c.fail("%s: image %q is not a registry path (is the kustomize images mapping missing?)", cw, ct.Image)
		}
		sc := ct.SecurityContext
		switch {
		case sc == nil:
			c.fail("%s: no securityContext", cw)
		default:
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				c.fail("%s: readOnlyRootFilesystem must be true", cw)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				c.fail("%s: allowPrivilegeEscalation must be false", cw)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				c.fail("%s: capabilities must drop ALL", cw)
			}
		}
		ports := map[string]bool{}
		for _, p := range ct.Ports {
			ports[p.Name] = true
			ports[strconv.Itoa(int(p.ContainerPort))] = true
		}
		for name, pr := range map[string]*corev1.Probe{"liveness": ct.LivenessProbe, "readiness": ct.ReadinessProbe} {
			if pr == nil || pr.HTTPGet == nil {
				c.fail("%s: no HTTP %s probe", cw, name)
				continue
			}
			if !ports[pr.HTTPGet.Port.String()] {
				c.fail("%s: %s probe port %s is not a container port", cw, name, pr.HTTPGet.Port.String())
			}
		}
		if ct.Resources.Requests.Cpu().IsZero() || ct.Resources.Requests.Memory().IsZero() {
			c.fail("%s: needs cpu and memory requests", cw)
		}
		if ct.Resources.Limits.Memory().IsZero() {
			c.fail("%s: needs a memory limit", cw)
		}
		for _, m := range ct.VolumeMounts {
			if !volumes[m.Name] {
				c.fail("%s: volumeMount %s has no volume", cw, m.Name)
			}
		}
		var names []string
		for _, e := range ct.Env {
			names = append(names, e.Name)
		}
		c.checkEnvNames(cw, names)
		for _, ef := range ct.EnvFrom {
			if ef.ConfigMapRef != nil && configMaps[ef.ConfigMapRef.Name] == nil && (ef.ConfigMapRef.Optional == nil || !*ef.ConfigMapRef.Optional) {
				c.fail("%s: envFrom ConfigMap %s is not in the build", cw, ef.ConfigMapRef.Name)
			}
		}
	}
}

func (c *checker) checkService(set string, s *corev1.Service, deps []*appsv1.Deployment) {
	where := set + ": Service " + s.Name
	var target *appsv1.Deployment
	for _, d := range deps {
		if selects(s.Spec.Selector, d.Spec.Template.Labels) {
			target = d
		}
	}
	if target == nil {
		c.fail("%s: selector %v matches no Deployment's pods", where, s.Spec.Selector)
		return
	}
	for _, p := range s.Spec.Ports {
		if p.TargetPort.Type != intstr.String {
			continue
		}
		found := false
		for _, ct := range target.Spec.Template.Spec.Containers {
			for _, cp := range ct.Ports {
				found = found || cp.Name == p.TargetPort.StrVal
			}
		}
		if !found {
			c.fail("%s: targetPort %s is not a port of %s", where, p.TargetPort.StrVal, target.Name)
		}
	}
}

// ScaledObject is the part of KEDA's keda.sh/v1alpha1 ScaledObject that
// Recall uses; unknown fields fail the strict decode.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef *struct {
			APIVersion             string `json:"apiVersion,omitempty"`
			Kind                   string `json:"kind,omitempty"`
			Name                   string `json:"name"`
			EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval       *int32 `json:"pollingInterval,omitempty"`
		InitialCooldownPeriod *int32 `json:"initialCooldownPeriod,omitempty"`
		CooldownPeriod        *int32 `json:"cooldownPeriod,omitempty"`
		IdleReplicaCount      *int32 `json:"idleReplicaCount,omitempty"`
		MinReplicaCount       *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount       *int32 `json:"maxReplicaCount,omitempty"`
		Advanced              *struct {
			RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
			HorizontalPodAutoscalerConfig *struct {
				Name     string                                         `json:"name,omitempty"`
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			MetricType        string            `json:"metricType,omitempty"`
			UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
		Fallback *struct {
			FailureThreshold int32  `json:"failureThreshold"`
			Replicas         int32  `json:"replicas"`
			Behavior         string `json:"behavior,omitempty"`
		} `json:"fallback,omitempty"`
	} `json:"spec"`
}

var extractConsumerRE = regexp.MustCompile(`consumer_name=~"recall-extract-`)

func (c *checker) checkScaledObject(set string, so *ScaledObject, deps []*appsv1.Deployment, configMaps map[string]*corev1.ConfigMap) {
	where := set + ": ScaledObject " + so.Name
	sp := so.Spec
	if sp.ScaleTargetRef == nil || sp.ScaleTargetRef.Name == "" {
		c.fail("%s: spec.scaleTargetRef.name is required", where)
		return
	}
	if !slices.ContainsFunc(deps, func(d *appsv1.Deployment) bool { return d.Name == sp.ScaleTargetRef.Name }) {
		c.fail("%s: target %s is not a Deployment of the build", where, sp.ScaleTargetRef.Name)
	}
	if len(sp.Triggers) == 0 {
		c.fail("%s: no triggers", where)
	}
	for i, t := range sp.Triggers {
		if t.Type != "prometheus" {
			continue
		}
		for _, k := range []string{"serverAddress", "query", "threshold"} {
			if t.Metadata[k] == "" {
				c.fail("%s: trigger %d: metadata.%s is required", where, i, k)
			}
		}
		if _, err := strconv.ParseFloat(t.Metadata["threshold"], 64); err != nil {
			c.fail("%s: trigger %d: threshold %q is not a number", where, i, t.Metadata["threshold"])
		}
		q := t.Metadata["query"]
		if !strings.Contains(q, "RECALL_EXTRACT") || !extractConsumerRE.MatchString(q) ||
			!strings.Contains(q, "num_pending") || !strings.Contains(q, "num_ack_pending") {
			c.fail("%s: trigger %d: query must sum num_pending and num_ack_pending of the recall-extract-* consumers of RECALL_EXTRACT", where, i)
		}
	}
	if sp.MinReplicaCount == nil || sp.MaxReplicaCount == nil {
		c.fail("%s: set minReplicaCount and maxReplicaCount", where)
		return
	}
	if *sp.MaxReplicaCount < *sp.MinReplicaCount {
		c.fail("%s: maxReplicaCount %d < minReplicaCount %d", where, *sp.MaxReplicaCount, *sp.MinReplicaCount)
	}
	partitions := 16 // the default of RECALL_PARTITIONS
	for _, cm := range configMaps {
		if v, ok := cm.Data["RECALL_PARTITIONS"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				c.fail("%s: ConfigMap %s: RECALL_PARTITIONS %q is not a number", set, cm.Name, v)
				continue
			}
			partitions = n
		}
	}
	if int(*sp.MaxReplicaCount) != partitions {
		c.fail("%s: maxReplicaCount %d must equal RECALL_PARTITIONS %d (workers beyond the partition count own nothing)", where, *sp.MaxReplicaCount, partitions)
	}
}

// PodMonitor is the part of monitoring.coreos.com/v1 PodMonitor Recall uses.
type PodMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector            metav1.LabelSelector `json:"selector"`
		NamespaceSelector   *struct{ Any bool }  `json:"namespaceSelector,omitempty"`
		PodMetricsEndpoints []struct {
			Port          string `json:"port,omitempty"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// PrometheusRule is monitoring.coreos.com/v1 PrometheusRule.
type PrometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []RuleGroup `json:"groups"`
	} `json:"spec"`
}
