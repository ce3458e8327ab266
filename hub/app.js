"use strict";
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const byName = new Intl.Collator(undefined, {numeric: true}).compare;
const PATHS = ["node_to_node", "node_to_pod", "pod_to_node", "pod_to_pod", "node_to_lb", "pod_to_lb"];
const PROTOCOLS = ["icmp", "tcp_syn", "http2_ping", "dns_udp", "dns_tcp", "tcp_syn_mtu"];
const rank = (list, v) => { const i = list.indexOf(v); return i < 0 ? list.length : i; };

// ---- formatting ----

// pct formats a loss ratio for prose: 12%, 4.2%, 0.05%.
function pct(r) {
  if (!(r > 0)) return "0%";
  const p = 100 * r;
  return (p >= 10 ? p.toFixed(0) : p >= 1 ? p.toFixed(1) : p >= 0.01 ? p.toFixed(2) : "<0.01") + "%";
}
// cellText is the number a grid cell prints: the percentage without its sign, to fit 34 px.
function cellText(r) {
  if (!(r > 0)) return "0";
  const p = 100 * r;
  return p >= 10 ? p.toFixed(0) : p >= 0.1 ? p.toFixed(1) : p >= 0.01 ? p.toFixed(2).slice(1) : "<.01";
}
const ms = (s) => s ? (1000 * s).toFixed(s < 0.001 ? 3 : 2) + " ms" : "-";
// rtt prints like the CLI's Duration rounded to µs.
function rtt(s) {
  if (!s) return "-";
  if (s < 1e-3) return Math.round(s * 1e6) + "µs";
  if (s < 1) return +(s * 1e3).toFixed(3) + "ms";
  return +s.toFixed(3) + "s";
}
const clock = (t) => t ? new Date(t).toLocaleTimeString() : "";
function ago(t) {
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  return s < 90 ? Math.round(s) + " s ago" : s < 5400 ? Math.round(s / 60) + " min ago" : Math.round(s / 3600) + " h ago";
}
const ports = (ps) => (ps || []).join(",");

// ---- the colour scale ----
// Light blue for no loss, then yellow to dark red by loss on a log scale
// (ColorBrewer YlOrRd): ordered by lightness, readable without telling
// red from green. Buckets, not a gradient, so the legend is exact and
// thumbnails and the SVG reuse one class per bucket.
const BUCKETS = [
  {below: 0, color: "#c6dbef", label: "0"},
  {below: 0.0005, color: "#ffffcc", label: "<0.05%"},
  {below: 0.001, color: "#ffeda0", label: "0.05%"},
  {below: 0.003, color: "#fed976", label: "0.1%"},
  {below: 0.01, color: "#feb24c", label: "0.3%"},
  {below: 0.03, color: "#fd8d3c", label: "1%"},
  {below: 0.1, color: "#e31a1c", label: "3%"},
  {below: 0.3, color: "#a50026", label: "10%"},
  {below: Infinity, color: "#4d0013", label: "≥30%"},
];
const DARK = 6; // buckets from here on print white text
const NODATA = {miss: "#aeb4be", other: "#e6e9ee"};
function bucket(r) {
  if (!(r > 0)) return 0;
  for (let i = 1; i < BUCKETS.length; i++) if (r < BUCKETS[i].below) return i;
  return BUCKETS.length - 1;
}
// packRGBA turns #rrggbb into a little-endian RGBA word for ImageData.
function packRGBA(hex) {
  const n = parseInt(hex.slice(1), 16);
  return ((255 << 24) | ((n & 255) << 16) | (n & 0xff00) | (n >> 16)) >>> 0;
}
const PACKED = BUCKETS.map((b) => packRGBA(b.color));
const PACKED_MISS = packRGBA(NODATA.miss), PACKED_OTHER = packRGBA(NODATA.other);

// scaleCSS writes one class per bucket for table cells (b*), SVG fills (f*) and strokes (s*).
function scaleCSS() {
  let css = "";
  BUCKETS.forEach((b, i) => {
    const fg = i >= DARK ? "#fff" : "#1d2330";
    css += `.b${i}{background:${b.color};color:${fg}} .f${i}{fill:${b.color}} .s${i}{stroke:${b.color}}\n`;
  });
  css += `.s0{stroke:#9fb9d6}`; // clean links a shade darker than clean cells, to be seen on white
  const st = document.createElement("style");
  st.textContent = css;
  document.head.appendChild(st);
}
function renderLegend() {
  $("legend").innerHTML = '<span>loss:</span><span>' + BUCKETS.map((b, i) => `<span class="sw b${i}">${esc(b.label)}</span>`).join("") + "</span>" +
    '<span>no data: <span class="sw" style="background:#d4d8df">?</span> agent missing <span class="sw" style="background:#eceff3">–</span> not probed over this protocol <span class="sw" style="background:#eceff3">·</span> not in the plan <span class="sw" style="background:#eceff3">∅</span> not answering (ICMP filtered)</span>' +
    '<span><svg width="64" height="14" aria-hidden="true"><line x1="0" y1="7" x2="30" y2="7" stroke="#e31a1c" stroke-width="3.5" stroke-dasharray="7 3"/>' +
    '<rect x="36" y="2" width="26" height="10" fill="#e31a1c" stroke="#000" stroke-width="2" stroke-dasharray="4 2"/></svg> suspect link, device</span>' +
    '<span><span class="sw" style="outline:2px dashed #000;outline-offset:-3px">&nbsp;</span> flows cross the selected device</span>';
}

// ---- state ----
const S = {
  matrix: null, diag: null, fabricText: "", history: null,
  idx: null,        // indexMatrix(matrix)
  fab: null,        // buildFabric(...): names, navigation, links
  user: null,       // the view the user picked; sticks across refreshes until "follow focus"
  view: null,       // the view shown: {path, protocol, family, why}
  cursor: null,     // {source, target} of the grid cell holding the roving tabindex
  fabCursor: "",    // device holding the fabric's roving tabindex
  pinned: "",       // device or link the user clicked
  hovered: "",      // device or link under the pointer or keyboard focus
  hl: null,         // {name, byFam: Map(path|family -> Set(source\ttarget)), total, lossy}
  cellsCache: new Map(), // device -> Promise of /api/v1/fabric/cells, per refresh
  tracing: false,
  rendered: false,
  gridShape: null,  // {key, rows, cols} of the grid on screen, to patch it in place
};
const viewKey = (v) => v.path + "|" + v.protocol + "|" + (v.family || "");
const viewText = (v) => `${v.path} / ${v.protocol}${v.family ? " / " + v.family : ""}`;

// ---- the matrix index ----

// indexMatrix groups the cells by view (path, protocol, family) and by
// path+family, whose rows and columns every protocol of it shares: one
// pass and Maps, so a 125x125 grid costs no per-cell search.
function indexMatrix(m) {
  const fresh = new Set(), stale = new Map();
  for (const a of m.agents || []) {
    if (a.state === "fresh") fresh.add(a.group);
    else if (!stale.has(a.group) || a.lastSeen > stale.get(a.group)) stale.set(a.group, a.lastSeen);
  }
  const fams = new Map(), views = new Map();
  let V = null; // the last cell's view: cells come in runs of one view, so most need no Map lookup
  for (const c of m.groups || []) {
    const family = c.family || "";
    if (!V || V.path !== c.path || V.protocol !== c.protocol || V.family !== family) {
      const fk = c.path + "|" + family, vk = c.path + "|" + c.protocol + "|" + family;
      let F = fams.get(fk);
      if (!F) fams.set(fk, F = {key: fk, path: c.path, family, rowSet: new Set(), colSet: new Set(), views: []});
      V = views.get(vk);
      if (!V) {
        views.set(vk, V = {key: vk, path: c.path, protocol: c.protocol, family, fam: F, cells: [], worst: null});
        F.views.push(V);
      }
    }
    V.fam.rowSet.add(c.source);
    V.fam.colSet.add(c.target);
    V.cells.push(c);
    if (c.sent && (!V.worst || c.lossRatio > V.worst.lossRatio)) V.worst = c;
  }
  for (const F of fams.values()) {
    // A group whose every agent is stale has no cells left: list it anyway, saying why.
    for (const g of stale.keys()) if (!fresh.has(g)) F.rowSet.add(g);
    F.rows = [...F.rowSet].sort(byName);
    F.cols = [...F.colSet].sort(byName);
    F.rowIdx = new Map(F.rows.map((r, i) => [r, i]));
    F.colIdx = new Map(F.cols.map((c, i) => [c, i]));
    F.views.sort((a, b) => rank(PROTOCOLS, a.protocol) - rank(PROTOCOLS, b.protocol) || byName(a.protocol, b.protocol));
  }
  for (const V of views.values()) {
    const F = V.fam, nc = F.cols.length;
    V.at = new Int32Array(F.rows.length * nc).fill(-1);
    V.cells.forEach((c, i) => { V.at[F.rowIdx.get(c.source) * nc + F.colIdx.get(c.target)] = i; });
  }
  const order = [...views.values()].sort((a, b) =>
    rank(PATHS, a.path) - rank(PATHS, b.path) || byName(a.path, b.path) ||
    rank(PROTOCOLS, a.protocol) - rank(PROTOCOLS, b.protocol) || byName(a.protocol, b.protocol) || byName(a.family, b.family));
  return {fresh, stale, fams, views, order};
}

