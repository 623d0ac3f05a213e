// Eddy's live dashboard: every agent of the app, from what GET /agents says it
// serves. Polls the worker's REST API every POLL_MS and redraws. Plain DOM and
// SVG (no libraries, no CDN), text set with textContent only.
"use strict";

const POLL_MS = 2000;
const MAX_KEYS = 8;
const WINDOWS_SHOWN = 30;
const SVG_NS = "http://www.w3.org/2000/svg";
const WINDOW_FIELDS = new Set(["window_start_ms", "window_end_ms", "timing"]);

// EDDY_API_TOKEN, when the API needs one: from #token=... or asked once, kept locally.
// A token given in the address is taken out of it at once, so it stays in no
// address bar, history entry, bookmark or screenshot.
function token() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromHash) {
    localStorage.setItem("eddy-token", fromHash);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return localStorage.getItem("eddy-token");
}

async function api(path) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  const response = await fetch(path, { headers });
  if (response.status === 401) {
    const given = prompt("This Eddy API needs its token (EDDY_API_TOKEN):");
    if (given) localStorage.setItem("eddy-token", given);
    throw new Error("unauthorized");
  }
  // Unknown yet, no closed window yet, or a partition moving: nothing to draw.
  if ([404, 409, 503].includes(response.status)) return null;
  if (!response.ok) throw new Error(path + ": HTTP " + response.status);
  return response.json();
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

function svg(tag, attributes) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, v);
  return node;
}

function table(headers, rows) {
  const t = el("table");
  const head = el("tr");
  headers.forEach((h) => head.appendChild(el("th", h)));
  t.appendChild(head);
  rows.forEach((cells) => {
    const tr = el("tr");
    cells.forEach((c) => {
      const td = el("td");
      if (c instanceof Node) td.appendChild(c);
      else td.textContent = c;
      tr.appendChild(td);
    });
    t.appendChild(tr);
  });
  return t;
}

// Which field of a window result to draw: avg, value or count, else the first number.
function lineField(result, keyField) {
  const numeric = Object.keys(result).filter(
    (f) => f !== keyField && !WINDOW_FIELDS.has(f) && typeof result[f] === "number",
  );
  return ["avg", "value", "count"].find((f) => numeric.includes(f)) || numeric[0];
}

function chart(windows, field) {
  const width = 240, height = 80, pad = 4;
  const box = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "chart" });
  if (windows.length === 0 || field === undefined) return box;
  const band = windows.every((w) => typeof w.min === "number" && typeof w.max === "number");
  const values = windows.flatMap((w) => (band ? [w.min, w.max, w[field]] : [w[field]]));
  const lo = Math.min(...values), hi = Math.max(...values), span = hi - lo || 1;
  const x = (i) => pad + (i * (width - 2 * pad)) / Math.max(1, windows.length - 1);
  const y = (v) => height - pad - ((v - lo) * (height - 2 * pad)) / span;
  if (band) {
    const upper = windows.map((w, i) => `${x(i)},${y(w.max)}`);
    const lower = windows.map((w, i) => `${x(i)},${y(w.min)}`).reverse();
    box.appendChild(svg("polygon", { points: upper.concat(lower).join(" "), fill: "#dbeafe" }));
  }
  const line = windows.map((w, i) => `${x(i)},${y(w[field])}`).join(" ");
  box.appendChild(svg("polyline", { points: line, fill: "none", stroke: "#1d4ed8", "stroke-width": 1.5 }));
  return box;
}

function num(value) {
  return typeof value === "number" && !Number.isInteger(value) ? value.toFixed(2) : String(value);
}

function keyFieldOf(result) {
  return Object.keys(result).find((f) => !WINDOW_FIELDS.has(f)) || "key";
}

