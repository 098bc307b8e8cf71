package sessiongen

import (
	"fmt"
	"strings"
)

func infraBatchPool(g *ugen) {
	g.w.prompt("The staging cluster scales to max nodes every night around midnight and the on-demand bill is getting silly. Can you figure out why?")
	var b strings.Builder
	b.WriteString("NAMESPACE     NAME                      SCHEDULE      SUSPEND   ACTIVE   LAST SCHEDULE   AGE\n")
	for i := 0; i < 14; i++ {
		fmt.Fprintf(&b, "%-13s %-25s %-13s False     0        %dh             %dd\n", g.word(), g.word()+"-"+g.pick("report", "sync", "rollup", "reindex"), "0 0 * * *", 8+g.r.IntN(4), 20+g.r.IntN(200))
	}
	g.w.bash([]part{thinking("Look at what is scheduled around midnight.")}, "kubectl get cronjobs -A", "List the CronJobs", b.String(), 0)
	g.w.respond(thinking("Fourteen CronJobs fire at 00:00 on the general node pool; the autoscaler adds on-demand nodes for them and the regular workloads get squeezed. Staggering the schedules helps a little, but the jobs are interruptible and would be cheaper on spot capacity, isolated so they never evict the services."),
		text("Fourteen CronJobs all fire at `0 0 * * *` on the default pool, so every night the autoscaler adds on-demand nodes for an hour. They're restartable batch work, so I'd give them a separate spot node pool tainted `workload=batch:NoSchedule`, with a matching toleration and node selector on the CronJobs. The services stay on the default pool and the nightly burst runs on spot nodes that scale back to zero. Want me to add that?"))
	g.w.prompt(g.confirm())
	g.w.create(nil, "terraform/modules/gke/batch_pool.tf", "resource \"google_container_node_pool\" \"batch\" {\n  name     = \"batch-spot\"\n  cluster  = google_container_cluster.main.id\n\n  autoscaling {\n    min_node_count = 0\n    max_node_count = 6\n  }\n\n  node_config {\n    spot         = true\n    machine_type = \"e2-standard-4\"\n    labels       = { workload = \"batch\" }\n\n    taint {\n      key    = \"workload\"\n      value  = \"batch\"\n      effect = \"NO_SCHEDULE\"\n    }\n  }\n}\n")
	cmd, out := infraTests(g)
	g.w.bash(nil, cmd, "Validate", out, 0)
	g.w.respond(text("Added the node pool (scales 0–6). Next step is the toleration on each CronJob; I'll do those in the overlay so prod is untouched."))
	g.add(Fact{Category: CatExtraction, Kind: "decision", Question: "What did we decide to do about the nightly CronJobs scaling up the staging cluster?", Expect: []string{"spot node pool", "workload=batch"}})
}

func infraMovedBlocks(g *ugen) {
	g.w.prompt("I want to split the network resources out of the big staging config into their own module. How do we do that without Terraform wanting to destroy and recreate the VPC?")
	f := g.fileWith("terraform/envs/staging/main.tf")
	g.w.read(nil, f.path, f.src)
	g.w.respond(thinking("Two ways: terraform state mv for each resource, run by hand against the remote state — not reviewable and easy to get half done — or moved blocks in the code, which the plan shows as moves and which go through review like any other change. Terraform is 1.9 here, so moved blocks work across modules."),
		text("Moving resources into a module changes their addresses, so by default the plan destroys and recreates them. I'd use `moved` blocks rather than running `terraform state mv` by hand: one `moved { from = …, to = module.network.… }` per resource, in the code, so the plan shows \"has moved to\" with no destroys and the whole thing is reviewed in the PR. After it's applied everywhere the blocks can go. Shall I do that?"))
	g.w.prompt(g.confirm())
	g.w.create(nil, "terraform/envs/staging/moved.tf", "moved {\n  from = google_compute_network.main\n  to   = module.network.google_compute_network.main\n}\n\nmoved {\n  from = google_compute_subnetwork.private\n  to   = module.network.google_compute_subnetwork.private\n}\n\nmoved {\n  from = google_compute_router_nat.main\n  to   = module.network.google_compute_router_nat.main\n}\n")
	g.w.bash(nil, "terraform -chdir=terraform/envs/staging plan -no-color", "Plan staging",
		"  # google_compute_network.main has moved to module.network.google_compute_network.main\n  # google_compute_subnetwork.private has moved to module.network.google_compute_subnetwork.private\n  # google_compute_router_nat.main has moved to module.network.google_compute_router_nat.main\n\nPlan: 0 to add, 0 to change, 0 to destroy.\n", 0)
	g.w.respond(text("The plan shows three moves and nothing else: 0 to add, 0 to change, 0 to destroy."))
	g.add(Fact{Category: CatExtraction, Kind: "decision", Question: "How did we decide to move the network resources into their own module without recreating them?", Expect: []string{"moved blocks"}})
}