// noData says why grid cell k of view V has no data, as the contract derives it.
function noData(V, r, c) {
  const F = V.fam, row = F.rows[r], col = F.cols[c], k = r * F.cols.length + c;
  if (!S.idx.fresh.has(row)) {
    const seen = S.idx.stale.get(row);
    return {kind: "miss", mark: "?", text: "agent missing",
      title: `${row} to ${col}: agent missing: no fresh agent in ${row}` + (seen ? ` (stale, last seen ${clock(seen)}, ${ago(seen)})` : " (not reporting)")};
  }
  const x = V.at[k] >= 0 ? V.cells[V.at[k]] : null;
  if (x && !x.sent && x.notAnswering) {
    return {kind: "quiet", mark: "∅", text: `not answering ${V.protocol}`,
      title: `${row} to ${col}: ${x.notAnswering} target${x.notAnswering > 1 ? "s do" : " does"} not answer ${V.protocol} (a firewall or security group drops it): no data, not loss`};
  }
  const others = F.views.filter((W) => W !== V && W.at[k] >= 0 && W.cells[W.at[k]].sent > 0).map((W) => W.protocol);
  if (others.length) {
    return {kind: "proto", mark: "–", text: `not probed over ${V.protocol}`,
      title: `${row} to ${col}: not probed over ${V.protocol}` + (V.protocol === "http2_ping" ? " (e.g. no HTTP/2 on that target)" : "") + `; probed over ${others.join(", ")}`};
  }
  if (V.at[k] >= 0) return {kind: "other", mark: "·", text: "no probes in this window", title: `${row} to ${col}: no probes sent in this window`};
  return {kind: "plan", mark: "·", text: `not in the plan: no agent of ${row} probes ${col}`, title: `${row} to ${col}: not in the plan: no agent of ${row} probes ${col}`};
}

// ---- which view ----

// focusView is the view the matrix says to open on, else the one with the worst cell.
function focusView() {
  const f = S.matrix && S.matrix.focus;
  if (f && f.path && S.idx.views.has(viewKey(f))) return {path: f.path, protocol: f.protocol, family: f.family || "", why: f.why || "the matrix's focus"};
  let best = null;
  for (const V of S.idx.order) if (V.worst && (!best || V.worst.lossRatio > best.worst.lossRatio)) best = V;
  if (!best) best = S.idx.order[0];
  return best ? {path: best.path, protocol: best.protocol, family: best.family, why: best.worst ? `worst cell ${best.worst.source} → ${best.worst.target}` : ""} : null;
}
function chooseView() {
  S.view = S.user || focusView();
  if (S.view) writeHash(S.view);
}
// writeHash keeps the URL shareable. history.state remembers whether the
// page was following focus, so a reload keeps following while a shared
// link (no state) opens on exactly its view.
function writeHash(v) {
  const h = "#" + new URLSearchParams({path: v.path, protocol: v.protocol, family: v.family || ""});
  const follow = !S.user;
  if (location.hash !== h || !history.state || history.state.follow !== follow) history.replaceState({follow}, "", h);
}
function readHash() {
  if (history.state && history.state.follow) return null;
  const p = new URLSearchParams(location.hash.slice(1));
  return p.get("path") && p.get("protocol") ? {path: p.get("path"), protocol: p.get("protocol"), family: p.get("family") || ""} : null;
}
// pickView is every user choice of view: it sticks until "follow focus".
function pickView(v, keepCursor) {
  S.user = v ? {path: v.path, protocol: v.protocol, family: v.family || "", why: "your choice"} : null;
  if (!keepCursor) S.cursor = null;
  chooseView();
  renderView();
  renderMultiples();
  renderGrid();
}

function renderView() {
  const v = S.view;
  if (!v) { $("view").textContent = "no data yet"; return; }
  const f = focusView();
  const back = S.user && f && viewKey(f) !== viewKey(S.user) ? ` <button type="button" class="link" id="follow">follow focus (${esc(viewText(f))})</button>` : "";
  $("view").innerHTML = `<span id="viewtext">${esc(viewText(v))}</span> <span class="note">${S.user ? "your choice" : "focus: " + esc(v.why || "")}</span>${back}`;
}

// ---- small multiples ----
const THUMB = 125;
function renderMultiples() {
  const box = $("multiples");
  const focused = box.contains(document.activeElement) ? document.activeElement.dataset.key : "";
  const cur = S.view ? viewKey(S.view) : "";
  let h = "";
  for (const V of S.idx.order) {
    const sel = V.key === cur;
    const w = V.worst;
    const worst = w ? `worst <b>${pct(w.lossRatio)}</b> ${esc(w.source)}→${esc(w.target)}` : "no data";
    h += `<button type="button" role="tab" class="thumb" aria-controls="gridwrap" aria-selected="${sel}"${sel ? ' aria-current="true"' : ""} tabindex="${sel ? 0 : -1}"` +
      ` data-key="${esc(V.key)}" data-path="${esc(V.path)}" data-protocol="${esc(V.protocol)}" data-family="${esc(V.family)}"` +
      ` aria-label="${esc(viewText(V))}: ${w ? "worst " + pct(w.lossRatio) + ", " + esc(w.source) + " to " + esc(w.target) : "no data"}">` +
      `<span class="tt">${esc(V.path)}</span><span class="tt">${esc(V.protocol)}${V.family ? " · " + esc(V.family) : ""}</span><canvas aria-hidden="true"></canvas><span class="tw">${worst}</span><span class="hlc"></span></button>`;
  }
  if (!cur || !S.idx.views.has(cur)) box.dataset.missing = cur; else delete box.dataset.missing;
  box.innerHTML = h || '<p class="meta">no data yet</p>';
  // Without the selected view among them, keep the list reachable by Tab.
  if (h && !box.querySelector('[tabindex="0"]')) box.firstElementChild.tabIndex = 0;
  drawThumbs();
  if (focused) { const b = box.querySelector(`[data-key="${CSS.escape(focused)}"]`); if (b) b.focus({preventScroll: true}); }
}
function drawThumbs() {
  for (const b of $("multiples").querySelectorAll(".thumb")) {
    const V = S.idx.views.get(b.dataset.key);
    const n = drawThumb(V, b.querySelector("canvas"));
    b.classList.toggle("hashl", n > 0);
    b.querySelector(".hlc").textContent = n ? `${n} cells cross ${S.hl.name}` : "";
  }
}
// drawThumb paints one pixel block per cell through ImageData (a fillRect
// per cell is too slow at 18 x 125 x 125), then marks the highlighted
// cells; it returns how many it marked.
function drawThumb(V, cv) {
  const F = V.fam, nr = F.rows.length, nc = F.cols.length;
  const cs = Math.max(1, Math.floor(THUMB / Math.max(nr, nc, 1)));
  const w = Math.max(1, nc * cs), h = Math.max(1, nr * cs);
  cv.width = w; cv.height = h;
  const ctx = cv.getContext("2d");
  const img = ctx.createImageData(w, h);
  const px = new Uint32Array(img.data.buffer);
  for (let r = 0; r < nr; r++) {
    const miss = !S.idx.fresh.has(F.rows[r]);
    for (let c = 0; c < nc; c++) {
      const i = V.at[r * nc + c];
      const x = i >= 0 ? V.cells[i] : null;
      const col = x && x.sent ? PACKED[bucket(x.lossRatio)] : miss ? PACKED_MISS : PACKED_OTHER;
      for (let y = r * cs; y < (r + 1) * cs; y++) px.fill(col, y * w + c * cs, y * w + (c + 1) * cs);
    }
  }
  ctx.putImageData(img, 0, 0);
  const set = S.hl && S.hl.byFam.get(F.key);
  if (!set || !set.size) return 0;
  // Cells of a pixel or two cannot be outlined without hiding their
  // colour: there the thumbnail's frame and count say it instead.
  let n = 0;
  ctx.strokeStyle = "#000"; ctx.lineWidth = 1.5;
  for (const k of set) {
    const tab = k.indexOf("\t");
    const r = F.rowIdx.get(k.slice(0, tab)), c = F.colIdx.get(k.slice(tab + 1));
    if (r === undefined || c === undefined) continue;
    n++;
    if (cs >= 4) ctx.strokeRect(c * cs + 1, r * cs + 1, cs - 2, cs - 2);
  }
  return n;
}

// ---- the main grid ----

