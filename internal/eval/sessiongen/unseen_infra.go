package sessiongen

import (
	"fmt"
	"strings"
)

// infraScenario: Terraform (GCP) and Kubernetes manifests for a staging
// and a production environment.
var infraScenario = uscenario{
	projects: []string{"platform-infra", "cluster-config", "ops-terraform"},
	branches: []string{"ops/staging-cleanup", "infra/node-pools", "main"},
	users:    []string{"sam", "oliveira", "ops"},
	words: []string{"gateway", "ledger", "search", "billing", "media", "notify", "catalog", "profile", "ingest", "thumbnail",
		"webhook", "mailer", "quota", "audit", "geo", "render", "pricing", "inbox", "upload", "presence"},
	files: infraFiles,
	tools: utooling{
		tests:   infraTests,
		lint:    infraLint,
		testFor: infraTestFile,
		grepLine: func(g *ugen, f ufile, sym string) string {
			return fmt.Sprintf("%s:%d:  %s = var.%s\n", f.path, 5+g.r.IntN(300), sym, sym)
		},
		inspect: infraInspect,
	},
	plants: infraPlants,
	latest: infraLatest,
	work:   "the staging Terraform and the Kubernetes manifests",
}

func infraFiles(g *ugen) []ufile {
	paths := []string{"terraform/envs/staging/main.tf", "terraform/modules/gke/main.tf", "k8s/base/gateway/deployment.yaml"}
	for i := 0; i < 4; i++ {
		w := g.word()
		if g.r.IntN(2) == 0 {
			paths = append(paths, "terraform/modules/"+w+"/main.tf")
		} else {
			paths = append(paths, "k8s/base/"+w+"/deployment.yaml")
		}
	}
	var out []ufile
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		if strings.HasSuffix(p, ".tf") {
			out = append(out, ufile{path: p, src: g.hclSource()})
		} else {
			out = append(out, ufile{path: p, src: g.manifestSource(p)})
		}
	}
	return out
}

const unusedVariable = "variable \"enable_legacy_flag\" {\n  type    = bool\n  default = false\n}\n"

// hclSource writes a plausible Terraform file of 3,000–6,000 tokens.
func (g *ugen) hclSource() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s and %s resources.\n\n%s\n", g.word(), g.word(), unusedVariable)
	pad(&b, 12000+g.r.IntN(12000), func() {
		a, c := g.word(), g.word()
		switch g.r.IntN(3) {
		case 0:
			fmt.Fprintf(&b, "resource \"google_compute_firewall\" \"%s_%s\" {\n  name    = \"%s-%s\"\n  network = google_compute_network.main.id\n\n  allow {\n    protocol = \"tcp\"\n    ports    = [\"%d\"]\n  }\n\n  source_ranges = [\"10.%d.0.0/16\"]\n  target_tags   = [\"%s\"]\n}\n\n", a, c, a, c, 1000+g.r.IntN(9000), g.r.IntN(250), a)
		case 1:
			fmt.Fprintf(&b, "variable \"%s_%s\" {\n  type        = number\n  description = \"Number of %s %s workers.\"\n  default     = %d\n}\n\n", a, c, a, c, 1+g.r.IntN(20))
		default:
			fmt.Fprintf(&b, "resource \"google_service_account\" \"%s\" {\n  account_id   = \"%s-%s\"\n  display_name = \"%s %s\"\n}\n\nresource \"google_project_iam_member\" \"%s_%s\" {\n  project = var.project_id\n  role    = \"roles/%s.viewer\"\n  member  = \"serviceAccount:${google_service_account.%s.email}\"\n}\n\n", a, a, c, a, c, a, c, g.pick("storage", "pubsub", "logging", "monitoring"), a)
		}
	})
	return b.String()
}

