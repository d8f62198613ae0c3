// tidegate's dashboard: reads the API of the server that served it (same origin, nothing else), every REFRESH_MS.
// The token the page asks for is kept in this tab's sessionStorage and sent as `Authorization: Bearer`; it is
// never put in a URL. What a token may do is the server's to decide: a refusal is shown as its Status says.
"use strict";

const TOKEN_KEY = "tidegate.token";
const REFRESH_MS = 2000;
const PAGE = 500; // items per list call; the page follows `metadata.continue`
const READ_ONLY = document.body.dataset.mode === "read-only";
const $ = (id) => document.getElementById(id);

const state = {
  who: null, queues: [], jobs: [], nodes: [], pools: [], history: null, budget: null, links: [],
  selectedJob: "", editing: "", editValue: "", rowErrors: {}, confirmDelete: "", askedToken: false,
  timer: null,
};

class ApiError extends Error {
  // kubectl's words for a Status: "Error from server (Forbidden): user ... may not ..."
  constructor(code, body) {
    const reason = (body && body.reason) || `HTTP ${code}`;
    const message = (body && body.message) || (typeof body === "string" ? body : "");
    super(`Error from server (${reason}): ${message}`);
    this.code = code;
    this.body = body;
  }
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = text; }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// Every item of a list, page by page (Kubernetes' limit and continue).
async function list(path, params = {}) {
  const items = [];
  let next = "";
  for (let pages = 0; pages < 1000; pages++) {
    const query = new URLSearchParams({ ...params, limit: String(PAGE) });
    for (const [key, value] of [...query.entries()]) if (value === "") query.delete(key);
    if (next) query.set("continue", next);
    const answer = await call("GET", `${path}?${query}`);
    items.push(...answer.items);
    next = (answer.metadata && answer.metadata.continue) || "";
    if (!next) break;
  }
  return items;
}

// -- small DOM helpers (text always goes in as text: names come from users) --------------------------------
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "style") node.style.cssText = value; // CSSOM: the policy forbids style attributes
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}
function fill(node, ...children) { node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined)); }