const BIG_GRID = 40; // rows from which off-screen rows skip rendering
// cellSpec is what one grid cell shows: its class, loss or no-data
// reason, label and text; raw strings, escaped by the caller that needs it.
function cellSpec(V, r, c, set) {
  const F = V.fam, i = V.at[r * F.cols.length + c], x = i >= 0 ? V.cells[i] : null;
  const hl = set && set.has(F.rows[r] + "\t" + F.cols[c]) ? " hl" : "";
  if (x && x.sent) {
    return {cls: `b${bucket(x.lossRatio)}${hl}`, loss: String(x.lossRatio),
      label: `${F.rows[r]} to ${F.cols[c]}: ${pct(x.lossRatio)} lost, ${x.lost} of ${x.sent}`, text: cellText(x.lossRatio)};
  }
  const why = noData(V, r, c);
  return {cls: `nd ${why.kind}${hl}`, nodata: why.text, title: why.title, label: why.title, text: why.mark};
}
// renderGrid shows the view's grid. A new view or new rows and columns
// build it as one string (15,625 cells at 125x125); a refresh of the same
// grid patches the cells in place, so focus, ids, tooltips and scroll
// stay put. Only the cursor cell carries a tabindex.
function renderGrid() {
  const grid = $("grid");
  const V = S.view && S.idx.views.get(viewKey(S.view));
  if (!V) {
    grid.innerHTML = `<p class="meta" style="padding:.5em">${S.view ? "no data for " + esc(viewText(S.view)) + " now; pick another view above" : "no data yet"}</p>`;
    S.gridShape = null;
    return;
  }
  const F = V.fam;
  let cr = S.cursor ? F.rowIdx.get(S.cursor.source) : undefined, cc = S.cursor ? F.colIdx.get(S.cursor.target) : undefined;
  if (cr === undefined || cc === undefined) {
    const w = V.worst || V.cells[0];
    cr = w ? F.rowIdx.get(w.source) : 0; cc = w ? F.colIdx.get(w.target) : 0;
  }
  const set = S.hl && S.hl.byFam.get(F.key);
  const old = S.gridShape;
  const same = old && old.key === V.key && sameList(old.rows, F.rows) && sameList(old.cols, F.cols) && grid.querySelector(".g");
  if (same) patchGrid(V, set); else buildGrid(V, set, cr, cc);
  S.gridShape = {key: V.key, rows: F.rows, cols: F.cols};
  S.cursor = {source: F.rows[cr], target: F.cols[cc]};
}
const sameList = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
function buildGrid(V, set, cr, cc) {
  const grid = $("grid"), wrap = $("gridwrap");
  const hadFocus = grid.contains(document.activeElement);
  const sl = wrap.scrollLeft, st = wrap.scrollTop;
  const F = V.fam, rows = F.rows, cols = F.cols, nc = cols.length;
  const er = rows.map(esc), ec = cols.map(esc);
  const rh = Math.min(160, 12 + 7 * rows.reduce((n, r) => Math.max(n, r.length), 6));
  const width = rh + 4 + 36 * nc;
  let h = `<div class="g${rows.length > BIG_GRID ? " cv" : ""}" role="grid" aria-label="loss over ${esc(viewText(V))}: rows sources, columns targets" aria-rowcount="${rows.length + 1}" aria-colcount="${nc + 1}"` +
    ` data-path="${esc(V.path)}" data-protocol="${esc(V.protocol)}" data-family="${esc(V.family)}" style="--rh:${rh}px;--w:${width}px;width:${width}px">` +
    `<div class="gr gh" role="row"><div class="corner" role="columnheader">source \\ target</div>`;
  for (let c = 0; c < nc; c++) h += `<div class="ch" role="columnheader"><span>${ec[c]}</span></div>`;
  h += "</div>";
  for (let r = 0; r < rows.length; r++) {
    h += `<div class="gr" role="row" data-r="${r}">` + rowHeader(rows[r], er[r]);
    for (let c = 0; c < nc; c++) {
      const x = cellSpec(V, r, c, set);
      const tab = r === cr && c === cc ? ' tabindex="0"' : "";
      h += `<div role="gridcell" class="${x.cls}"${tab} data-source="${er[r]}" data-target="${ec[c]}"` +
        (x.loss !== undefined ? ` data-loss="${x.loss}"` : ` data-nodata="${esc(x.nodata)}" title="${esc(x.title)}"`) +
        ` aria-label="${esc(x.label)}">${x.text}</div>`;
    }
    h += "</div>";
  }
  grid.innerHTML = h + "</div>";
  wrap.scrollLeft = sl; wrap.scrollTop = st;
  if (hadFocus) cellAt(cr, cc).focus({preventScroll: true});
}
function rowHeader(row, er) {
  return S.idx.fresh.has(row) ? `<div class="rh" role="rowheader">${er}</div>` : `<div class="rh stale" role="rowheader" title="no fresh agent in ${er}">${er} ⚠</div>`;
}
// patchGrid updates the cells of the grid on screen to V, touching only
// what changed.
function patchGrid(V, set) {
  const g = $("grid").querySelector(".g"), F = V.fam;
  for (let r = 0; r < F.rows.length; r++) {
    const row = g.children[r + 1];
    const miss = !S.idx.fresh.has(F.rows[r]);
    if (row.firstElementChild.classList.contains("stale") !== miss) row.firstElementChild.outerHTML = rowHeader(F.rows[r], esc(F.rows[r]));
    for (let c = 0; c < F.cols.length; c++) {
      const el = row.children[c + 1], x = cellSpec(V, r, c, set);
      if (el.className !== x.cls) el.className = x.cls;
      if (el.getAttribute("aria-label") !== x.label) {
        el.setAttribute("aria-label", x.label);
        el.textContent = x.text;
        if (x.loss !== undefined) {
          el.dataset.loss = x.loss;
          el.removeAttribute("data-nodata");
          el.removeAttribute("title"); // refilled on hover with the new numbers
        } else {
          el.dataset.nodata = x.nodata;
          el.removeAttribute("data-loss");
          el.title = x.title;
        }
      }
    }
  }
}
// cellAt is the cell element of row r, column c of the main grid.
function cellAt(r, c) {
  const g = $("grid").firstElementChild;
  const row = g && g.children[r + 1];
  return row ? row.children[c + 1] : null;
}
// cellPos is a cell element's row and column.
function cellPos(el) {
  const row = el.parentElement;
  return [+row.dataset.r, Array.prototype.indexOf.call(row.children, el) - 1];
}
const cellOf = (e) => e.target.closest && e.target.closest('[role="gridcell"]');
function currentFam() {
  const V = S.view && S.idx.views.get(viewKey(S.view));
  return V ? V.fam : null;
}
// moveCursor hands the roving tabindex to another cell and focuses it.
function moveCursor(r, c) {
  const F = currentFam();
  if (!F) return;
  r = Math.max(0, Math.min(F.rows.length - 1, r)); c = Math.max(0, Math.min(F.cols.length - 1, c));
  const old = $("grid").querySelector('[role="gridcell"][tabindex]');
  if (old) old.removeAttribute("tabindex");
  const el = cellAt(r, c);
  el.tabIndex = 0;
  el.focus();
  S.cursor = {source: F.rows[r], target: F.cols[c]};
}
function onGridKey(e) {
  const el = cellOf(e);
  if (!el) return;
  const [r, c] = cellPos(el);
  const moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], PageUp: [-10, 0], PageDown: [10, 0]};
  if (moves[e.key]) { e.preventDefault(); moveCursor(r + moves[e.key][0], c + moves[e.key][1]); return; }
  if (e.key === "Home") { e.preventDefault(); moveCursor(r, 0); return; }
  if (e.key === "End") { e.preventDefault(); moveCursor(r, 1e9); return; }
  if (e.key === "Enter" || e.key === " ") { e.preventDefault(); traceCell(el); }
}
function onGridClick(e) {
  const el = cellOf(e);
  if (!el) return;
  const [r, c] = cellPos(el);
  moveCursor(r, c);
  traceCell(el);
}
// onGridHover fills a data cell's tooltip when first pointed at: RTTs
// for 15,625 cells would double the markup for no one.
function onGridHover(e) {
  const el = cellOf(e);
  if (!el || el.title || !el.dataset.loss) return;
  const V = S.idx.views.get(viewKey(S.view)), F = V.fam;
  const [r, c] = cellPos(el);
  const x = V.cells[V.at[r * F.cols.length + c]];
  const mtu = x && x.pathMTU ? `\npath MTU ${x.pathMTU} bytes (the network said so: discovery works)` : "";
  if (x) el.title = `${x.source} → ${x.target} (${V.protocol})\n${x.lost} lost of ${x.sent} (${pct(x.lossRatio)})\nRTT p50 ${ms(x.rttP50Seconds)}, p99 ≤ ${ms(x.rttP99Seconds)}${mtu}\nclick to trace`;
}
// applyHighlight outlines the highlighted cells in the grid without rebuilding it.
function applyHighlight() {
  for (const el of $("grid").querySelectorAll(".hl")) el.classList.remove("hl");
  const F = currentFam(), set = F && S.hl && S.hl.byFam.get(F.key);
  if (set) {
    for (const k of set) {
      const tab = k.indexOf("\t");
      const r = F.rowIdx.get(k.slice(0, tab)), c = F.colIdx.get(k.slice(tab + 1));
      const el = r !== undefined && c !== undefined && cellAt(r, c);
      if (el) el.classList.add("hl");
    }
  }
  drawThumbs();
}

// ---- the fabric ----