// manifestSource writes Kubernetes Deployments and Services of 3,000–6,000
// tokens.
func (g *ugen) manifestSource(path string) string {
	svc := strings.Split(path, "/")[2]
	var b strings.Builder
	pad(&b, 12000+g.r.IntN(12000), func() {
		name := svc + "-" + g.word()
		fmt.Fprintf(&b, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %s\n  labels:\n    app: %s\nspec:\n  replicas: %d\n  selector:\n    matchLabels:\n      app: %s\n  template:\n    metadata:\n      labels:\n        app: %s\n    spec:\n      containers:\n        - name: app\n          image: registry.internal/%s:1.%d.%d\n          ports:\n            - containerPort: %d\n          resources:\n            requests:\n              cpu: %dm\n              memory: %dMi\n          env:\n",
			name, name, 1+g.r.IntN(6), name, name, name, g.r.IntN(40), g.r.IntN(20), 8000+g.r.IntN(100), 50+g.r.IntN(400), 64+g.r.IntN(900))
		for i, n := 0, 2+g.r.IntN(6); i < n; i++ {
			fmt.Fprintf(&b, "            - name: %s_%s\n              value: \"%d\"\n", strings.ToUpper(g.word()), strings.ToUpper(g.word()), g.r.IntN(1000))
		}
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: %s\nspec:\n  selector:\n    app: %s\n  ports:\n    - port: 80\n      targetPort: %d\n---\n", name, name, 8000+g.r.IntN(100))
	})
	return b.String()
}

func infraTests(g *ugen) (string, string) {
	var b strings.Builder
	b.WriteString("terraform -chdir=terraform/envs/staging validate\nSuccess! The configuration is valid.\n\nterraform -chdir=terraform/envs/staging test\n")
	total := 0
	for i, n := 0, 3+g.r.IntN(6); i < n; i++ {
		fmt.Fprintf(&b, "tests/%s.tftest.hcl... in progress\n", g.word())
		for j, m := 0, 2+g.r.IntN(5); j < m; j++ {
			fmt.Fprintf(&b, "  run \"%s_%s\"... pass\n", g.word(), g.word())
			total++
		}
		b.WriteString("... tearing down\n... pass\n\n")
	}
	fmt.Fprintf(&b, "Success! %d passed, 0 failed.\n\nkubeconform -summary -strict k8s/\nSummary: %d resources found in %d files - Valid: %d, Invalid: 0, Errors: 0, Skipped: 0\n", total, 60+total, 20+g.r.IntN(20), 60+total)
	return "make validate", b.String()
}

func infraLint(g *ugen, f ufile) (cmd, dirty, clean, old, new string) {
	if strings.HasSuffix(f.path, ".tf") {
		dirty = fmt.Sprintf("1 issue(s) found:\n\nWarning: variable \"enable_legacy_flag\" is declared but not used (terraform_unused_declarations)\n\n  on %s line 3:\n   3: variable \"enable_legacy_flag\" {\n\nReference: https://github.com/terraform-linters/tflint-ruleset-terraform/blob/v0.9.1/docs/rules/terraform_unused_declarations.md\n", f.path)
		return "tflint --recursive", dirty, "", unusedVariable, ""
	}
	var image string
	for _, l := range strings.Split(f.src, "\n") {
		if strings.Contains(l, "image:") {
			image = l + "\n"
			break
		}
	}
	dirty = fmt.Sprintf("KubeLinter 0.6.8\n\n%s: (object: <no namespace>/%s apps/v1, Kind=Deployment) container \"app\" does not have a read-only root file system (check: no-read-only-root-fs, remediation: Set readOnlyRootFilesystem to true in the container securityContext.)\n\nError: found 1 lint errors\n", f.path, strings.Split(f.path, "/")[2])
	return "kube-linter lint " + f.path, dirty, "KubeLinter 0.6.8\n\nNo lint errors found!\n", image, image + "          securityContext:\n            readOnlyRootFilesystem: true\n"
}

func infraTestFile(g *ugen, f ufile, topic string) (string, string) {
	name := strings.ReplaceAll(topic, " ", "_")
	var b strings.Builder
	for i, n := 0, 3+g.r.IntN(6); i < n; i++ {
		a := g.word()
		fmt.Fprintf(&b, "run \"%s_%s_%d\" {\n  command = plan\n\n  variables {\n    %s_workers = %d\n  }\n\n  assert {\n    condition     = length(google_compute_firewall.%s_%s.allow) > 0\n    error_message = \"the %s firewall must allow its port\"\n  }\n}\n\n", name, a, i, a, 1+g.r.IntN(9), a, g.word(), a)
	}
	return "terraform/envs/staging/tests/" + name + ".tftest.hcl", b.String()
}

