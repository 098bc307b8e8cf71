// Recall console: a user's long-term memory (#/t/<tenant>/u/<user>) and
// the operators' overview of every tenant (#/overview).
"use strict";

function userLink(tenant, user) {
  return el("a", { href: `#/t/${encodeURIComponent(tenant)}/u/${encodeURIComponent(user)}`, text: user });
}

async function userPage(tenant, user) {
  const data = await api(`/console/api/tenants/${encodeURIComponent(tenant)}/users/${encodeURIComponent(user)}/memory`);
  const docs = data.documents.length ? data.documents.map(documentView) : [el("p", { class: "muted", id: "documents", text: "No long-term memory for this user yet." })];
  setMain(el("p", {}, el("a", { href: "#/", text: "← Sessions" })),
    el("h1", { text: `Long-term memory of ${user}` }),
    el("p", { class: "muted", text: "Documents written by commits of this user's sessions (RECALL_LTM), each with its kept revisions." }),
    el("div", { id: "documents" }, docs));
  state.refresh = () => userPage(tenant, user).catch(() => {});
}

// documentView shows a document's newest revision and a diff between any
// two of its kept revisions.
function documentView(d) {
  const revs = d.revisions;
  const latest = revs[revs.length - 1];
  const opts = sel => revs.map((r, i) => el("option", { value: i, selected: i === sel, text: `r${r.revision} — ${fmtTime(r.time)}${r.session ? " — " + r.session : ""}` }));
  const left = el("select", { "aria-label": "Older revision" }, opts(Math.max(0, revs.length - 2)));
  const right = el("select", { "aria-label": "Newer revision" }, opts(revs.length - 1));
  const diff = el("div", { class: "panel diff-panel" });
  const render = () => diff.replaceChildren(sideBySide(revs.length === 1 ? "" : revs[+left.value].content, revs[+right.value].content));
  left.addEventListener("change", render);
  right.addEventListener("change", render);
  render();
  return el("section", { class: "document", "data-key": d.key },
    el("h2", { text: (d.peer ? `about ${d.peer}: ` : "") + d.type }),
    el("p", { class: "muted" }, `${revs.length} kept revision${revs.length === 1 ? "" : "s"}; newest ${fmtTime(latest.time)}`,
      latest.session ? [", from ", sessionLink(state.tenant, latest.session)] : ""),
    el("div", { class: "panel" }, markdown(latest.content)),
    el("details", {}, el("summary", { text: "Revisions" }),
      el("div", { class: "toolbar" }, el("label", {}, "From ", left), el("label", {}, "to ", right)), diff));
}

async function overviewPage() {
  const data = await api("/console/api/overview");
  const body = el("tbody");
  for (const s of data.tenants) {
    const pick = el("a", { href: "#/", text: s.tenant });
    pick.addEventListener("click", () => pickTenant(s.tenant));
    body.append(el("tr", { "data-tenant": s.tenant },
      el("td", {}, pick), el("td", { class: "num", text: num(s.sessions) }), el("td", { class: "num", text: num(s.records) }),
      el("td", { class: "num" }, s.parked ? el("a", { href: "#/parked", class: "badge bad", text: num(s.parked) }) : "0")));
  }
  setMain(el("h1", { text: "Every tenant" }),
    el("table", { id: "overview" }, el("thead", {}, el("tr", {}, ["Tenant", "Sessions", "Records", "Parked"].map(h => el("th", { text: h })))), body));
  state.refresh = () => overviewPage().catch(() => {});
}