// buildFabric draws the fabric in tiers: LBs, spines by tier, ToRs, and
// each ToR's hosts under it as a rack; pods fold into their node. The
// SVG is one string set once; listeners sit on #fabric (delegation), so
// 5,000 hosts cost markup only.
function buildFabric(f) {
  const c = classifyDevices(f);
  const L = layoutFabric(c);
  const pairs = pairLinks(f.links || [], c.devs, L.pos);
  const dense = c.racks.length * c.nSpines > 200;
  const svg = svgLinks(pairs, c.devs, L, dense) + svgDevices(c, L);
  const html = `<svg xmlns="http://www.w3.org/2000/svg"${dense ? ' class="dense"' : ""} viewBox="0 0 ${L.W} ${L.H}" role="group"` +
    ` aria-label="fabric: ${c.lbs.length} load balancers, ${c.nSpines} spines, ${c.tors.length} ToRs, ${c.nHosts} hosts">${svg}</svg>`;
  return {html, devs: c.devs, podsOf: c.podsOf, nav: L.nav, pairs};
}
const cmpDev = (a, b) => byName(a.name, b.name);
// classifyDevices sorts the devices into LBs, spine tiers (highest
// first), racks (a ToR and its hosts) and pods by node; hosts without a
// known ToR make a last rack of their own.
function classifyDevices(f) {
  const devs = new Map(), podsOf = new Map(), hostsOf = new Map();
  const tors = [], lbs = [], spineTiers = new Map(), loose = [];
  const agentLike = (d) => d.role === "host" || d.role === "pod";
  for (const d of f.devices || []) devs.set(d.name, d);
  for (const d of f.devices || []) {
    if (d.role === "lb") lbs.push(d);
    else if (agentLike(d)) continue;
    else if (d.role === "tor" || d.tier === 1) { tors.push(d); hostsOf.set(d.name, []); }
    else { const t = Math.max(2, d.tier || 2); if (!spineTiers.has(t)) spineTiers.set(t, []); spineTiers.get(t).push(d); }
  }
  for (const d of f.devices || []) {
    if (!agentLike(d)) continue;
    const parent = devs.get(d.parent);
    if (d.role === "pod" && parent && parent.role === "host") {
      if (!podsOf.has(d.parent)) podsOf.set(d.parent, []);
      podsOf.get(d.parent).push(d);
    } else if (hostsOf.has(d.parent)) hostsOf.get(d.parent).push(d);
    else loose.push(d);
  }
  tors.sort(cmpDev); lbs.sort(cmpDev);
  const racks = tors.map((t) => ({tor: t, hosts: hostsOf.get(t.name).sort(cmpDev)}));
  if (loose.length) racks.push({tor: null, hosts: loose.sort(cmpDev)});
  const tiers = [...spineTiers.keys()].sort((a, b) => b - a).map((t) => spineTiers.get(t).sort(cmpDev));
  return {devs, podsOf, tors, lbs, tiers, racks, loose,
    nSpines: tiers.reduce((n, t) => n + t.length, 0), nHosts: racks.reduce((n, r) => n + r.hosts.length, 0)};
}
// layoutFabric places every drawn device ({x, y, w, h} in viewBox units)
// and builds the keyboard navigation. A few hosts get labelled boxes; many
// get a 4-unit carpet per rack, racks about 1,400 units wide in all.
function layoutFabric(c) {
  const {racks, tiers, lbs} = c;
  const maxHosts = racks.reduce((n, r) => Math.max(n, r.hosts.length), 0);
  const detailed = c.nHosts <= 64 && maxHosts <= 10;
  const HW = 58, HH = 20, HG = 6, HOST = 4;
  let pitch, cols = 1;
  if (detailed) pitch = Math.max(110, maxHosts * (HW + HG) + 14);
  else {
    pitch = Math.max(9, Math.min(80, Math.floor(1400 / Math.max(1, racks.length))));
    cols = Math.max(1, Math.floor((pitch - 3) / HOST));
  }
  const W = Math.max(700, racks.length * pitch);
  const pos = new Map(), rowsNav = [];
  let y = 8;
  const spread = (list, boxW, boxH) => {
    const step = W / Math.max(1, list.length), bw = Math.min(boxW, step - 8);
    list.forEach((d, i) => pos.set(d.name, {x: step * (i + .5) - bw / 2, y, w: bw, h: boxH}));
    rowsNav.push(list.map((d) => d.name));
    y += boxH + 46;
  };
  if (lbs.length) spread(lbs, 90, 22);
  for (const t of tiers) spread(t, 96, 24);
  const torY = y, torH = detailed ? 24 : 14;
  racks.forEach((rk, i) => {
    if (!rk.tor) return;
    const w = detailed ? Math.min(pitch - 16, Math.max(100, rk.hosts.length * (HW + HG) - HG)) : pitch - 2;
    pos.set(rk.tor.name, {x: i * pitch + (pitch - w) / 2, y: torY, w, h: torH});
  });
  rowsNav.push(racks.filter((rk) => rk.tor).map((rk) => rk.tor.name));
  const hostY = torY + torH + (detailed ? 34 : 12);
  racks.forEach((rk, i) => rk.hosts.forEach((d, k) => {
    if (detailed) pos.set(d.name, {x: i * pitch + (pitch - rk.hosts.length * (HW + HG) + HG) / 2 + k * (HW + HG), y: hostY, w: HW, h: HH});
    else pos.set(d.name, {x: i * pitch + 1 + (k % cols) * HOST, y: hostY + Math.floor(k / cols) * HOST, w: HOST - .6, h: HOST - .6});
  }));
  const H = hostY + (detailed ? HH : Math.ceil(maxHosts / cols) * HOST) + 8 + (c.loose.length ? 14 : 0);
  // Keyboard: left/right within a row, up/down to the nearest of the next tier.
  const nav = new Map();
  rowsNav.forEach((row, ri) => row.forEach((name, i) => nav.set(name, {row, i,
    up: ri > 0 ? nearest(rowsNav[ri - 1], i, row.length) : "", down: ri + 1 < rowsNav.length ? nearest(rowsNav[ri + 1], i, row.length) : ""})));
  racks.forEach((rk) => {
    const row = rk.hosts.map((d) => d.name);
    row.forEach((name, i) => nav.set(name, {row, i, up: rk.tor ? rk.tor.name : "", down: ""}));
    if (rk.tor && row.length) nav.get(rk.tor.name).down = row[0];
  });
  return {pos, nav, W, H, pitch, detailed};
}
// pairLinks folds the directed links into one per drawn device pair,
// keeping the worse direction (and the other for the tooltip).
function pairLinks(links, devs, pos) {
  const fold = (n) => { const d = devs.get(n); return d && d.role === "pod" && pos.has(d.parent) ? d.parent : n; };
  const pairs = new Map();
  for (const l of links) {
    const a = fold(l.from), b = fold(l.to);
    if (a === b || !pos.has(a) || !pos.has(b)) continue;
    const k = a < b ? a + "\n" + b : b + "\n" + a;
    const p = pairs.get(k);
    if (!p) pairs.set(k, {a, b, worst: l, other: null, suspect: !!l.suspect});
    else {
      p.suspect = p.suspect || !!l.suspect;
      if ((l.estimatedLoss || 0) > (p.worst.estimatedLoss || 0)) { p.other = p.worst; p.worst = l; } else p.other = l;
    }
  }
  return pairs;
}
// svgLinks draws the pairs as lines; with a host carpet only the lossy or
// suspect host links are drawn: 10,000 clean ones would be a grey smear.
function svgLinks(pairs, devs, L, dense) {
  const toHost = (p) => devs.get(p.a).role === "host" || devs.get(p.b).role === "host" || devs.get(p.a).role === "pod" || devs.get(p.b).role === "pod";
  const lines = [...pairs.values()].filter((p) => L.detailed || p.suspect || (p.worst.estimatedLoss || 0) > 0 || !toHost(p));
  // Lossy and suspect links last, so they are drawn on top.
  lines.sort((p, q) => (p.suspect - q.suspect) || ((p.worst.estimatedLoss || 0) - (q.worst.estimatedLoss || 0)));
  let svg = "";
  for (const p of lines) {
    const A = L.pos.get(p.a), B = L.pos.get(p.b);
    const [U, D] = A.y < B.y ? [A, B] : [B, A];
    const loss = p.worst.estimatedLoss || 0, b = bucket(loss);
    const cls = `s${b}${b ? " lossy" : dense ? " thin" : ""}${p.suspect ? " sus" : ""}`;
    const tip = `${p.worst.from} → ${p.worst.to}: ${pct(loss)} estimated loss, ${p.worst.flows || 0} flows` +
      (p.other ? `\n${p.other.from} → ${p.other.to}: ${pct(p.other.estimatedLoss || 0)}, ${p.other.flows || 0} flows` : "") + (p.suspect ? "\nSUSPECT" : "");
    svg += `<line class="${cls}" x1="${(U.x + U.w / 2).toFixed(1)}" y1="${(U.y + U.h).toFixed(1)}" x2="${(D.x + D.w / 2).toFixed(1)}" y2="${D.y.toFixed(1)}"` +
      ` data-link="${esc(p.worst.from + "->" + p.worst.to)}"${p.suspect ? ' data-suspect-link="true"' : ""}><title>${esc(tip)}</title></line>`;
  }
  return svg;
}
// svgDevices draws LBs, spines and ToRs as labelled groups and hosts as
// boxes (few) or bare rects (many), each coloured by its loss.
function svgDevices(c, L) {
  const device = (d, fill, label, tip) => {
    const P = L.pos.get(d.name), b = bucket(fill), sus = d.suspect ? ` data-suspect="${esc(d.suspect)}"` : "";
    const aria = `${d.role} ${d.name}: ${pct(fill)} estimated loss${d.suspect ? ", suspect " + d.suspect : ""}`;
    let t = `<g class="dev" data-device="${esc(d.name)}"${sus} tabindex="-1" role="button" aria-label="${esc(aria)}"><title>${esc(tip)}</title>` +
      `<rect class="f${b}" x="${P.x.toFixed(1)}" y="${P.y}" width="${P.w.toFixed(1)}" height="${P.h}" rx="3"/>`;
    if (label) t += `<text x="${(P.x + P.w / 2).toFixed(1)}" y="${P.y + P.h / 2 + 4}" text-anchor="middle"${b >= DARK ? ' class="inv"' : ""}>${esc(label)}</text>`;
    return t + "</g>";
  };
  const tipOf = (d) => `${d.role} ${d.name}${d.tier !== undefined ? " (tier " + d.tier + ")" : ""}: ${pct(d.estimatedLoss || 0)} estimated loss` +
    (d.addresses && d.addresses.length ? "\n" + d.addresses.join(", ") : "") + (d.suspect ? "\nSUSPECT " + d.suspect : "");
  // A node's loss is the worst of it and its pods.
  const worstOf = (d) => (c.podsOf.get(d.name) || []).reduce((m, p) => Math.max(m, p.estimatedLoss || 0), d.estimatedLoss || 0);
  let svg = "";
  for (const d of c.lbs) svg += device(d, d.estimatedLoss || 0, d.name, tipOf(d));
  for (const t of c.tiers) for (const d of t) svg += device(d, d.estimatedLoss || 0, d.name, tipOf(d));
  for (const rk of c.racks) {
    if (!rk.tor) continue;
    const fits = L.pitch >= rk.tor.name.length * 6.5 + 6;
    svg += device(rk.tor, rk.tor.estimatedLoss || 0, fits ? rk.tor.name : "", tipOf(rk.tor) + `\n${rk.hosts.length} hosts`);
  }
  for (const rk of c.racks) {
    for (const d of rk.hosts) {
      const loss = worstOf(d), P = L.pos.get(d.name);
      if (L.detailed) { svg += device(d, loss, d.name, hostTip(d, c.podsOf, rk.tor)); continue; }
      // 5,000 <title>s cost as much as the rest of the SVG: onFabricOver adds one when pointed at.
      const sus = d.suspect ? ` data-suspect="${esc(d.suspect)}"` : "";
      svg += `<rect class="f${bucket(loss)}" data-device="${esc(d.name)}"${sus} role="button" aria-label="${esc(d.role + " " + d.name + ": " + pct(loss) + " estimated loss")}"` +
        ` x="${P.x.toFixed(1)}" y="${P.y}" width="${P.w.toFixed(1)}" height="${P.h.toFixed(1)}"/>`;
    }
  }
  if (c.loose.length) svg += `<text x="${(c.racks.length - 1) * L.pitch + 2}" y="${L.H - 4}">no ToR known</text>`;
  return svg;
}
// hostTip is a node's tooltip: its loss and its pods'.
function hostTip(d, podsOf, tor) {
  const pods = podsOf.get(d.name) || [];
  const worstPod = pods.reduce((m, p) => (!m || (p.estimatedLoss || 0) > (m.estimatedLoss || 0) ? p : m), null);
  return `${d.role} ${d.name}${tor ? " under " + tor.name : ""}: ${pct(d.estimatedLoss || 0)} estimated loss` +
    (pods.length ? `; ${pods.length} pods, worst ${worstPod.name} ${pct(worstPod.estimatedLoss || 0)}` : "") +
    (d.addresses && d.addresses.length ? "\n" + d.addresses.join(", ") : "") + (d.suspect ? "\nSUSPECT " + d.suspect : "");
}
// nearest maps position i of a row of n to the closest position in row.
function nearest(row, i, n) {
  if (!row.length) return "";
  return row[Math.min(row.length - 1, Math.floor((i + .5) * row.length / Math.max(1, n)))];
}
function renderFabric(text) {
  if (text === S.fabricText && S.fab) return;
  const f = JSON.parse(text);
  const box = $("fabric");
  const hadFocus = box.contains(document.activeElement);
  S.fab = buildFabric(f);
  S.fabricText = text;
  box.innerHTML = S.fab.html;
  if (!S.fabCursor || !S.fab.nav.has(S.fabCursor)) {
    const sus = box.querySelector("[data-device][data-suspect]") || box.querySelector("[data-device]");
    S.fabCursor = sus ? sus.dataset.device : "";
  }
  const cur = deviceEl(S.fabCursor);
  if (cur) { cur.tabIndex = 0; if (hadFocus) cur.focus({preventScroll: true}); }
  markSelected();
}
const deviceEl = (name) => name ? $("fabric").querySelector(`[data-device="${CSS.escape(name)}"]`) : null;
const linkEls = (name) => name ? [...$("fabric").querySelectorAll(`[data-link="${CSS.escape(name)}"]`)] : [];
// linkEl finds a link's line whichever direction it was drawn for.
function linkEl(name) {
  const [a, b] = name.split("->");
  return linkEls(name)[0] || linkEls(`${b}->${a}`)[0] || null;
}
function markSelected() {
  for (const el of $("fabric").querySelectorAll(".sel")) el.classList.remove("sel");
  const name = S.hovered || S.pinned;
  if (!name) return;
  const el = name.includes("->") ? linkEl(name) : deviceEl(name);
  if (el) el.classList.add("sel");
}

