// Recall console: markdown and side-by-side diffs. Everything is built
// from text nodes (escaped by construction): no HTML string is parsed.
"use strict";

// inline renders code spans, strong and emphasis. Underscore emphasis
// opens and closes only at word boundaries (CommonMark's rule), so
// tool_use_error stays as written; asterisks may be intraword.
function inline(text) {
  const out = [];
  const re = /(`[^`]+`|\*\*[^*]+\*\*|\*[^*\s][^*]*\*|(?<![\p{L}\p{N}_])_[^_\s](?:[^_]*[^_\s])?_(?![\p{L}\p{N}_]))/gu;
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const t = m[0];
    if (t.startsWith("`")) out.push(el("code", { text: t.slice(1, -1) }));
    else if (t.startsWith("**")) out.push(el("strong", { text: t.slice(2, -2) }));
    else out.push(el("em", { text: t.slice(1, -1) }));
    last = m.index + t.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function markdown(src) {
  const root = el("div", { class: "markdown" });
  const lines = (src || "").split("\n");
  let list = null, para = null;
  const flush = () => { list = null; para = null; };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) {
      flush();
      const code = [];
      for (i++; i < lines.length && !lines[i].startsWith("```"); i++) code.push(lines[i]);
      root.append(el("pre", {}, el("code", { text: code.join("\n") })));
      continue;
    }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) { flush(); root.append(el("h" + Math.min(h[1].length + 1, 6), {}, inline(h[2]))); continue; }
    const li = /^\s*(?:[-*+]|\d+\.)\s+(.*)$/.exec(line);
    if (li) {
      if (!list) { list = el(/^\s*\d/.test(line) ? "ol" : "ul"); root.append(list); para = null; }
      list.append(el("li", {}, inline(li[1])));
      continue;
    }
    if (line.trim() === "") { flush(); continue; }
    if (line.startsWith(">")) { flush(); root.append(el("blockquote", {}, inline(line.replace(/^>\s?/, "")))); continue; }
    if (!para) { para = el("p"); root.append(para); list = null; } else para.append(" ");
    para.append(...inline(line));
  }
  return root;
}

// diffLines is the longest common subsequence of lines as operations.
function diffLines(a, b) {
  const n = a.length, m = b.length;
  if (n * m > 4e6) return [...a.map(l => ["-", l]), ...b.map(l => ["+", l])];
  const dp = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
    dp[i][j] = a[i] === b[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
  const ops = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { ops.push(["=", a[i]]); i++; j++; }
    else if (dp[i + 1][j] >= dp[i][j + 1]) ops.push(["-", a[i++]]);
    else ops.push(["+", b[j++]]);
  }
  while (i < n) ops.push(["-", a[i++]]);
  while (j < m) ops.push(["+", b[j++]]);
  return ops;
}

const diffContext = 3; // unchanged lines shown around a change

// sideBySide shows two texts side by side; runs of unchanged lines longer
// than twice diffContext fold into one row that unfolds on a click.
function sideBySide(oldText, newText) {
  const lines = t => (t ? t.split("\n") : []);
  const ops = diffLines(lines(oldText), lines(newText));
  const body = el("tbody");
  let ln = 0, rn = 0, k = 0;
  const same = (l) => { ln++; rn++; return el("tr", {}, el("td", { class: "n", text: ln }), el("td", { text: l }), el("td", { class: "n", text: rn }), el("td", { text: l })); };
  while (k < ops.length) {
    if (ops[k][0] === "=") {
      let e = k;
      while (e < ops.length && ops[e][0] === "=") e++;
      const run = ops.slice(k, e).map(o => o[1]);
      const head = k === 0 ? 0 : diffContext, tail = e === ops.length ? 0 : diffContext;
      if (run.length > head + tail + 1) {
        run.slice(0, head).forEach(l => body.append(same(l)));
        const hidden = run.slice(head, run.length - tail).map(same);
        const fold = el("tr", { class: "fold" }, el("td", { colspan: 4 },
          el("button", { type: "button", class: "link", text: `⋯ ${hidden.length} unchanged lines` })));
        fold.querySelector("button").addEventListener("click", () => fold.replaceWith(...hidden));
        body.append(fold);
        run.slice(run.length - tail).forEach(l => body.append(same(l)));
      } else run.forEach(l => body.append(same(l)));
      k = e;
      continue;
    }
    const dels = [], adds = [];
    while (k < ops.length && ops[k][0] !== "=") (ops[k][0] === "-" ? dels : adds).push(ops[k++][1]);
    for (let r = 0; r < Math.max(dels.length, adds.length); r++) {
      const d = r < dels.length, a = r < adds.length;
      body.append(el("tr", {},
        el("td", { class: "n", text: d ? ++ln : "" }), el("td", { class: d ? "del" : "", text: d ? dels[r] : "" }),
        el("td", { class: "n", text: a ? ++rn : "" }), el("td", { class: a ? "add" : "", text: a ? adds[r] : "" })));
    }
  }
  return el("table", { class: "diff" }, body);
}