// -- formatting -----------------------------------------------------------------------------------------------
const RESOURCE_NAMES = { "nvidia.com/gpu": "GPU", cpu: "CPU", memory: "mem" };
const RESOURCE_ORDER = ["nvidia.com/gpu", "cpu", "memory"];
function resources(values) {
  if (values === null || values === undefined) return "—";
  const keys = Object.keys(values).filter((k) => k !== "pods");
  if (!keys.length) return "0";
  keys.sort((a, b) => (RESOURCE_ORDER.indexOf(a) + 1 || 99) - (RESOURCE_ORDER.indexOf(b) + 1 || 99) || a.localeCompare(b));
  return keys.map((k) => `${values[k]} ${RESOURCE_NAMES[k] || k}`).join(" · ");
}
function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}
function clock(t) { return t ? new Date(t * 1000).toLocaleTimeString([], { hour12: false }) : "—"; }
function number(v) {
  if (Math.abs(v) >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (Math.abs(v) >= 1e4) return `${(v / 1e3).toFixed(1)}k`;
  return Number.isInteger(v) ? String(v) : v.toFixed(Math.abs(v) < 10 ? 2 : 1);
}
const money = (v) => `$${Number(v).toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
function phase(value) { return el("span", { class: `phase ${value}` }, value); }
function may(right) { return !state.who || state.who.rights.includes(right); }

function showError(error) {
  const banner = $("banner");
  if (!error) { banner.hidden = true; banner.textContent = ""; return; }
  banner.hidden = false;
  banner.textContent = error.message || String(error);
}

// -- the token -----------------------------------------------------------------------------------------------
function askToken(why) {
  const dialog = $("token-dialog");
  if (why) $("token-why").textContent = why;
  $("token-input").value = "";
  if (!dialog.open) dialog.showModal();
}
function setupToken() {
  $("sign-in").addEventListener("click", () => askToken());
  $("sign-out").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); state.who = null; refresh(); });
  $("token-cancel").addEventListener("click", () => $("token-dialog").close());
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    $("token-dialog").close();
    sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
    state.who = null;
    showError(null);
    refresh();
  });
}

// -- refreshing --------------------------------------------------------------------------------------------
async function refresh() {
  clearTimeout(state.timer);
  try {
    await load();
    showError(null);
  } catch (error) {
    if (error.code === 401) {
      state.who = null;
      if (!state.askedToken || token()) {
        state.askedToken = true;
        askToken(token() ? `The server refused the token: ${error.message}` : undefined);
      }
    }
    showError(error);
  }
  render();
  state.timer = setTimeout(refresh, REFRESH_MS);
}

async function load() {
  const health = await fetch("/healthz", { cache: "no-store", credentials: "omit" })
    .then(async (r) => { const text = await r.text(); try { return JSON.parse(text); } catch (e) { return { ok: r.ok, message: text.trim() }; } })
    .catch(() => null);
  state.health = health;
  if (!state.who) state.who = await call("GET", "/whoami");
  const filters = { queue: $("filter-queue").value, namespace: $("filter-namespace").value, phase: $("filter-phase").value };
  const [queues, jobs, nodes, pools, links] = await Promise.all([
    list("/queues"), list("/jobs", filters), list("/nodes"), list("/pools"), list("/links"),
  ]);
  Object.assign(state, { queues, jobs, nodes, pools, links });
  state.history = await call("GET", "/pools/history").catch(() => null);
  state.budget = await call("GET", "/budget").catch((error) => (error.code === 404 ? null : Promise.reject(error)));
  if (!state.allNamespaces || !filters.namespace) state.allNamespaces = [...new Set(jobs.map((j) => j.namespace))].sort();
}

function render() {
  renderHeader();
  if (!state.editing) renderQueues();
  renderFilters();
  renderJobs();
  renderNodes();
  renderPools();
  renderBudget();
  renderLinks();
}

function renderHeader() {
  const health = state.health;
  const node = $("health");
  if (!health) { node.textContent = "server unreachable"; node.className = "health bad"; }
  else if (health.standby) { node.textContent = `standby (store held by ${health.store_held_by})`; node.className = "health bad"; }
  else if (health.ok) { node.textContent = health.cycles !== undefined ? `${health.cycles} cycles · last ${clock(health.last_cycle)}` : `healthy${READ_ONLY ? " · read-only" : ""}`; node.className = "health"; }
  else { node.textContent = health.message || "unhealthy"; node.className = "health bad"; }
  const who = state.who;
  $("user").textContent = READ_ONLY ? "read-only view" : who ? (who.user ? `${who.user} (${who.rights.join(", ")})` : "open API (no tokens)") : "";
  $("sign-in").hidden = READ_ONLY;
  $("sign-out").hidden = !token();
  const hint = $("weight-hint");
  hint.textContent = READ_ONLY ? "Read-only: this server takes no changes."
    : who && !who.rights.includes("admin") ? `Your token (user ${who.user}) may not edit queues: editing a weight needs group tidegate:admin, and the server will refuse it.`
    : "";
}

// -- queues ---------------------------------------------------------------------------------------------
function queueOrder(queues) {
  const byName = new Map(queues.map((q) => [q.name, q]));
  const children = new Map();
  const roots = [];
  for (const q of queues) {
    const parent = q.spec.parent;
    if (parent && byName.has(parent) && parent !== q.name) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(q);
    } else roots.push(q);
  }
  const out = [];
  const walk = (q, depth, seen) => {
    if (seen.has(q.name)) return;
    seen.add(q.name);
    out.push([q, depth]);
    for (const child of children.get(q.name) || []) walk(child, depth + 1, seen);
  };
  const seen = new Set();
  for (const root of roots) walk(root, 0, seen);
  for (const q of queues) if (!seen.has(q.name)) out.push([q, 0]);
  return out;
}

function weightCell(q) {
  const weight = q.spec.weight ?? 1;
  if (READ_ONLY) return el("td", { class: "num" }, weight);
  if (state.editing === q.name) {
    const input = el("input", { type: "number", min: "1", max: "65535", value: state.editValue, "aria-label": `weight of ${q.name}`,
      oninput: (e) => { state.editValue = e.target.value; } });
    const save = el("button", { type: "submit", class: "write" }, "Save");
    const cancel = el("button", { type: "button", onclick: () => { state.editing = ""; renderQueues(); } }, "Cancel");
    const form = el("form", { class: "weight-edit", onsubmit: (e) => { e.preventDefault(); patchWeight(q.name, input.value); } },
      input, save, cancel);
    setTimeout(() => input.focus(), 0);
    return el("td", {}, form);
  }
  const edit = el("button", {
    type: "button", class: "write", "aria-label": `edit weight of ${q.name}`,
    title: may("admin") ? "PATCH the queue's spec.weight" : "needs group tidegate:admin: the server will refuse it",
    onclick: () => { state.editing = q.name; state.editValue = String(weight); delete state.rowErrors[q.name]; renderQueues(); },
  }, "Edit");
  return el("td", { class: "num" }, el("span", { class: "weight" }, weight), " ", edit);
}

async function patchWeight(name, value) {
  const weight = Number(value);
  try {
    await call("PATCH", `/queues/${encodeURIComponent(name)}`, { spec: { weight } });
    delete state.rowErrors[name];
    state.editing = "";
    showError(null);
    await refresh();
  } catch (error) {
    state.rowErrors[name] = error.message;
    state.editing = "";
    showError(error);
    renderQueues();
  }
}

function renderQueues() {
  const rows = [];
  for (const [q, depth] of queueOrder(state.queues)) {
    const pending = (q.jobs.Pending || 0) + (q.jobs.Inqueue || 0);
    const why = Object.entries(q.waiting || {}).slice(0, 3).map(([reason, n]) => el("div", { class: "reason" }, `${n} × ${reason}`));
    const name = el("td", { class: "tree" }, depth ? el("span", { class: "branch" }, `${"  ".repeat(depth - 1)}└ `) : "", el("b", {}, q.name),
      q.namespaces.length ? el("div", { class: "reason" }, `namespaces: ${q.namespaces.join(", ")}`) : "");
    rows.push(el("tr", { dataset: { queue: q.name } }, name, weightCell(q), el("td", {}, q.spec.state || "Open"),
      el("td", {}, resources(q.deserved)), el("td", {}, resources(q.allocated_with_children)),
      el("td", {}, q.spec.capability ? resources(q.spec.capability) : "unlimited"),
      el("td", { class: "num" }, q.share ? q.share.toFixed(2) : "0", q.overused ? el("div", { class: "reason" }, "overused") : ""),
      el("td", { class: "num" }, pending), el("td", { class: "num" }, q.jobs.Running || 0),
      el("td", {}, why.length ? why : el("span", { class: "empty" }, pending ? "not scheduled yet" : "—"))));
    if (state.rowErrors[q.name]) rows.push(el("tr", { class: "error-row" }, el("td", { colspan: "10", class: "row-error" }, state.rowErrors[q.name])));
  }
  fill(document.querySelector("#queue-table tbody"), rows);
}

// -- jobs -----------------------------------------------------------------------------------------------------
function renderFilters() {
  const keep = (select, values) => {
    const current = select.value;
    const wanted = ["", ...values];
    const have = [...select.options].map((o) => o.value);
    if (wanted.join("\n") !== have.join("\n")) {
      fill(select, wanted.map((v) => el("option", { value: v }, v || "all")));
      select.value = wanted.includes(current) ? current : "";
    }
  };
  keep($("filter-queue"), state.queues.map((q) => q.name));
  keep($("filter-namespace"), state.allNamespaces || []);
}

function renderJobs() {
  $("job-count").textContent = `${state.jobs.length} job${state.jobs.length === 1 ? "" : "s"}`;
  const rows = state.jobs.map((job) => {
    const running = job.pods.filter((p) => p.phase === "Running").length;
    const nodes = [...new Set(job.pods.map((p) => p.node).filter(Boolean))];
    return el("tr", { class: `clickable${state.selectedJob === job.key ? " selected" : ""}`, dataset: { job: job.key },
      onclick: () => { state.selectedJob = state.selectedJob === job.key ? "" : job.key; state.confirmDelete = ""; renderJobs(); } },
      el("td", {}, el("b", {}, job.name), el("div", { class: "reason" }, job.namespace)), el("td", {}, job.queue),
      el("td", {}, phase(job.phase)), el("td", { class: "num" }, duration(job.wait_seconds)),
      el("td", { class: "num" }, `${running}/${job.pods.length}`),
      el("td", { class: "reason" }, nodes.length > 3 ? `${nodes.slice(0, 3).join(", ")} +${nodes.length - 3}` : nodes.join(", ")),
      el("td", { class: "reason" }, job.reason));
  });
  fill(document.querySelector("#job-table tbody"), rows.length ? rows : [el("tr", {}, el("td", { colspan: "7", class: "empty" }, "no jobs"))]);
  renderJobDetail();
}

function renderJobDetail() {
  const box = $("job-detail");
  const job = state.jobs.find((j) => j.key === state.selectedJob);
  if (!job) { box.hidden = true; fill(box); return; }
  box.hidden = false;
  const pods = el("table", { class: "grid" }, el("thead", {}, el("tr", {}, ["Pod", "Phase", "Node", "GPU cards"].map((h) => el("th", {}, h)))),
    el("tbody", {}, job.pods.map((p) => el("tr", {}, el("td", {}, p.name), el("td", {}, phase(p.phase)),
      el("td", {}, p.node || (p.nominated_node ? `nominated ${p.nominated_node}` : "—")), el("td", {}, p.gpu_index ?? "—")))));
  const events = el("ol", { class: "events" }, job.events.map((e) => el("li", {}, `${clock(e.time)}  ${e.message}`)));
  const mayDelete = may("submit") && (!state.who || state.who.namespaces === null || state.who.namespaces.includes(job.namespace));
  const del = READ_ONLY ? "" : state.confirmDelete === job.key
    ? el("span", {}, el("button", { type: "button", class: "danger write", onclick: () => deleteJob(job) }, `Delete ${job.key} now`), " ",
      el("button", { type: "button", onclick: () => { state.confirmDelete = ""; renderJobDetail(); } }, "Keep it"))
    : el("button", { type: "button", class: "danger write", title: mayDelete ? "DELETE the job" : "needs group tidegate:submit (in its namespace): the server will refuse it",
      onclick: () => { state.confirmDelete = job.key; renderJobDetail(); } }, "Delete job");
  fill(box, el("h3", {}, `${job.key} `, phase(job.phase)),
    el("p", { class: "hint" }, `queue ${job.queue} · submitted ${clock(job.submitted)} · started ${clock(job.started)} · waited ${duration(job.wait_seconds)} · retries ${job.retries}`),
    job.reason ? el("p", { class: "reason" }, `why: ${job.reason}`) : "", pods, el("h3", {}, "Events"), events, del);
}

async function deleteJob(job) {
  try {
    await call("DELETE", `/jobs/${encodeURIComponent(job.namespace)}/${encodeURIComponent(job.name)}`);
    state.selectedJob = "";
    state.confirmDelete = "";
    await refresh();
  } catch (error) {
    state.confirmDelete = "";
    showError(error);
    renderJobDetail();
  }
}

// -- nodes ----------------------------------------------------------------------------------------------------
function renderNodes() {
  const groups = new Map();
  const totals = { idc: [0, 0, 0], cloud: [0, 0, 0] }; // nodes, GPUs, GPUs used
  let cordoned = 0;
  for (const node of state.nodes) {
    const kind = node.type.startsWith("cloud") ? "cloud" : "idc";
    const group = node.pool || (kind === "cloud" ? "cloud nodes" : "nodes of the folder");
    if (!groups.has(group)) groups.set(group, { kind, nodes: [] });
    groups.get(group).nodes.push(node);
    const used = node.gpu_cards.filter((c) => c.pods.length).length;
    totals[kind][0] += 1; totals[kind][1] += node.gpu_cards.length; totals[kind][2] += used;
    if (!node.schedulable) cordoned += 1;
  }
  const card = (value, label) => el("div", { class: "card" }, el("b", {}, value), el("span", {}, label));
  fill($("node-summary"),
    card(totals.idc[0], "IDC nodes"), card(`${totals.idc[2]} / ${totals.idc[1]}`, "IDC GPUs in use"),
    card(totals.cloud[0], "cloud nodes"), card(`${totals.cloud[2]} / ${totals.cloud[1]}`, "cloud GPUs in use"),
    card(cordoned, "cordoned (draining, notice, link down)"));
  const sections = [...groups.entries()].sort((a, b) => (a[1].kind === "idc" ? 0 : 1) - (b[1].kind === "idc" ? 0 : 1))
    .map(([name, group]) => el("div", { class: "pool", dataset: { pool: name } },
      el("h3", {}, `${name} (${group.kind === "idc" ? "IDC" : "cloud"}): ${group.nodes.length} nodes`),
      el("div", { class: "node-grid" }, group.nodes.map((node) => el("div", {
        class: `node ${group.kind}${node.schedulable ? "" : " cordoned"}`, dataset: { node: node.name },
        title: `${node.name}: ${node.pods} pods; requested ${resources(node.requested)} of ${resources(node.allocatable)}${node.schedulable ? "" : "; cordoned"}${node.interrupted_at ? `; spot notice, goes at ${clock(node.interrupted_at)}` : ""}`,
      }, node.gpu_cards.map((c) => el("i", { class: `gpu${c.pods.length ? " used" : ""}` })))))));
  fill($("node-pools"), sections.length ? sections : [el("p", { class: "empty" }, "no nodes")],
    el("p", { class: "legend" }, el("i", { style: "background: var(--idc)" }), "IDC card in use", el("i", { style: "background: var(--cloud)" }),
      "cloud card in use", el("i", { style: "background: var(--free)" }), "free card; a dashed node is cordoned"));
}

// -- charts: a step line per series over time, drawn as SVG --------------------------------------------
function chart(series, { unit = "", height = 180, format = number } = {}) {
  const width = 720, left = 54, right = 10, top = 10, bottom = 24;
  const points = series.flatMap((s) => s.points);
  const root = svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height + 22}`, role: "img" });
  if (!points.length) { root.append(svg("text", { x: left, y: 30 }, "no samples yet")); return root; }
  const t0 = Math.min(...points.map((p) => p[0])), t1 = Math.max(...points.map((p) => p[0]), t0 + 1);
  const top_ = Math.max(1, ...points.map((p) => p[1])) * 1.1;
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (width - left - right);
  const y = (v) => top + (1 - v / top_) * (height - top - bottom);
  root.append(svg("line", { class: "axis", x1: left, y1: y(0), x2: width - right, y2: y(0) }));
  root.append(svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: y(0) }));
  for (const v of [0, top_ / 2 / 1.1, top_ / 1.1]) {
    root.append(svg("text", { x: left - 4, y: y(v) + 4, "text-anchor": "end" }, format(v)));
  }
  root.append(svg("text", { x: left, y: height }, clock(t0)), svg("text", { x: width - right, y: height, "text-anchor": "end" }, clock(t1)));
  if (unit) root.append(svg("text", { x: 4, y: top + 8 }, unit));
  let legend = left;
  for (const s of series) {
    if (!s.points.length) continue;
    const coords = [];
    s.points.forEach(([t, v], i) => {
      if (i && s.step !== false) coords.push(`${x(t).toFixed(1)},${y(s.points[i - 1][1]).toFixed(1)}`);
      coords.push(`${x(t).toFixed(1)},${y(v).toFixed(1)}`); // a zero is drawn on the axis, not left out
    });
    if (s.points.length === 1) coords.push(`${(x(s.points[0][0]) + 2).toFixed(1)},${y(s.points[0][1]).toFixed(1)}`);
    root.append(svg("polyline", { points: coords.join(" "), stroke: s.color, "stroke-dasharray": s.dash || "" }));
    root.append(svg("rect", { x: legend, y: height + 8, width: 10, height: 10, fill: s.color }));
    root.append(svg("text", { x: legend + 14, y: height + 17 }, s.name));
    legend += 24 + s.name.length * 6.4;
  }
  return root;
}