// ---- device evidence and highlight ----
const suspectNamed = (name) => S.diag && S.diag.suspects.find((s) => s.name === name || (s.kind === "link" && name.includes("->") && s.name === name.split("->").reverse().join("->")));

// showEvidence writes what is known about a device or link: the
// diagnosis's evidence when it is a suspect, else its estimated loss.
function showEvidence(name) {
  const box = $("device");
  if (!name) {
    // Nothing picked: open on the trouble, the top suspect's evidence.
    const top = S.diag && S.diag.suspects && S.diag.suspects[0];
    box.innerHTML = top ? `<h3>top suspect: <button type="button" class="link" data-select="${esc(top.name)}">${esc(top.name)}</button></h3>` + suspectHTML(top) +
      '<p class="note">Click it, or point at a switch or host, to outline the cells whose flows cross it.</p>' : '<p class="meta">Point at a switch or host for its evidence.</p>';
    return;
  }
  const s = suspectNamed(name);
  let h = "";
  if (name.includes("->")) {
    const el = linkEl(name);
    h += `<h3>link ${esc(name)}</h3>` + (el ? `<p>${esc(el.querySelector("title").textContent).replace(/\n/g, "<br>")}</p>` : "");
  } else {
    const d = S.fab && S.fab.devs.get(name);
    const pods = (S.fab && S.fab.podsOf.get(name)) || [];
    h += `<h3>${esc(d ? d.role : "device")} ${esc(name)}${d && d.tier !== undefined ? ` <span class="note">tier ${d.tier}</span>` : ""}</h3>`;
    if (d) {
      h += `<p>estimated loss <b>${pct(d.estimatedLoss || 0)}</b>` + (d.addresses && d.addresses.length ? ` · addresses ${esc(d.addresses.join(", "))}` : "") +
        (d.parent ? ` · under ${esc(d.parent)}` : "") + (d.group ? ` · matrix group ${esc(d.group)}` : "") + "</p>";
      if (pods.length) h += `<p>${pods.length} pods: ` + pods.map((p) => `${esc(p.name)} ${pct(p.estimatedLoss || 0)}`).join(", ") + "</p>";
    }
  }
  if (s) h += suspectHTML(s);
  else h += '<p class="ok">not a suspect</p>';
  h += `<p id="devcells" class="note">${S.hl && S.hl.name === name ? cellsNote() : "looking up the cells whose flows cross it…"}</p>`;
  box.innerHTML = h;
}
function suspectHTML(s) {
  const e = s.evidence || {};
  let h = `<p class="bad">SUSPECT ${esc(s.kind)} ${esc(s.name)}${s.family ? ` (${esc(s.family)} only)` : ""}: score ${s.score.toFixed(2)}, estimated loss ${pct(s.estimatedLoss)}, since ${clock(s.since)} (${ago(s.since)})</p>` +
    `<p>${esc(e.detail || "")}</p>` +
    `<p>${e.lossyFlows || 0} lossy flows, ${e.cleanFlows || 0} clean; ${Math.round(e.lostProbes || 0)} of ${Math.round(e.sentProbes || 0)} probes lost` +
    (e.pValue !== undefined ? `; p ${e.pValue < 1e-6 ? "< 1e-6" : "= " + e.pValue.toPrecision(2)}` : "") + (e.stage ? `; found by ${esc(e.stage)}` : "") + "</p>";
  if (e.links && e.links.length) h += `<p>lossy links: ${e.links.map(esc).join(", ")}</p>`;
  if (e.silent) h += '<p class="note">silent fabric: no router on these paths answers traceroute, so the device cannot be named; the flows\' 5-tuples below tell the fabric\'s ECMP hash tool which path they take</p>';
  if (e.examples && e.examples.length) {
    const tuple = (x) => x.sourceAddress && x.targetAddress ? `tcp ${x.sourceAddress}:${x.sourcePort || "?"} → ${x.targetAddress}:${x.targetPort || "?"}` : String(x.sourcePort || "");
    h += '<table class="list"><tr><th>example flow</th><th>port / 5-tuple</th><th>lost / sent</th><th>hops</th></tr>' + e.examples.map((x) =>
      `<tr><td>${esc(x.source)} → ${esc(x.target)}${x.path ? ` <span class="note">${esc(x.path)}${x.family ? " " + esc(x.family) : ""}</span>` : ""}</td><td>${esc(tuple(x))}</td><td>${x.lost} / ${x.sent}</td><td>${esc((x.hops || []).join(" › "))}</td></tr>`).join("") + "</table>";
  }
  return h;
}
function cellsNote() {
  const hl = S.hl;
  if (!hl) return "";
  if (hl.error) return `cannot read the cells crossing ${esc(hl.name)}: ${esc(hl.error)}`;
  if (!hl.total) return `no traced flow of the matrix crosses ${esc(hl.name)}`;
  const fams = [...hl.byFam.keys()].map((k) => k.replace("|", " / ")).join(", ");
  return `flows of <b>${hl.total}</b> cells cross ${esc(hl.name)} (${hl.lossy} with lossy flows), outlined in the matrix: ${esc(fams)}`;
}
// fabricCells fetches (once per refresh) the cells whose flows cross a device or link.
function fabricCells(name) {
  if (!S.cellsCache.has(name)) {
    S.cellsCache.set(name, fetch("api/v1/fabric/cells?device=" + encodeURIComponent(name)).then(async (r) => {
      if (!r.ok) throw new Error(`${r.status} ${(await r.text()).trim()}`);
      return r.json();
    }));
  }
  return S.cellsCache.get(name);
}
let hlToken = 0, hoverTimer = 0;
// highlight outlines the cells of name's flows; on an explicit pick it
// switches the main grid to a view that has some when the current has none.
async function highlight(name, explicit) {
  const token = ++hlToken;
  if (!name) { S.hl = null; applyHighlight(); return; }
  let hl;
  try {
    const res = await fabricCells(name);
    const byFam = new Map();
    let lossy = 0;
    for (const c of res.cells || []) {
      const k = c.path + "|" + (c.family || "");
      if (!byFam.has(k)) byFam.set(k, new Set());
      byFam.get(k).add(c.source + "\t" + c.target);
      if (c.lossyFlows > 0) lossy++;
    }
    hl = {name, byFam, total: (res.cells || []).length, lossy};
  } catch (e) {
    S.cellsCache.delete(name);
    hl = {name, byFam: new Map(), total: 0, lossy: 0, error: String(e.message || e)};
  }
  if (token !== hlToken) return;
  S.hl = hl;
  const F = currentFam();
  if (explicit && hl.total && !(F && hl.byFam.get(F.key) && hl.byFam.get(F.key).size)) {
    const cur = S.view || {};
    const cands = S.idx.order.filter((V) => hl.byFam.has(V.fam.key));
    const to = cands.find((V) => V.protocol === cur.protocol && V.family === cur.family) || cands.find((V) => V.protocol === cur.protocol) || cands[0];
    if (to) pickView(to);
  }
  applyHighlight();
  const note = $("devcells");
  if (note) note.innerHTML = cellsNote();
}
// inspect shows a device's evidence and highlight; pointer hovers wait a
// moment so sweeping across 5,000 hosts does not fetch each one.
function inspect(name, explicit) {
  clearTimeout(hoverTimer);
  markSelected();
  showEvidence(name);
  if (explicit) { highlight(name, true); return; }
  hoverTimer = setTimeout(() => highlight(name, false), 150);
}
function pin(name) {
  S.pinned = S.pinned === name ? "" : name;
  S.hovered = "";
  inspect(S.pinned, true);
}
const fabricTarget = (e) => e.target.closest && e.target.closest("[data-device],[data-link]");
const nameOf = (el) => el.dataset.device || el.dataset.link;
function onFabricOver(e) {
  const el = fabricTarget(e);
  if (el && el.tagName === "rect" && !el.firstChild) {
    const d = S.fab.devs.get(el.dataset.device);
    const t = document.createElementNS("http://www.w3.org/2000/svg", "title");
    t.textContent = hostTip(d, S.fab.podsOf, S.fab.devs.get(d.parent));
    el.appendChild(t);
  }
  const name = el ? nameOf(el) : "";
  if (name === S.hovered) return;
  S.hovered = name;
  inspect(name || S.pinned, false);
}
function onFabricOut(e) {
  if (e.relatedTarget && $("fabric").contains(e.relatedTarget)) return;
  if (!S.hovered) return;
  S.hovered = "";
  inspect(S.pinned, false);
}
function onFabricClick(e) {
  const el = fabricTarget(e);
  if (!el) return;
  if (el.dataset.device) moveFabricCursor(el.dataset.device, false);
  pin(nameOf(el));
}
function moveFabricCursor(name, focus) {
  const old = $("fabric").querySelector('[data-device][tabindex="0"]');
  if (old) old.tabIndex = -1;
  const el = deviceEl(name);
  if (!el) return;
  el.tabIndex = 0;
  S.fabCursor = name;
  if (focus) el.focus();
}
function onFabricKey(e) {
  const el = e.target.closest && e.target.closest("[data-device]");
  if (!el) return;
  const n = S.fab.nav.get(el.dataset.device);
  let to = "";
  if (e.key === "ArrowLeft" && n) to = n.row[n.i - 1];
  else if (e.key === "ArrowRight" && n) to = n.row[n.i + 1];
  else if (e.key === "ArrowUp" && n) to = n.up;
  else if (e.key === "ArrowDown" && n) to = n.down;
  else if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pin(el.dataset.device); return; }
  else if (e.key === "Escape") { S.pinned = ""; S.hovered = ""; inspect("", true); return; }
  else return;
  e.preventDefault();
  if (to) moveFabricCursor(to, true);
}
function onFabricFocus(e) {
  const el = e.target.closest && e.target.closest("[data-device]");
  if (!el || el.dataset.device === S.hovered) return;
  S.hovered = el.dataset.device;
  inspect(S.hovered, false);
}