func infraRunbook(g *ugen) {
	svc := g.word()
	path := "docs/runbooks/" + svc + "-" + g.pick("failover", "restore", "drain") + ".md"
	g.w.prompt(fmt.Sprintf("Write a short runbook for when the %s service needs to be taken out of rotation on staging: how to drain it, what to check, how to bring it back. Markdown, keep it to a page.", svc))
	g.w.create([]part{thinking("Steps an on-call engineer can follow without context.")}, path,
		fmt.Sprintf("# Taking %s out of rotation\n\n1. Scale the HPA minimum to 0: `kubectl -n %s patch hpa %s -p '{\"spec\":{\"minReplicas\":0}}'`.\n2. Drain traffic at the gateway: remove the route, wait for in-flight requests (`kubectl -n %s logs deploy/%s | grep inflight`).\n3. Check the queue depth dashboard is flat.\n\n## Bringing it back\n\n1. Restore the HPA minimum.\n2. Re-add the route.\n3. Watch the error rate for 15 minutes.\n", svc, svc, svc, svc, svc))
	g.add(Fact{Category: CatExtraction, Kind: "path", Question: "Where is the runbook the agent wrote?", Expect: []string{path}})
	g.w.respond(text(g.pick("Done, it's one page: drain, checks, and the way back.", "Wrote "+path+"; drain, checks and how to bring it back.")))
}

func infraContext(g *ugen, sfx string, step int) {
	prod, stg := "gke-prod-"+sfx, "gke-stg-"+sfx
	target := func(ctx string) string {
		return "loadtest-up:\n\tkubectl --context " + ctx + " -n gateway scale deploy/gateway --replicas=8\n"
	}
	switch step {
	case corrInstruction:
		g.w.prompt("Add a make target that scales the gateway up to 8 replicas before a load test, against the " + prod + " context.")
		g.w.read(nil, "Makefile", ".PHONY: plan\n\nplan:\n\tterraform -chdir=terraform/envs/staging plan -no-color\n")
		g.w.edit(nil, "Makefile", ".PHONY: plan\n", ".PHONY: plan loadtest-up\n\n"+target(prod))
		g.w.respond(text("Added `make loadtest-up`; it scales the gateway to 8 replicas on " + prod + "."))
		return
	case corrNow:
		g.w.prompt(g.pick("no — the staging cluster, not prod. "+stg+". Load tests never run against prod.", "Wait, scratch that, use "+stg+". Prod is in a change freeze anyway."))
	default:
		g.w.prompt(g.pick("About the load-test target: scratch that context, it has to be "+stg+", not prod. We never load test prod.",
			"The loadtest-up target you added earlier points at prod. No — staging, "+stg+"."))
	}
	g.w.edit(nil, "Makefile", target(prod), target(stg))
	g.w.respond(text("Fixed: `make loadtest-up` targets " + stg + " now."))
	g.add(Fact{Category: CatKnowledgeUpdate, Kind: "correction", Question: "Which cluster context does the load-test make target scale the gateway on?", Expect: []string{stg}, Superseded: []string{prod}})
}

