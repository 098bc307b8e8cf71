// run.mjs: runs named checks in order, prints PASS/FAIL/OFF per check and
// exits 1 if any failed. A check whose name is in GATEWAY_CLIENTS_OFF
// (comma separated) is not run and printed as OFF with the reason the CI
// script gives: a gateway feature not on main yet.
export async function runChecks(suite, checks) {
  const off = new Set((process.env.GATEWAY_CLIENTS_OFF || "").split(",").map((s) => s.trim()).filter(Boolean));
  let failed = 0, passed = 0;
  for (const [name, fn] of Object.entries(checks)) {
    if (off.has(name)) {
      console.log(`OFF  ${suite} ${name} (in GATEWAY_CLIENTS_OFF)`);
      continue;
    }
    const t0 = Date.now();
    try {
      const note = await fn();
      passed++;
      console.log(`PASS ${suite} ${name} (${Date.now() - t0} ms)${note ? ": " + note : ""}`);
    } catch (err) {
      failed++;
      console.log(`FAIL ${suite} ${name}: ${err && err.stack && !err.constructor.name.startsWith("Check") ? err.stack : err.message}`);
    }
  }
  console.log(`${suite}: ${passed} passed, ${failed} failed, ${off.size ? [...off].filter((n) => n in checks).length : 0} off`);
  process.exitCode = failed ? 1 : 0;
}