function renderPools() {
  const history = state.history ? state.history.pools : [];
  const byName = new Map(state.pools.map((p) => [p.name, p]));
  const figures = [];
  for (const pool of history) {
    if (!pool.cloud) continue;
    const now = byName.get(pool.name);
    const s = pool.samples;
    const series = (key) => s.filter((p) => p[key] !== null && p[key] !== undefined).map((p) => [p.time, p[key]]);
    const status = now && now.hpa_status;
    const conditions = status ? status.conditions.map((c) => el("li", {}, `${c.type} ${c.status} ${c.reason}: ${c.message}`)) : [];
    figures.push(el("div", { class: "pool", dataset: { pool: pool.name } },
      el("h3", {}, `${pool.name}${pool.hpa ? ` · HPA ${pool.hpa}` : ""}`),
      now ? el("p", { class: "hint" }, `now: ${now.nodes.length - now.draining.length} nodes, ${now.provisioning} provisioning, ${now.draining.length} draining, ${now.billed_nodes} billed · spent ${money(now.spent)}${status ? ` · HPA desired ${status.desiredReplicas}` : ""}`) : "",
      el("div", { class: "charts" },
        el("figure", {}, el("figcaption", {}, "Nodes"), chart([
          { name: "nodes", color: "#20a08a", points: series("nodes") },
          { name: "provisioning", color: "#2f6db5", points: series("provisioning") },
          { name: "draining", color: "#b26b00", points: series("draining") },
          { name: "HPA desired", color: "#6b3fa0", dash: "5 3", points: series("desired") },
        ], { unit: "nodes" })),
        el("figure", {}, el("figcaption", {}, `HPA metric: ${pool.metric || "—"}`), chart([
          { name: "metric value", color: "#b3261e", points: series("metric") },
        ], { format: number }))),
      conditions.length ? el("ul", { class: "list" }, conditions) : "",
      now && now.events.length ? el("details", {}, el("summary", {}, `${now.events.length} scaling events`),
        el("ol", { class: "reason" }, now.events.slice(-50).map((e) => el("li", {}, `${clock(e.time)} ${e.message}`)))) : ""));
  }
  fill($("pool-charts"), figures.length ? figures : [el("p", { class: "empty" }, "No cloud pool is served (serve a simulation folder with a bursting Scenario).")]);
}

