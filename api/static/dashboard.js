// Eddy's live dashboard: polls the worker's REST API every POLL_MS and redraws.
// Plain DOM and SVG (no libraries, no CDN), text set with textContent only.
"use strict";

const POLL_MS = 2000;
const MAX_SENSORS = 12;
const WINDOWS_SHOWN = 30;
const SVG_NS = "http://www.w3.org/2000/svg";

// EDDY_API_TOKEN, when the API needs one: from #token=... or asked once, kept locally.
function token() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromHash) localStorage.setItem("eddy-token", fromHash);
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
  if (response.status === 404 || response.status === 503) return null; // no data yet
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

function chart(windows) {
  const width = 240, height = 80, pad = 4;
  const box = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "chart" });
  if (windows.length === 0) return box;
  const lo = Math.min(...windows.map((w) => w.min));
  const hi = Math.max(...windows.map((w) => w.max));
  const span = hi - lo || 1;
  const x = (i) => pad + (i * (width - 2 * pad)) / Math.max(1, windows.length - 1);
  const y = (v) => height - pad - ((v - lo) * (height - 2 * pad)) / span;
  const upper = windows.map((w, i) => `${x(i)},${y(w.max)}`);
  const lower = windows.map((w, i) => `${x(i)},${y(w.min)}`).reverse();
  box.appendChild(svg("polygon", { points: upper.concat(lower).join(" "), fill: "#dbeafe" }));
  const line = windows.map((w, i) => `${x(i)},${y(w.avg)}`).join(" ");
  box.appendChild(svg("polyline", { points: line, fill: "none", stroke: "#1d4ed8", "stroke-width": 1.5 }));
  return box;
}

async function drawSensors(sensors) {
  const grid = document.getElementById("sensors");
  const cards = await Promise.all(
    sensors.map(async (id) => {
      const page = await api(`/sensors/${encodeURIComponent(id)}/windows?limit=1000`);
      const windows = page ? page.windows.slice(-WINDOWS_SHOWN) : [];
      const card = el("div", undefined, "card");
      card.dataset.sensor = id;
      card.appendChild(el("h3", id));
      card.appendChild(chart(windows));
      const last = windows[windows.length - 1];
      const text = last
        ? `avg ${last.avg.toFixed(2)} F (min ${last.min}, max ${last.max}, ${last.count} readings)`
        : "no closed window yet";
      card.appendChild(el("div", text, "muted"));
      return card;
    }),
  );
  grid.replaceChildren(...cards);
}

async function drawAlerts(sensors) {
  const rows = [];
  for (const id of sensors) {
    const found = await api(`/sensors/${encodeURIComponent(id)}/alerts`);
    for (const alert of (found ? found.state : []).slice(-3).reverse()) {
      rows.push([id, el("span", alert.kind, "alert-" + alert.kind), alert.message]);
    }
  }
  const target = document.getElementById("alerts");
  target.replaceChildren(rows.length ? table(["sensor", "kind", "message"], rows) : el("div", "none", "muted"));
}

async function drawWatermarks() {
  const marks = await api("/watermarks");
  const rows = [];
  for (const [pipeline, partitions] of Object.entries(marks ? marks.pipelines : {})) {
    for (const p of partitions) {
      const lagS = p.lag_ms === null ? null : p.lag_ms / 1000;
      const bar = el("span", undefined, "bar");
      bar.style.width = lagS === null ? "0" : Math.min(300, lagS * 10) + "px";
      rows.push([pipeline, String(p.partition), lagS === null ? "no data" : lagS.toFixed(1) + " s", bar]);
    }
  }
  document.getElementById("watermarks").replaceChildren(table(["pipeline", "partition", "lag", ""], rows));
}

async function drawVehicles(pipelines) {
  const target = document.getElementById("vehicles");
  if (!pipelines.has("vehicle_speed")) return target.replaceChildren(el("div", "not running", "muted"));
  const keys = await api("/pipelines/vehicle_speed/tables/results/keys?limit=20");
  const rows = [];
  for (const id of keys ? keys.keys : []) {
    const a = await api(`/vehicles/${encodeURIComponent(id)}/agreement`);
    if (a) rows.push([id, String(a.checks), (100 * a.agreement_rate).toFixed(1) + " %", (100 * a.rolling_agreement).toFixed(1) + " %"]);
  }
  target.replaceChildren(
    rows.length ? table(["vehicle", "checks", "agreement", "last 100"], rows) : el("div", "no checks yet (the app's watermark trails by minutes)", "muted"),
  );
}

async function drawHashtags(pipelines) {
  const target = document.getElementById("hashtags");
  if (!pipelines.has("hashtag_counts")) return target.replaceChildren(el("div", "not running", "muted"));
  const top = await api("/hashtags/top?n=10");
  if (!top || top.top.length === 0) return target.replaceChildren(el("div", "no closed minute yet", "muted"));
  const rows = top.top.map((r) => ["#" + r.hashtag, String(r.count), String(r.total)]);
  const when = new Date(top.window_start_ms).toISOString().slice(11, 16) + " UTC";
  target.replaceChildren(el("div", "minute from " + when, "muted"), table(["hashtag", "count", "total"], rows));
}

async function refresh() {
  try {
    const status = await api("/status");
    const pipelines = new Set(Object.keys(status.pipelines));
    const inputs = Object.values(status.pipelines).reduce((n, p) => n + p.records_in, 0);
    document.getElementById("status").textContent =
      `worker ${status.worker_id} | pipelines ${[...pipelines].join(", ")} | records in ${inputs} | ` +
      `updated ${new Date().toLocaleTimeString()}`;
    let sensors = [];
    if (pipelines.has("sensor_averages")) {
      const keys = await api(`/pipelines/sensor_averages/tables/results/keys?limit=${MAX_SENSORS}`);
      sensors = keys ? keys.keys : [];
    }
    await drawSensors(sensors);
    if (pipelines.has("sensor_alerts")) await drawAlerts(sensors);
    await drawWatermarks();
    await drawVehicles(pipelines);
    await drawHashtags(pipelines);
    document.getElementById("error").textContent = "";
    document.body.dataset.loaded = "true";
  } catch (error) {
    document.getElementById("error").textContent = String(error);
  } finally {
    setTimeout(refresh, POLL_MS);
  }
}

refresh();