// ---- trace ----
function traceCell(el) {
  if (el.dataset.nodata && !el.classList.contains("proto")) return; // nothing probes that pair
  const v = S.view;
  runTrace(el.dataset.source, el.dataset.target, v.path, v.family, v.protocol === "tcp_syn_mtu");
}
// runTrace asks the matrix for an on-demand trace of a cell; one at a
// time, as the agent's trace budget is small and a trace takes 10-20 s.
// large (a tcp_syn_mtu cell) traces with the flows' large probes, which
// end where a path MTU black hole swallows them.
async function runTrace(source, target, path, family, large) {
  const panel = $("trace");
  if (S.tracing) {
    const n = panel.querySelector(".busy");
    if (n) n.textContent = `a trace is running; ${source} → ${target} can be traced when it is done`;
    return;
  }
  S.tracing = true;
  panel.dataset.state = "running";
  panel.setAttribute("aria-busy", "true");
  panel.dataset.source = source; panel.dataset.target = target;
  const started = Date.now();
  panel.innerHTML = `<h3>tracing ${esc(source)} -> ${esc(target)}'s flows…</h3>` +
    `<p class="meta">${esc(path)}${family ? " / " + esc(family) : ""}: the matrix asks the agent of the worst pair in this cell to trace every tcp_syn flow hop by hop${large ? ", with its large probes" : ""}; this takes 10–20 s. <span id="trace-elapsed">0 s</span></p><p class="busy note"></p>`;
  const tick = setInterval(() => { const el = $("trace-elapsed"); if (el) el.textContent = Math.round((Date.now() - started) / 1000) + " s"; }, 1000);
  try {
    const q = new URLSearchParams({source, target, path, family: family || ""});
    if (large) q.set("large", "1");
    const r = await fetch("api/v1/trace?" + q, {method: "POST", headers: {"X-Prober-Trace": "1"}});
    const body = await r.text();
    if (!r.ok) throw traceError(r, body);
    panel.innerHTML = traceHTML(JSON.parse(body), source, target);
    panel.dataset.state = "done";
  } catch (e) {
    panel.dataset.state = "error";
    panel.innerHTML = `<h3>trace ${esc(source)} → ${esc(target)} failed</h3><p class="msg">${esc(e.message || e)}</p>` +
      `<button type="button" id="retrace">trace again</button>`;
  } finally {
    clearInterval(tick);
    S.tracing = false;
    panel.removeAttribute("aria-busy");
  }
  const again = $("retrace");
  if (again) again.onclick = () => runTrace(source, target, path, family, large);
}
function traceError(r, body) {
  let msg = `${r.status} ${r.statusText}: ${body.trim() || "no detail"}`;
  if (r.status === 429) {
    const ra = r.headers.get("Retry-After");
    let at = null;
    if (ra && /^\d+$/.test(ra)) at = new Date(Date.now() + 1000 * +ra);
    else if (ra) at = new Date(ra);
    if (at && !isNaN(at)) msg += ` (try again in ${Math.max(1, Math.round((at - Date.now()) / 1000))} s, after ${at.toLocaleTimeString()})`;
  }
  return new Error(msg);
}
// traceHTML renders the report as `prober trace` prints it, with the
// device names the matrix knows each hop by set in bold.
function traceHTML(res, source, target) {
  const rep = res.report || {};
  const nm = (n) => n ? `<b>${esc(n)}</b>` : "";
  const named = (addr, name) => name ? `${nm(name)} (${esc(addr)})` : esc(addr || "*");
  const inferred = rep.inferredSuspects || [];
  const sus = rep.suspects || [];
  let h = `<h3>trace ${esc(source)} → ${esc(target)}: agent ${esc(res.agent || "")} to ${esc(res.target || "")} (${esc(res.address || rep.target || "")})</h3>`;
  const heads = [];
  // The matrix's listed suspects this pair's paths cross: the fabric-wide
  // finding, checked on one pair's flows.
  const listed = ((S.diag && S.diag.suspects) || []).filter((s) => s.score >= 0.1 && s.kind !== "link");
  const crossed = new Map();
  for (const p of rep.paths || []) for (const x of p.hops || []) {
    const s = x.name && listed.find((l) => l.name === x.name);
    if (!s) continue;
    const c = crossed.get(s.name) || {s, flows: 0, lossy: 0};
    c.flows += (p.sourcePorts || []).length; c.lossy += (p.lossySourcePorts || []).length;
    crossed.set(s.name, c);
  }
  for (const c of crossed.values()) heads.push(`crosses the matrix's suspect <strong>${esc(c.s.kind)} ${esc(c.s.name)}</strong> (score ${c.s.score.toFixed(2)}): ${c.flows} of ${rep.flowCount || 0} flows, ${c.lossy} of them lossy in this trace`);
  for (const s of sus) heads.push(`loss starts after <strong>${esc(s.name || s.address)}</strong>${s.name ? " (" + esc(s.address) + ")" : ""}: ${(s.sourcePorts || []).length} flows, end to end ${pct(s.endToEndLoss)} lost`);
  for (const s of inferred) heads.push(`inferred from this pair's flows: <strong>${esc(s.kind)} ${esc(s.name)}</strong> score ${(+s.score || 0).toFixed(2)}`);
  h += heads.length ? `<p class="headline bad">${heads.join("<br>")}</p>` : `<p class="headline ok">no suspects: no flow lost more than noise end to end</p>`;
  let t = `trace to ${esc(rep.host || "")} (${esc(rep.target || "")}) port ${rep.port || ""} from ${esc(rep.source || "")}: ${rep.flowCount || 0} flows, ${rep.probesPerHop || 0} probes${rep.probeSize ? ` of ${+rep.probeSize} bytes` : ""} per hop, ${(rep.paths || []).length} distinct paths, ${(+rep.durationSeconds || 0).toFixed(1)}s\n`;
  (rep.paths || []).forEach((p, i) => {
    const n = (p.sourcePorts || []).length, lossy = (p.lossySourcePorts || []).length;
    t += `\npath ${i + 1} (${esc((p.hash || "").slice(0, 8))}): ${n} flows, end-to-end ${p.received}/${p.sent} answered, loss ${pct(p.loss)}${lossy ? `  <b>LOSSY: ${lossy} of ${n} flows</b>` : ""}\n`;
    t += `  source ports: ${ports(p.sourcePorts)}\n`;
    if (lossy) t += `  lossy ports:  ${ports(p.lossySourcePorts)}\n`;
    const hops = p.hops || [];
    const wAddr = Math.max(7, ...hops.map((x) => (x.address || "*").length)), wName = Math.max(4, ...hops.map((x) => (x.name || "").length));
    t += `  ${"TTL".padEnd(5)}${"ADDRESS".padEnd(wAddr + 2)}${"NAME".padEnd(wName + 2)}${"SENT".padEnd(6)}${"RECV".padEnd(6)}${"LOSS".padEnd(8)}${"RTT".padEnd(10)}\n`;
    for (const x of hops) {
      let note = "";
      if (x.suspect) note = "<b>&lt;- SUSPECT: loss starts after this hop</b>";
      else if (x.name && crossed.has(x.name)) note = "<b>&lt;- the matrix's suspect</b>";
      else if (x.inferred > 0) note = `(inferred for ${x.inferred} of ${n} flows)`;
      const line = `  ${String(x.ttl).padEnd(5)}${esc((x.address || "*").padEnd(wAddr + 2))}${x.name ? nm(x.name) + " ".repeat(wName + 2 - x.name.length) : " ".repeat(wName + 2)}` +
        `${String(x.sent).padEnd(6)}${String(x.received).padEnd(6)}${pct(x.loss).padEnd(8)}${rtt(x.rttSeconds).padEnd(10)}${note}`;
      t += x.suspect || (x.name && crossed.has(x.name)) ? `<span class="susline">${line}</span>\n` : line + "\n";
    }
    if (p.reached === false) t += "  (destination not reached)\n";
  });
  if (!sus.length && !inferred.length && !rep.unlocated) {
    t += "\nno suspects: no flow lost more than noise end to end (silent or lossy middle hops alone are ICMP rate limiting)\n";
  }
  if (sus.length) {
    t += "\nsuspects (loss starts after these hops):\n";
    for (const s of sus) t += `  ${named(s.address, s.name)}: ${(s.sourcePorts || []).length} flows (${ports(s.sourcePorts)}); hop answered ${s.hopReceived}/${s.hopSent}, end to end ${s.endToEndReceived}/${s.endToEndSent} (${pct(s.endToEndLoss)} loss)\n`;
  }
  if (inferred.length) {
    const win = rep.windowProbes ? `, with their ${rep.windowProbes} probes of the agent's window and their earlier traces` : "";
    t += `\ninferred from the flows${win} (lossy flows cross these and clean flows avoid them; no hop needs to answer):\n`;
    for (const s of inferred) {
      const through = s.throughSourcePorts || s.through || [], lossyP = s.lossySourcePorts || s.lossy || [], unknown = s.unknownSourcePorts || s.unknown || [];
      const sent = s.throughSent !== undefined ? s.throughSent : s.sent || 0, lost = s.throughLost !== undefined ? s.throughLost : s.lost || 0;
      const addrs = (s.addresses || []).join(",");
      t += `  ${esc(s.kind)} ${nm(s.name)}${addrs && addrs !== s.name ? " (" + esc(addrs) + ")" : ""}: score ${(+s.score || 0).toFixed(2)}; ${through.length} flows cross it (${ports(through)}), ${lossyP.length} lossy, ${lost}/${sent} lost (${pct(sent ? lost / sent : 0)}); ` +
        `${(rep.flowCount || 0) - through.length - unknown.length} flows avoid it, ${s.avoidLost || 0}/${s.avoidSent || 0} lost\n`;
      if (unknown.length) t += `    ${unknown.length} flows may cross it too (a hop of theirs was silent): ${ports(unknown)}\n`;
    }
  }
  const u = rep.unlocated;
  if (u) {
    const where = u.past ? `past hop ${u.pastTTL} (${esc(u.past)})` : "past the source";
    t += `\nunlocated: ${(u.lossySourcePorts || []).length} lossy flows (${ports(u.lossySourcePorts)}) lost ${u.lost}/${u.sent} ${where}; no hop past it answered to tell their paths from the ${u.cleanFlows} clean flows'\n`;
  }
  return h + `<pre>${t}</pre><p class="note">traced ${clock(Date.now())}; click another cell to trace it.</p>`;
}