async function drawWindows(agent, view) {
  const part = el("div");
  part.appendChild(el("h3", "windows"));
  const keys = await api(`/agents/${agent.name}/keys?view=windows&limit=${MAX_KEYS}`);
  const cards = await Promise.all(
    (keys ? keys.keys : []).map(async (key) => {
      const path = view.path.replace("{key}", encodeURIComponent(key));
      const page = await api(`${path}?limit=1000`);
      const windows = page ? page.windows.slice(-WINDOWS_SHOWN) : [];
      const card = el("div", undefined, "card");
      card.dataset.key = key;
      card.appendChild(el("h4", key));
      const last = windows[windows.length - 1];
      const field = last ? lineField(last, keyFieldOf(last)) : undefined;
      card.appendChild(chart(windows, field));
      const text = last ? `${field} ${num(last[field])} (${windows.length} windows shown)` : "no closed window yet";
      card.appendChild(el("div", text, "muted"));
      return card;
    }),
  );
  const grid = el("div", undefined, "grid");
  grid.replaceChildren(...cards);
  part.appendChild(grid);
  const newest = await api(`/agents/${agent.name}/windows?limit=10`);
  if (newest && newest.results.length > 0) {
    const keyField = keyFieldOf(newest.results[0]);
    const field = lineField(newest.results[0], keyField);
    const ranked = [...newest.results].sort((a, b) => (b[field] ?? 0) - (a[field] ?? 0));
    const when = new Date(newest.window_start_ms).toISOString().slice(11, 19) + " UTC";
    part.appendChild(el("div", `newest window, from ${when}`, "muted"));
    part.appendChild(table([keyField, field], ranked.map((r) => [String(r[keyField]), num(r[field])])));
  }
  return part;
}

async function drawState(agent, view) {
  const part = el("div");
  part.appendChild(el("h3", "state: " + view.name));
  const keys = await api(`/agents/${agent.name}/keys?view=${encodeURIComponent(view.name)}&limit=${MAX_KEYS}`);
  const rows = [];
  for (const key of keys ? keys.keys : []) {
    const found = await api(view.path.replace("{key}", encodeURIComponent(key)));
    if (found === null) continue;
    const value = Array.isArray(found.value) ? found.value.slice(-3) : found.value;
    const cell = el("td", JSON.stringify(value), "json");
    rows.push([key, cell.textContent]);
  }
  part.appendChild(rows.length ? table(["key", "value"], rows) : el("div", "nothing yet", "muted"));
  return part;
}

async function drawAgents(agents) {
  const sections = [];
  for (const agent of agents) {
    const section = el("section");
    section.dataset.agent = agent.name;
    section.appendChild(el("h2", agent.name));
    section.appendChild(el("div", "runs as " + agent.stages.join(", "), "muted"));
    for (const view of agent.views) {
      section.appendChild(view.kind === "windows" ? await drawWindows(agent, view) : await drawState(agent, view));
    }
    if (agent.views.length === 0) section.appendChild(el("div", "serves no queries", "muted"));
    sections.push(section);
  }
  document.getElementById("agents").replaceChildren(...sections);
}

async function drawWatermarks() {
  const marks = await api("/watermarks");
  const rows = [];
  for (const [stage, entry] of Object.entries(marks ? marks.stages : {})) {
    for (const p of entry.partitions) {
      const lagS = p.lag_ms === null ? null : p.lag_ms / 1000;
      const bar = el("span", undefined, "bar");
      bar.style.width = lagS === null ? "0" : Math.min(300, lagS * 10) + "px";
      const lag = lagS === null ? "no data" : lagS.toFixed(1) + " s";
      rows.push([entry.agent, stage, String(p.partition), lag, bar]);
    }
  }
  document.getElementById("watermarks").replaceChildren(table(["agent", "stage", "partition", "lag", ""], rows));
}

async function refresh() {
  try {
    const status = await api("/status");
    const listing = await api("/agents");
    const agents = listing ? listing.agents : [];
    const inputs = Object.values(status.stages).reduce((n, s) => n + s.records_in, 0);
    document.getElementById("status").textContent =
      `worker ${status.worker_id} | agents ${agents.map((a) => a.name).join(", ")} | ` +
      `records in ${inputs} | updated ${new Date().toLocaleTimeString()}`;
    await drawAgents(agents);
    await drawWatermarks();
    document.getElementById("error").textContent = "";
    document.body.dataset.loaded = "true";
  } catch (error) {
    document.getElementById("error").textContent = String(error);
  } finally {
    setTimeout(refresh, POLL_MS);
  }
}

refresh();