func infraTier(g *ugen, step int) {
	line := func(tier string) string { return "    tier              = \"" + tier + "\"\n" }
	switch step {
	case corrInstruction:
		g.w.prompt("The staging database is swapping during the nightly reports. Bump the Cloud SQL tier to db-custom-4-15360 in terraform/envs/staging/database.tf.")
		g.w.read(nil, "terraform/envs/staging/database.tf", "resource \"google_sql_database_instance\" \"main\" {\n  name             = \"acme-stg-main\"\n  database_version = \"POSTGRES_15\"\n\n  settings {\n"+line("db-custom-2-3840")+"    availability_type = \"ZONAL\"\n  }\n}\n")
		g.w.edit(nil, "terraform/envs/staging/database.tf", line("db-custom-2-3840"), line("db-custom-4-15360"))
		g.w.respond(text("Changed the tier to db-custom-4-15360; the plan will show an in-place update with a restart."))
		return
	case corrNow:
		g.w.prompt("scratch that, use db-custom-2-7680. The bigger one blows the staging budget, more memory is what we need.")
	default:
		g.w.prompt(g.pick("Back to the staging database tier: scratch that, make it db-custom-2-7680, the 4-CPU one blows the budget. Memory is the problem, not CPU.",
			"Finance pinged me. No on the 4-CPU tier for staging — use db-custom-2-7680 instead, it's memory we're short of."))
	}
	g.w.edit(nil, "terraform/envs/staging/database.tf", line("db-custom-4-15360"), line("db-custom-2-7680"))
	g.w.respond(text("Done: the staging Cloud SQL tier is db-custom-2-7680 (2 vCPUs, 7.5 GB)."))
	g.add(Fact{Category: CatKnowledgeUpdate, Kind: "correction", Question: "Which Cloud SQL tier should the staging database use?", Expect: []string{"db-custom-2-7680"}, Superseded: []string{"db-custom-4-15360"}})
}

// infraChange is the agent's work on a request: a new file and a check.
func infraChange(path, content, reply string) func(g *ugen) {
	return func(g *ugen) {
		g.w.create([]part{thinking("Follow the layout of the neighbouring files.")}, path, content)
		cmd, out := infraTests(g)
		g.w.bash(nil, cmd, "Validate", out, 0)
		g.w.respond(text(reply))
	}
}