func infraInspect(g *ugen) (ask, cmd, desc, out, answer string) {
	if g.r.IntN(2) == 0 {
		var b strings.Builder
		for i, n := 0, 80+g.r.IntN(150); i < n; i++ {
			a := g.word()
			fmt.Fprintf(&b, "module.%s.google_compute_firewall.%s_%s: Refreshing state... [id=projects/acme-stg/global/firewalls/%s-%s]\n", a, a, g.word(), a, g.word())
		}
		b.WriteString("\nNo changes. Your infrastructure matches the configuration.\n\nTerraform has compared your real infrastructure against your configuration\nand found no differences, so no changes are needed.\n")
		return g.pick("Is staging drifted from the code? Run a plan and tell me.", "Can you check staging for drift before I start on the next change?"),
			"terraform -chdir=terraform/envs/staging plan -no-color", "Plan staging", b.String(),
			"No drift: the plan is empty, staging matches the code."
	}
	ns := g.word()
	var b strings.Builder
	b.WriteString("NAME                                READY   STATUS    RESTARTS   AGE    IP            NODE\n")
	for i, n := 0, 15+g.r.IntN(40); i < n; i++ {
		fmt.Fprintf(&b, "%-35s 1/1     Running   %d          %dd    10.%d.%d.%d   gke-staging-default-%04x\n", fmt.Sprintf("%s-%s-%05x", ns, g.word(), g.r.IntN(1<<20)), g.r.IntN(3), 1+g.r.IntN(30), g.r.IntN(250), g.r.IntN(250), g.r.IntN(250), g.r.IntN(1<<16))
	}
	return fmt.Sprintf("How are the %s pods doing on staging? Anything restarting a lot?", ns),
		fmt.Sprintf("kubectl -n %s get pods -o wide", ns), "List the pods", b.String(),
		fmt.Sprintf("They're healthy: every %s pod is Running and Ready, with at most a couple of restarts over several days.", ns)
}

// infraPlants returns the infra scenario's planted events.
func infraPlants(g *ugen) []*uevent {
	sfx := g.pick("euw1", "euw4", "usc1")
	events := []*uevent{
		{run: g.either(infraPrefLabel, infraPrefFmt)},
		{run: g.either(infraEgressIP, infraCertLog)},
		{run: g.either(infraBatchPool, infraMovedBlocks)},
		{run: infraRunbook},
		{run: g.either(infraStateLock, infraCrashLoop)},
		{run: g.either(infraNoSecretsManager, infraNoMesh)},
	}
	if g.r.IntN(2) == 0 {
		events = append(events, g.correction(func(g *ugen, step int) { infraContext(g, sfx, step) })...)
	} else {
		events = append(events, g.correction(infraTier)...)
	}
	return append(events, g.requestPair(infraRequests)...)
}

func infraPrefLabel(g *ugen) {
	team := g.pick("platform-sre", "infra-core", "cloud-ops")
	svc := g.word()
	g.w.prompt(fmt.Sprintf("Can you add a CronJob that cleans up old %s exports every night at 02:00? Look at the existing manifests for the pattern. Oh and from now on label everything you add with team=%s, the cost report groups by that label and anything unlabeled lands on my budget. Keep it small.", svc, team))
	f := g.fileWith("k8s/")
	g.w.read([]part{thinking("Copy the conventions of the existing manifests.")}, f.path, f.src)
	path := "k8s/base/" + svc + "/cleanup-cronjob.yaml"
	g.w.create(nil, path, fmt.Sprintf("apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: %s-cleanup\n  labels:\n    app: %s-cleanup\n    team: %s\nspec:\n  schedule: \"0 2 * * *\"\n  concurrencyPolicy: Forbid\n  jobTemplate:\n    spec:\n      template:\n        metadata:\n          labels:\n            team: %s\n        spec:\n          restartPolicy: OnFailure\n          containers:\n            - name: cleanup\n              image: registry.internal/%s-tools:2.3.0\n              args: [\"cleanup\", \"--older-than=720h\"]\n", svc, svc, team, team, svc))
	cmd, out := infraTests(g)
	g.w.bash(nil, cmd, "Validate", out, 0)
	g.w.respond(text("Added " + path + ": nightly at 02:00, no overlapping runs, labelled as you asked."))
	g.add(Fact{Category: CatExtraction, Kind: "preference", Question: "Which label does the user want on everything the agent adds?", Expect: []string{team}})
}

