// run.mjs: runs named checks in order, prints PASS/FAIL/OFF per check and
// exits 1 if any failed. A check turned off by GATEWAY_CLIENTS_OFF is not
// run and is printed as OFF: the CI script turns off what needs a gateway
// feature not on main yet, and says so.

// isOff says whether GATEWAY_CLIENTS_OFF (comma separated entries, each
// "suite/prefix" or "prefix" of a check's name) turns check name of suite off.
export function isOff(suite, name) {
  const entries = (process.env.GATEWAY_CLIENTS_OFF || "").split(",").map((s) => s.trim()).filter(Boolean);
  return entries.some((e) => {
    const i = e.indexOf("/");
    const [sv, prefix] = i >= 0 ? [e.slice(0, i), e.slice(i + 1)] : [suite, e];
    return sv === suite && name.startsWith(prefix);
  });
}

export async function runChecks(suite, checks) {
  let failed = 0, passed = 0, offCount = 0;
  for (const [name, fn] of Object.entries(checks)) {
    if (isOff(suite, name)) {
      offCount++;
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
  console.log(`${suite}: ${passed} passed, ${failed} failed, ${offCount} off`);
  process.exitCode = failed ? 1 : 0;
}