// ---- suspects, history, lists ----
function renderSuspects(d) {
  if (!d.suspects || !d.suspects.length) { $("suspects").innerHTML = '<p class="ok">none: no element drops or delays significantly more than a healthy one</p>'; return; }
  $("suspects").innerHTML = '<table class="list"><tr><th>kind</th><th>name</th><th>score</th><th>est. loss / delay</th><th>since</th><th>evidence</th></tr>' +
    d.suspects.map((s) => `<tr data-kind="${esc(s.kind)}" data-name="${esc(s.name)}"><td>${esc(s.kind)}</td>` +
      `<td><button type="button" class="link" data-select="${esc(s.name)}" title="show in the fabric and outline its cells">${esc(s.name)}</button>${s.family ? ` <span class="meta">(${esc(s.family)} only)</span>` : ""}</td>` +
      `<td>${s.score.toFixed(2)}</td><td class="bad">${s.kind === "latency" ? "+" + ((s.addedDelaySeconds || 0) * 1e3).toFixed(1) + " ms" : pct(s.estimatedLoss)}</td><td>${clock(s.since)} <span class="note">${ago(s.since)}</span></td>` +
      `<td>${esc((s.evidence || {}).detail || "")} <span class="note">${s.kind === "latency" ? `${(s.evidence || {}).lossyFlows || 0} slow flows` : `${(s.evidence || {}).lossyFlows || 0} lossy / ${(s.evidence || {}).cleanFlows || 0} clean flows`}</span></td></tr>`).join("") + "</table>";
}
// sparkline draws a suspect's score over the window: x is time, y 0..1.
function sparkline(scores, windowSeconds, now) {
  const W = 160, H = 28, from = now - windowSeconds;
  const pts = (scores || []).map(([t, s]) => `${(W * (t - from) / windowSeconds).toFixed(1)},${(H - 2 - (H - 4) * Math.min(1, Math.max(0, s))).toFixed(1)}`);
  const last = scores && scores.length ? scores[scores.length - 1][1] : 0;
  return `<svg class="spark" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="score over the last hour, now ${last.toFixed(2)}">` +
    `<line x1="0" y1="${H - 2}" x2="${W}" y2="${H - 2}" stroke="#d5d9e0"/><polyline points="${pts.join(" ")}"/></svg>`;
}
function renderHistory(h) {
  const list = (h.suspects || []).slice().sort((a, b) => (!!a.until - !!b.until) || (new Date(b.since) - new Date(a.since)));
  if (!list.length) { $("history").innerHTML = '<p class="ok">no suspect in the last hour</p>'; return; }
  const now = Date.now() / 1000, win = h.windowSeconds || 3600;
  $("history").innerHTML = '<table class="list"><tr><th>state</th><th>kind</th><th>name</th><th>score, last hour</th><th>since</th><th>until</th><th>est. loss</th><th>detail</th></tr>' +
    list.map((s) => {
      const last = s.scores && s.scores.length ? s.scores[s.scores.length - 1][1] : 0;
      const max = (s.scores || []).reduce((m, x) => Math.max(m, x[1]), 0);
      return `<tr class="${s.until ? "cleared" : "listed"}" data-kind="${esc(s.kind)}" data-name="${esc(s.name)}" data-state="${s.until ? "cleared" : "listed"}">` +
        `<td>${s.until ? "cleared" : '<span class="bad">listed</span>'}</td><td>${esc(s.kind)}</td>` +
        `<td><button type="button" class="link" data-select="${esc(s.name)}">${esc(s.name)}</button>${s.family ? ` <span class="meta">(${esc(s.family)} only)</span>` : ""}</td>` +
        `<td>${sparkline(s.scores, win, now)} ${s.until ? "max " + max.toFixed(2) : last.toFixed(2)}</td>` +
        `<td>${clock(s.since)}</td><td>${s.until ? clock(s.until) + ` <span class="note">${ago(s.until)}</span>` : "now"}</td><td>${pct(s.estimatedLoss || 0)}</td><td>${esc(s.detail || "")}</td></tr>`;
    }).join("") + "</table>";
}
function renderLists(m) {
  const pulls = m.pulls || [], agents = m.agents || [];
  const up = pulls.filter((p) => p.ok).length;
  const stale = agents.filter((a) => a.state !== "fresh");
  $("meta").innerHTML = `grouped by <b>${esc(m.groupBy)}</b> · agents reporting <span class="${up === pulls.length ? "ok" : "bad"}">${up} of ${pulls.length}</span>` +
    (stale.length ? ` · <span class="bad">${stale.length} stale</span>` : "") + ` · ${esc(clock(m.time))} · every ${m.intervalSeconds} s`;
  const worst = m.worst || [];
  $("worst").innerHTML = worst.length ? '<table class="list"><tr><th>source</th><th>target</th><th>path</th><th>protocol</th><th>family</th><th>lost / sent</th><th>loss</th><th>RTT p50</th></tr>' +
    worst.map((c) => `<tr><td>${esc(c.source)}</td><td>${esc(c.target)}</td><td><button type="button" class="link" data-view="${esc(viewKey(c))}">${esc(c.path)}</button></td><td>${esc(c.protocol)}</td><td>${esc(c.family || "")}</td><td>${c.lost} / ${c.sent}</td><td>${pct(c.lossRatio)}</td><td>${ms(c.rttP50Seconds)}</td></tr>`).join("") + "</table>" : '<p class="meta">none</p>';
  // The datalist holds thousands of names: rebuilt only when they change.
  const names = [...new Set(pulls.map((p) => p.agent).filter(Boolean))].sort(byName);
  const nkey = names.length + "|" + names[0] + "|" + names[names.length - 1];
  if ($("plannodes").dataset.key !== nkey) {
    $("plannodes").innerHTML = names.slice(0, 10000).map((a) => `<option value="${esc(a)}">`).join("");
    $("plannodes").dataset.key = nkey;
  }
  // Thousands of agents: the trouble first, grouped; the full list on demand.
  const staleBy = new Map();
  for (const a of stale) {
    const g = staleBy.get(a.group) || {n: 0, seen: a.lastSeen, names: []};
    g.n++; if (a.lastSeen > g.seen) g.seen = a.lastSeen; if (g.names.length < 5) g.names.push(a.name);
    staleBy.set(a.group, g);
  }
  const bad = pulls.filter((p) => !p.ok), errBy = new Map();
  for (const p of bad) { const k = p.error || "failed"; if (!errBy.has(k)) errBy.set(k, []); errBy.get(k).push(p.agent || p.url); }
  const some = (list, n) => list.slice(0, 8).map(esc).join(", ") + (n > 8 ? `, … (${n})` : "");
  let h = `<p>${agents.length} agents: ${agents.length - stale.length} fresh, <span class="${stale.length ? "bad" : "ok"}">${stale.length} stale</span>; ${bad.length} of ${pulls.length} pulls failing</p>`;
  if (staleBy.size) h += '<table class="list"><tr><th>group with stale agents</th><th>stale</th><th>last seen</th><th>agents</th></tr>' +
    [...staleBy].sort((x, y) => byName(x[0], y[0])).slice(0, 50).map(([g, v]) =>
      `<tr><td class="bad">${esc(g)}</td><td>${v.n}${S.idx.fresh.has(g) ? "" : " (all)"}</td><td>${clock(v.seen)} <span class="note">${ago(v.seen)}</span></td><td>${some(v.names, v.n)}</td></tr>`).join("") + "</table>";
  if (errBy.size) h += '<table class="list"><tr><th>pull error</th><th>agents</th></tr>' +
    [...errBy].map(([e, list]) => `<tr><td class="bad">${esc(e)}</td><td>${some(list, list.length)}</td></tr>`).join("") + "</table>";
  h += `<details id="allpulls"><summary>all ${pulls.length} pulls</summary><div></div></details>`;
  const open = $("allpulls") && $("allpulls").open;
  $("agents").innerHTML = h;
  const det = $("allpulls");
  det.ontoggle = () => { if (det.open) det.lastElementChild.innerHTML = pullsTable(pulls); };
  if (open) det.open = true;
}
const pullsTable = (pulls) => '<table class="list"><tr><th>agent</th><th>url</th><th>latest pull</th></tr>' +
  pulls.map((p) => `<tr><td>${esc(p.agent || "")}</td><td>${esc(p.url)}</td><td class="${p.ok ? "ok" : "bad"}">${p.ok ? "ok" : esc(p.error || "")}</td></tr>`).join("") + "</table>";