func infraPrefFmt(g *ugen) {
	svc := g.word()
	g.w.prompt(fmt.Sprintf("Why does the staging plan want to replace the %s bucket? Nobody touched it. Also, run terraform fmt -recursive before you hand anything back to me, the pre-commit hook on my laptop is broken and I keep pushing unformatted files. Just explain the plan for now.", svc))
	out := fmt.Sprintf("  # google_storage_bucket.%s must be replaced\n-/+ resource \"google_storage_bucket\" \"%s\" {\n      ~ id       = \"acme-stg-%s\" -> (known after apply)\n      ~ location = \"EU\" -> \"EUROPE-WEST4\" # forces replacement\n        name     = \"acme-stg-%s\"\n    }\n\nPlan: 1 to add, 0 to change, 1 to destroy.\n", svc, svc, svc, svc)
	g.w.bash([]part{thinking("Look at the plan's reason for the replacement.")}, "terraform -chdir=terraform/envs/staging plan -no-color -target=google_storage_bucket."+svc, "Plan the bucket", out, 0)
	g.w.respond(text("The location changed from the multi-region `EU` to `EUROPE-WEST4` in the module defaults, and a bucket's location can't change in place, so Terraform wants to recreate it. Pinning `location = \"EU\"` for this bucket keeps it as it is."))
	g.add(Fact{Category: CatExtraction, Kind: "preference", Question: "What does the user want run before the agent hands back Terraform changes?", Expect: []string{"terraform fmt -recursive"}})
}

func infraEgressIP(g *ugen) {
	ip := fmt.Sprintf("34.%d.%d.%d", 11+g.r.IntN(150), 11+g.r.IntN(240), 11+g.r.IntN(240))
	g.w.prompt(g.pick("A partner needs our staging egress IP for their allowlist, what is it?", "What IP does staging egress from? The payments partner wants to allowlist us."))
	var b strings.Builder
	b.WriteString("{\n")
	for i := 0; i < 12; i++ {
		a := g.word()
		fmt.Fprintf(&b, "  \"%s_service_account\": {\n    \"sensitive\": false,\n    \"type\": \"string\",\n    \"value\": \"%s-%s@acme-stg.iam.gserviceaccount.com\"\n  },\n", a, a, g.word())
		if i == 7 {
			fmt.Fprintf(&b, "  \"nat_egress_ip\": {\n    \"sensitive\": false,\n    \"type\": \"string\",\n    \"value\": \"%s\"\n  },\n", ip)
		}
	}
	b.WriteString("  \"project_id\": {\n    \"sensitive\": false,\n    \"type\": \"string\",\n    \"value\": \"acme-stg\"\n  }\n}\n")
	g.w.bash([]part{thinking("The Cloud NAT's address is a Terraform output.")}, "terraform -chdir=terraform/envs/staging output -json", "Show the outputs", b.String(), 0)
	g.add(Fact{Category: CatExtraction, Kind: "value", Question: "What is staging's egress IP address for the partner's allowlist?", Expect: []string{ip}})
	g.w.respond(text("It's the `nat_egress_ip` output above. All staging egress goes through that one Cloud NAT address, so it's the only one they need to allow."))
}

func infraCertLog(g *ugen) {
	day := 3 + g.r.IntN(25)
	g.w.prompt(g.pick("Is the gateway's TLS cert going to renew by itself? I got a warning email this morning.", "Got an expiry warning for the gateway cert. Will cert-manager sort it out?"))
	var b strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, "I1006 0%d:%02d:%02d.%06d       1 controller.go:%d] \"re-queuing item due to optimistic locking on resource\" logger=\"cert-manager.controller\" key=\"%s/%s-tls\"\n", 1+i/10, i, g.r.IntN(60), g.r.IntN(1000000), 100+g.r.IntN(200), g.word(), g.word())
		if i == 23 {
			fmt.Fprintf(&b, "I1006 03:%02d:11.204411       1 certificates.go:412] \"certificate is not due for renewal yet\" name=\"gateway-tls\" notAfter=\"2025-11-%02d 13:22:09 +0000 UTC\"\nE1006 03:%02d:11.209882       1 sync.go:171] \"issuer is not ready\" err=\"ACME account not registered\" issuer=\"letsencrypt-prod\"\n", i, day, i)
		}
	}
	g.w.bash([]part{thinking("Check cert-manager's logs for the gateway certificate.")}, "kubectl -n cert-manager logs deploy/cert-manager --since=24h", "Read cert-manager's logs", b.String(), 0)
	g.add(Fact{Category: CatExtraction, Kind: "value", Question: "When does the gateway's TLS certificate expire, according to the cert-manager logs?", Expect: []string{fmt.Sprintf("2025-11-%02d", day)}})
	g.w.respond(text("Not as things stand: the certificate isn't due for renewal yet, but the letsencrypt-prod issuer is not ready (its ACME account isn't registered), so the renewal would fail when it comes due. Re-registering the issuer's account fixes that."))
}