function renderBudget() {
  const budget = state.budget;
  if (!budget) {
    const spent = state.pools.filter((p) => p.cloud).reduce((sum, p) => sum + p.spent, 0);
    fill($("budget-body"), el("p", { class: "empty" }, `No budget is served (a Scenario's spec.budget, with burst). Cloud spend since the first start: ${money(spent)}.`));
    return;
  }
  const fraction = budget.spent / budget.per_period;
  const meter = el("div", { class: "meter", title: `${money(budget.spent)} of ${money(budget.per_period)}` },
    el("div", { class: fraction >= 1 ? "over" : "", style: `width: ${Math.min(100, fraction * 100).toFixed(1)}%` }),
    budget.thresholds.map((t) => el("span", { class: "tick", style: `left: ${Math.min(100, t.spentFraction * 100)}%` })));
  const actions = budget.thresholds.map((t, i) => {
    const does = [t.weight !== undefined ? `weight ${t.weight}` : "", t.capability ? `capability ${resources(t.capability)}` : "",
      t.state ? `state ${t.state}` : "", t.maxReplicas !== undefined ? `HPA maxReplicas ${t.maxReplicas}` : ""].filter(Boolean).join(", ");
    return el("li", {}, `at ${(t.spentFraction * 100).toFixed(0)}%: ${does} on queue ${budget.queue}`, i < budget.thresholds_crossed ? el("b", {}, "  (in force)") : "");
  });
  const spend = (state.history ? state.history.budget : []).filter((p) => p.period === budget.period).map((p) => [p.time, p.spent]);
  fill($("budget-body"),
    el("p", {}, el("b", {}, `${money(budget.spent)} of ${money(budget.per_period)}`), ` spent in period ${budget.period} (${budget.period_hours} h, since ${clock(budget.period_start)})`,
      budget.hpa_capped ? " · HPA capped" : ""),
    meter, el("ol", { class: "list" }, actions),
    el("figure", {}, el("figcaption", {}, "Spend this period"), chart([
      { name: "spent", color: "#20a08a", points: spend, step: false },
      { name: "budget", color: "#b3261e", dash: "4 3", points: spend.length ? [[spend[0][0], budget.per_period], [spend[spend.length - 1][0], budget.per_period]] : [] },
    ], { format: (v) => money(v).replace(/\.\d\d$/, "") })),
    budget.events.length ? el("details", { open: true }, el("summary", {}, `${budget.events.length} budget actions`),
      el("ol", { class: "reason" }, budget.events.map((e) => el("li", {}, `${clock(e.time)} ${e.message}`)))) : el("p", { class: "empty" }, "no budget action this run"));
}

function renderLinks() {
  const rows = state.links.map((l) => el("tr", { dataset: { cluster: l.cluster } }, el("td", {}, l.cluster),
    el("td", {}, el("span", { class: l.up ? "up" : "down" }, l.up ? "up" : "down")),
    el("td", {}, l.up ? "—" : clock(l.down_since)), el("td", { class: "reason" }, l.reason)));
  fill($("link-body"), rows.length
    ? el("table", { class: "grid" }, el("thead", {}, el("tr", {}, ["Cloud cluster", "Link", "Down since", "Reason"].map((h) => el("th", {}, h)))), el("tbody", {}, rows))
    : el("p", { class: "empty" }, "No cloud cluster is served."));
}

// -- start -----------------------------------------------------------------------------------------------------
document.addEventListener("DOMContentLoaded", () => {
  $("refresh-seconds").textContent = String(REFRESH_MS / 1000);
  setupToken();
  for (const id of ["filter-queue", "filter-namespace", "filter-phase"]) $(id).addEventListener("change", () => refresh());
  refresh();
});