// ---- refresh ----
async function getText(url) {
  const r = await fetch(url);
  const t = await r.text();
  if (!r.ok) throw new Error(`${url}: ${r.status} ${t.trim()}`);
  return t;
}
const getJSON = (url) => getText(url).then(JSON.parse);
function sectionError(id, what, e) { $(id).innerHTML = `<p class="bad">cannot read ${what}: ${esc(e.message || e)}</p>`; }

// refresh reads everything once a round and redraws; the trace panel,
// the pinned or hovered device and the keyboard focus survive it.
async function refresh() {
  let interval = 5;
  try {
    const t0 = performance.now();
    const [m, d, f, h] = await Promise.all([getJSON("api/v1/matrix"), getJSON("api/v1/diagnosis"),
      getText("api/v1/fabric").catch((e) => e), getJSON("api/v1/history").catch((e) => e)]);
    const t1 = performance.now();
    interval = Math.max(1, m.intervalSeconds || 5);
    S.matrix = m; S.diag = d;
    S.cellsCache.clear();
    // Phase times (ms) go to data-render-phases: where a slow render went.
    const phases = {}, phase = (k, fn) => { const t = performance.now(); fn(); phases[k] = Math.round(performance.now() - t); };
    phase("index", () => { S.idx = indexMatrix(m); });
    if (!S.rendered) S.user = readHash();
    chooseView();
    renderView();
    phase("multiples", renderMultiples);
    phase("grid", renderGrid);
    phase("fabric", () => { if (f instanceof Error) sectionError("fabric", "the fabric", f); else renderFabric(f); });
    phase("lists", () => {
      renderSuspects(d);
      if (h instanceof Error) sectionError("history", "the history", h); else renderHistory(h);
      renderLists(m);
    });
    phase("layout", () => void document.body.offsetHeight); // count layout in the render time
    document.body.dataset.renderPhases = JSON.stringify(phases);
    const t2 = performance.now();
    document.body.dataset.fetchMs = Math.round(t1 - t0);
    document.body.dataset.lastRenderMs = Math.round(t2 - t1);
    if (!S.rendered) { S.rendered = true; document.body.dataset.renderMs = Math.round(t2 - t1); document.body.dataset.ready = "1"; }
    // Refresh the device shown: its evidence and its cells may have changed.
    const shown = S.hovered || S.pinned;
    showEvidence(shown);
    if (shown) highlight(shown, false);
    $("err").textContent = "";
  } catch (e) {
    $("err").textContent = "cannot reach the matrix: " + (e.message || e);
    console.error(e);
  }
  setTimeout(refresh, interval * 1000);
}

// One node's agents from the plan: whom each probes, and who probes it.
async function showPlan(node) {
  if (!node) return;
  try {
    const r = await fetch("api/v1/plan?node=" + encodeURIComponent(node));
    if (!r.ok) throw new Error(`${r.status} ${(await r.text()).trim()}`);
    const v = await r.json();
    if (!v.agents || !v.agents.length) { $("plan").innerHTML = `<p class="meta">no agent of node ${esc(node)} in the plan</p>`; return; }
    $("plan").innerHTML = v.agents.map((a) => {
      const by = (v.probedBy && v.probedBy[a.name]) || [];
      return `<h3 style="font-size:1em">${esc(a.class)} agent ${esc(a.name)} <span class="meta">group ${esc(a.group || "(none)")}</span></h3>` +
        `<p><b>probed by</b> ${by.length} agents: ${by.map(esc).join(", ") || '<span class="bad">nobody</span>'}</p>` +
        `<p><b>probes</b> ${a.targets.length} targets: ${a.targets.map((t) => `${esc(t.name)} <span class="meta">(${esc(t.class)})</span>`).join(", ")}</p>`;
    }).join("") + (v.rotationRounds > 1 ? `<p class="meta">round ${v.round + 1} of ${v.rotationRounds}, ${v.rotationSeconds} s each</p>` : "");
  } catch (e) { $("plan").textContent = "cannot read the plan: " + (e.message || e); }
}

// ---- wiring ----
function onMultiplesKey(e) {
  const b = e.target.closest(".thumb");
  if (!b) return;
  const all = [...$("multiples").querySelectorAll(".thumb")], i = all.indexOf(b);
  const to = {ArrowLeft: i - 1, ArrowUp: i - 1, ArrowRight: i + 1, ArrowDown: i + 1, Home: 0, End: all.length - 1}[e.key];
  if (to === undefined || !all[to]) return;
  e.preventDefault();
  b.tabIndex = -1; all[to].tabIndex = 0; all[to].focus();
}
function onMultiplesClick(e) {
  const b = e.target.closest(".thumb");
  if (b) pickView(S.idx.views.get(b.dataset.key));
}
function onDocClick(e) {
  const sel = e.target.closest("[data-select]");
  if (sel) { const n = sel.dataset.select; if (S.pinned === n) S.pinned = ""; pin(n); if (!n.includes("->")) moveFabricCursor(n, false); return; }
  const v = e.target.closest("[data-view]");
  if (v) { const V = S.idx.views.get(v.dataset.view); if (V) pickView(V); return; }
  if (e.target.id === "follow") pickView(null);
}
function init() {
  scaleCSS();
  renderLegend();
  const grid = $("grid"), fab = $("fabric"), mult = $("multiples");
  grid.addEventListener("keydown", onGridKey);
  grid.addEventListener("click", onGridClick);
  grid.addEventListener("mouseover", onGridHover);
  fab.addEventListener("mouseover", onFabricOver);
  fab.addEventListener("mouseout", onFabricOut);
  fab.addEventListener("click", onFabricClick);
  fab.addEventListener("keydown", onFabricKey);
  fab.addEventListener("focusin", onFabricFocus);
  mult.addEventListener("click", onMultiplesClick);
  mult.addEventListener("keydown", onMultiplesKey);
  document.addEventListener("click", onDocClick);
  window.addEventListener("hashchange", () => { history.replaceState({follow: false}, "", location.hash); const v = readHash(); if (v && S.idx) pickView(v); });
  $("planform").onsubmit = (e) => { e.preventDefault(); showPlan($("plannode").value.trim()); };
  refresh();
}
init();