var infraRequests = []ureq{
	{key: "PodDisruptionBudget", prompt: "Add a PodDisruptionBudget for the gateway so node upgrades can't take it down to zero.",
		work: infraChange("k8s/base/gateway/pdb.yaml", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: gateway\nspec:\n  minAvailable: 2\n  selector:\n    matchLabels:\n      app: gateway\n", "Added it with minAvailable: 2.")},
	{key: "VPC flow logs", prompt: "Turn on VPC flow logs for the staging subnets, sampled at 50%, we need them for the security review.",
		work: infraChange("terraform/envs/staging/flow_logs.tf", "locals {\n  flow_log_sampling = 0.5\n}\n", "Enabled on both staging subnets at 50% sampling, 10-minute aggregation.")},
	{key: "registry pull secret", prompt: "Rotate the registry pull secret in the staging namespaces, the old token expires on Friday. The new token is already in the CI variables.",
		work: infraChange("k8s/overlays/staging/pull-secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: registry-pull\ntype: kubernetes.io/dockerconfigjson\n", "Rotated; the overlay now references the new token and the pods pulled fine on restart.")},
	{key: "legacy load balancer", prompt: "Please remove the legacy load balancer from the Terraform, nothing has pointed at it since the gateway migration.",
		work: infraChange("terraform/envs/staging/removed.tf", "removed {\n  from = google_compute_forwarding_rule.legacy\n\n  lifecycle {\n    destroy = true\n  }\n}\n", "Removed it; the plan destroys the forwarding rule, its target proxy and the address.")},
}

func infraStateLock(g *ugen) {
	g.w.prompt(g.pick("Run a plan for staging, I want to see what the gateway change does.", "Can you plan staging? Want to check the gateway change before I merge."))
	id := fmt.Sprintf("17277%011d", g.r.Int64N(100000000000))
	lock := "\nError: Error acquiring the state lock\n\nError message: writing \"gs://acme-tf-state/staging/default.tflock\" failed: googleapi: Error 412: At least one of the pre-conditions you specified did not hold., conditionNotMet\nLock Info:\n  ID:        " + id +
		"\n  Path:      gs://acme-tf-state/staging/default.tflock\n  Operation: OperationTypeApply\n  Who:       runner@ci-runner-7\n  Version:   1.9.5\n  Created:   2025-10-06 06:12:44.123 +0000 UTC\n  Info:\n\n\nTerraform acquires a state lock to protect the state from being written\nby multiple users at the same time. Please resolve the issue above and try\nagain. For most commands, you can disable locking with the \"-lock=false\"\nflag, but this is not recommended.\n"
	g.w.bash([]part{text("Planning staging.")}, "terraform -chdir=terraform/envs/staging plan -no-color", "Plan staging", lock, 1)
	g.w.bash([]part{thinking("The lock belongs to a CI apply. Check whether that run is still going before touching the lock.")}, "gh run list --workflow terraform-apply.yml --limit 3", "List the recent apply runs",
		"STATUS  TITLE                         WORKFLOW         BRANCH  EVENT  ID           ELAPSED  AGE\nX       gateway: raise max body size  terraform-apply  main    push   11244019387  4m2s     about 3 hours ago\n✓       quota: new service account    terraform-apply  main    push   11240551012  3m40s    about 1 day ago\n", 0)
	g.w.respond(text("The lock is held by a CI apply that was cancelled about three hours ago; it never released it, and nothing is running now. Can I force-unlock it?"))
	g.w.prompt(g.pick("go ahead", "yes, unlock it", "ok"))
	g.w.bash(nil, "terraform -chdir=terraform/envs/staging force-unlock -force "+id, "Release the stale lock", "Terraform state has been successfully unlocked!\n\nThe state has been unlocked, and Terraform commands should now be able to\nobtain a new lock on the remote state.\n", 0)
	g.w.bash(nil, "terraform -chdir=terraform/envs/staging plan -no-color", "Plan staging", "  # module.gateway.kubernetes_config_map.gateway will be updated in-place\n  ~ resource \"kubernetes_config_map\" \"gateway\" {\n      ~ data = {\n          ~ \"max_body_size\" = \"8m\" -> \"32m\"\n        }\n    }\n\nPlan: 0 to add, 1 to change, 0 to destroy.\n", 0)
	g.w.respond(text(g.pick("Unlocked, and the plan is what you'd expect: one in-place change to the gateway's config map, max body size 8m → 32m.", "Plan's clean now: one in-place update to the gateway config map.")))
	g.add(Fact{Category: CatErrorsFixes, Kind: "error_fix", Question: "What stopped the staging plan from running and how was it resolved?", Expect: []string{"state lock", "force-unlock"}})
}

func infraCrashLoop(g *ugen) {
	svc := g.word()
	g.w.prompt(fmt.Sprintf("%s on staging is crash-looping since this morning's deploy, can you look?", svc))
	g.w.bash(nil, "kubectl -n "+svc+" get pods", "List the pods", fmt.Sprintf("NAME                      READY   STATUS             RESTARTS      AGE\n%s-7f9c6d5b8-2xkqp   0/1     CrashLoopBackOff   14 (2m ago)   48m\n%s-7f9c6d5b8-9hvzl   0/1     CrashLoopBackOff   14 (3m ago)   48m\n", svc, svc), 0)
	g.w.bash([]part{thinking("Read the crashed container's last log.")}, "kubectl -n "+svc+" logs deploy/"+svc+" --previous", "Read the previous container's log",
		"{\"level\":\"info\",\"msg\":\"starting\",\"version\":\"1.31.0\"}\n{\"level\":\"fatal\",\"msg\":\"reading database password\",\"error\":\"open /var/run/secrets/app/db-password: no such file or directory\"}\n", 0)
	g.w.bash(nil, "kubectl -n "+svc+" get secrets", "List the secrets", "NAME               TYPE                             DATA   AGE\ndb-credentials     Opaque                           2      6h\nregistry-pull      kubernetes.io/dockerconfigjson   1      91d\n", 0)
	path := "k8s/base/" + svc + "/deployment.yaml"
	g.w.edit([]part{thinking("The deploy renamed the secret to db-credentials with a password key; the volume still points at the old secret name.")}, path,
		"      volumes:\n        - name: db\n          secret:\n            secretName: db-password\n",
		"      volumes:\n        - name: db\n          secret:\n            secretName: db-credentials\n            items:\n              - key: password\n                path: db-password\n")
	g.w.bash(nil, "kubectl apply -k k8s/overlays/staging && kubectl -n "+svc+" rollout status deploy/"+svc, "Apply and wait for the rollout", "deployment.apps/"+svc+" configured\nWaiting for deployment \""+svc+"\" rollout to finish: 1 of 2 updated replicas are available...\ndeployment \""+svc+"\" successfully rolled out\n", 0)
	g.w.respond(text(g.pick("Fixed. This morning's deploy renamed the secret (it's db-credentials now, with a `password` key) but the volume still mounted the old name, so the file the app reads was missing. The volume maps the new secret's key to the old path now, and the rollout finished.",
		"Rolled out and healthy again.")))
	g.add(Fact{Category: CatErrorsFixes, Kind: "error_fix", Question: "Why was the service crash-looping on staging and what fixed it?", Expect: []string{"CrashLoopBackOff", "db-credentials"}})
}

func infraNoSecretsManager(g *ugen) {
	svc := g.word()
	g.w.prompt(fmt.Sprintf("Rotate the %s API key in staging, the new one is attached to ticket OPS-%d. Honestly I hate that we keep these in plain Kubernetes Secrets, we should move to a proper secrets manager at some point, but nobody has agreed on which one, so not in this change.", svc, 1000+g.r.IntN(900)))
	g.w.bash([]part{thinking("Replace the key in the Secret and restart the deployment so it picks it up.")}, "kubectl -n "+svc+" create secret generic "+svc+"-api --from-literal=key=\"$NEW_KEY\" --dry-run=client -o yaml | kubectl apply -f - && kubectl -n "+svc+" rollout restart deploy/"+svc, "Replace the key and restart",
		"secret/"+svc+"-api configured\ndeployment.apps/"+svc+" restarted\n", 0)
	g.w.respond(text("Rotated: the Secret has the new key and the deployment restarted with it. I left the secrets-storage question alone."))
	g.abstain("Which secrets manager did the user decide to move to?", "vault", "sops", "sealed-secrets", "external-secrets", "doppler", "google secret manager", "aws secrets manager")
}

func infraNoMesh(g *ugen) {
	g.w.prompt("Security keeps asking whether we'll do mTLS between services with a service mesh. I don't want to decide today, I'd like to know what it costs us in latency first. For now can you just check which services talk to each other the most?")
	var b strings.Builder
	b.WriteString("SOURCE          DESTINATION      RPS     P99_MS\n")
	for i := 0; i < 25; i++ {
		fmt.Fprintf(&b, "%-15s %-16s %-7d %d\n", g.word(), g.word(), 5+g.r.IntN(900), 2+g.r.IntN(80))
	}
	g.w.bash([]part{thinking("The gateway exports per-route metrics; aggregate them by source and destination.")}, "make traffic-matrix ENV=staging", "Summarize service-to-service traffic", b.String(), 0)
	g.w.respond(text("The busiest pairs are listed above, sorted by requests per second. That's the traffic a mesh sidecar would sit in, so it's where to measure the added latency when you get to that question."))
	g.abstain("Which service mesh did the user pick for mTLS?", "istio", "linkerd", "consul", "cilium", "kuma")
}

func infraLatest(g *ugen) {
	f := g.fileWith("k8s/base/gateway/")
	if g.r.IntN(2) == 0 {
		g.latestRequest("Before you go: set these resource requests on the gateway, staging overlay only, and show me the diff. Don't apply anything, I'll do it after standup.\n\n```yaml\nresources:\n  requests:\n    cpu: 250m\n    memory: 384Mi\n  limits:\n    memory: 512Mi\n```\n\nAlso double-check the HPA still targets 70% CPU afterwards.",
			f, "Find the gateway's staging overlay and its HPA.")
		return
	}
	g.latestRequest("One more: we need a bucket for the gateway's access logs in staging. Something like this, but use our bucket module so it gets the usual labels and lifecycle:\n\n```hcl\nresource \"google_storage_bucket\" \"gateway_logs\" {\n  name     = \"acme-stg-gateway-logs\"\n  location = \"EU\"\n}\n```\n\nPlan only, no apply. And delete logs after 30 days.",
		g.fileWith("terraform/envs/staging/main.tf"), "Look at how the staging config uses the bucket module.")
}
