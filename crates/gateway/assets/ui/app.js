// Sluice's live dashboard: plain script, no library. Reads the history
// and the live stream of /v1/dashboard with the session cookie that
// POST /ui/login sets (HttpOnly: this script never sees the token after
// sending it once). Every value from the server goes into the page as
// text, never as markup.
"use strict";

const COLORS = ["#4fb3ff", "#3ccf8e", "#f0b429", "#ff6b6b", "#c792ea", "#7fdbca", "#ffcb6b", "#82aaff"];
const MAX_SERIES = 6;
let points = [];
let historyLen = 300;
let source = null;

const $ = (id) => document.getElementById(id);

function fmt(v, digits) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (typeof v !== "number") return String(v);
  const d = digits === undefined ? (Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2) : digits;
  return v.toFixed(d);
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function fill(tbody, rows, build) {
  const fresh = document.createDocumentFragment();
  for (const r of rows) {
    const tr = document.createElement("tr");
    build(tr, r);
    fresh.appendChild(tr);
  }
  tbody.replaceChildren(fresh);
}

function showLogin(message) {
  if (source) { source.close(); source = null; }
  $("board").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  setStatus(false, "logged out");
}

function setStatus(live, text) {
  const s = $("status");
  s.textContent = text;
  s.className = "status " + (live ? "live" : "off");
}

async function start() {
  let res;
  try {
    res = await fetch("/v1/dashboard/history", { credentials: "same-origin" });
  } catch (e) {
    setStatus(false, "unreachable");
    setTimeout(start, 3000);
    return;
  }
  if (res.status === 401 || res.status === 403) {
    const body = await res.json().catch(() => ({}));
    showLogin(res.status === 403 && body.error ? body.error.message : "");
    return;
  }
  if (!res.ok) {
    setStatus(false, "error " + res.status);
    setTimeout(start, 3000);
    return;
  }
  const h = await res.json();
  points = h.points || [];
  $("login").hidden = true;
  $("board").hidden = false;
  $("logout").hidden = false;
  connect();
}

function connect() {
  if (source) source.close();
  source = new EventSource("/v1/dashboard/stream");
  source.addEventListener("history", (e) => {
    const h = JSON.parse(e.data);
    points = h.points || [];
    drawCharts();
  });
  source.addEventListener("snapshot", (e) => {
    const s = JSON.parse(e.data);
    render(s);
    const last = points[points.length - 1];
    if (!last || last.at_ms < s.at_ms) {
      points.push(pointOf(s));
      if (points.length > historyLen) points.splice(0, points.length - historyLen);
    }
    drawCharts();
    setStatus(true, "live");
  });
  source.onerror = () => {
    setStatus(false, "reconnecting…");
    if (source && source.readyState === EventSource.CLOSED) {
      // Closed for good (the session ended, or the server refused):
      // start over, which shows the login form when needed.
      source = null;
      setTimeout(start, 2000);
    }
  };
}

// The same point the server keeps in its history.
function pointOf(s) {
  const resources = {};
  for (const r of s.resources) {
    if (r.requests_per_second > 0 || r.in_flight > 0 || total(r.queued) > 0) {
      resources[r.resource] = [r.admitted_per_second, r.per_second, r.p99_ms, r.upstream_429_per_second];
    }
  }
  return { at_ms: s.at_ms, queued: total(s.queue.queued), in_flight: s.queue.in_flight, resources };
}

function total(q) { return q.high + q.normal + q.low; }

function render(s) {
  $("updated").textContent = "updated " + new Date(s.at_ms).toLocaleTimeString() + " · rates over " + fmt(s.window_s, 1) + " s";
  let rps = 0, admitted = 0, throttled = 0;
  for (const r of s.resources) { rps += r.requests_per_second; admitted += r.admitted_per_second; throttled += r.upstream_429_per_second; }
  $("t-rps").textContent = fmt(rps);
  $("t-admitted").textContent = fmt(admitted);
  $("t-inflight").textContent = String(s.queue.in_flight);
  $("t-queued").textContent = s.queue.queued.high + " · " + s.queue.queued.normal + " · " + s.queue.queued.low;
  $("t-429").textContent = fmt(throttled);
  $("t-busy").textContent = s.queue.busy ? "yes" : "no";

  fill($("resources").tBodies[0], s.resources, (tr, r) => {
    tr.dataset.resource = r.resource;
    if (r.reason) tr.className = "cut";
    cell(tr, r.resource);
    cell(tr, r.per_second === null ? "none" : fmt(r.per_second) + " · " + fmt(r.configured_per_second));
    cell(tr, r.reason || "", "reason");
    cell(tr, fmt(r.admitted_per_second)).dataset.field = "admitted_per_second";
    cell(tr, fmt(r.requests_per_second)).dataset.field = "requests_per_second";
    cell(tr, String(r.in_flight)).dataset.field = "in_flight";
    cell(tr, r.queued.high + "·" + r.queued.normal + "·" + r.queued.low).dataset.field = "queued";
    cell(tr, String(r.limiter_waiting));
    cell(tr, fmt(r.upstream_429_per_second) + " (" + r.upstream_429_total + ")", r.upstream_429_total > 0 ? "bad" : "").dataset.field = "upstream_429";
    cell(tr, fmt(r.retries_per_second) + " (" + r.retries_total + ")");
    cell(tr, fmt(r.p50_ms)).dataset.field = "p50_ms";
    cell(tr, fmt(r.p99_ms)).dataset.field = "p99_ms";
  });

  const spend = {};
  if (s.spend.data) for (const x of s.spend.data.tenants) spend[x.tenant] = x;
  fill($("tenants").tBodies[0], s.tenants, (tr, t) => {
    tr.dataset.tenant = t.tenant;
    cell(tr, t.tenant);
    cell(tr, fmt(t.requests_per_second)).dataset.field = "requests_per_second";
    const share = cell(tr, "");
    const bar = document.createElement("span");
    bar.className = "bar";
    bar.style.width = Math.round(t.share * 80) + "px";
    share.appendChild(bar);
    share.appendChild(document.createTextNode(fmt(t.share * 100, 0) + "%"));
    share.dataset.field = "share";
    cell(tr, fmt(t.queue_wait_ms));
    cell(tr, String(t.queued));
    cell(tr, String(t.requests_total));
    const sp = spend[t.tenant];
    cell(tr, s.spend.state !== "ok" ? s.spend.state : sp ? formatSpend(sp) : "–");
  });

  $("jobs-state").textContent = s.jobs.state === "ok" ? "" : s.jobs.state;
  fill($("jobs").tBodies[0], s.jobs.data || [], (tr, q) => {
    cell(tr, q.queue + (q.paused ? " (paused)" : ""));
    for (const k of ["available", "scheduled", "running", "retryable", "completed", "dead", "cancelled"]) {
      cell(tr, String(q.counts[k]), k === "dead" && q.counts[k] > 0 ? "bad" : "");
    }
  });

  $("audit-state").textContent = s.audit.state === "ok" ? "" : s.audit.state;
  fill($("audit").tBodies[0], s.audit.data || [], (tr, a) => {
    cell(tr, a.at_ms ? new Date(a.at_ms).toLocaleTimeString() : "");
    cell(tr, a.actor || "");
    cell(tr, a.kind || "");
    cell(tr, a.target || "");
  });
}

// Today's spend (UTC day), from the ledger.
function formatSpend(x) {
  if (typeof x.cost_usd !== "number") return "–";
  // Calls of a model without a price are not in the sum: say so.
  return "$" + x.cost_usd.toFixed(4) + (x.unpriced ? " + " + x.unpriced + " unpriced" : "");
}

// The resources with the most traffic over the history, for the charts.
function topResources() {
  const sum = {};
  for (const p of points) for (const [name, v] of Object.entries(p.resources)) sum[name] = (sum[name] || 0) + (v[0] || 0);
  return Object.keys(sum).sort((a, b) => sum[b] - sum[a]).slice(0, MAX_SERIES);
}

function drawCharts() {
  const names = topResources();
  const series = (idx, dashedIdx) => {
    const out = [];
    names.forEach((name, i) => {
      const color = COLORS[i % COLORS.length];
      out.push({ name, color, values: points.map((p) => [p.at_ms, p.resources[name] ? p.resources[name][idx] : null]) });
      if (dashedIdx !== undefined) {
        out.push({ name: name + " limit", color, dashed: true, values: points.map((p) => [p.at_ms, p.resources[name] ? p.resources[name][dashedIdx] : null]) });
      }
    });
    return out;
  };
  chart($("c-admitted"), series(0, 1));
  chart($("c-queue"), [
    { name: "queued", color: COLORS[2], values: points.map((p) => [p.at_ms, p.queued]) },
    { name: "in flight", color: COLORS[0], values: points.map((p) => [p.at_ms, p.in_flight]) },
  ]);
  chart($("c-p99"), series(2));
  chart($("c-429"), series(3));
}

// A line chart on a canvas: time on x (the history's span), values on y
// from 0 to a round maximum; dashed series are limits (they set the
// scale only when the data come near them).
function chart(canvas, series) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || canvas.width, h = canvas.clientHeight || canvas.height;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const left = 44, right = 8, top = 8, bottom = 34;
  const pw = w - left - right, ph = h - top - bottom;
  const t1 = points.length ? points[points.length - 1].at_ms : Date.now();
  const t0 = Math.min(points.length ? points[0].at_ms : t1 - 60000, t1 - 60000);
  let max = 0;
  for (const s of series) for (const [, v] of s.values) if (v !== null && !s.dashed) max = Math.max(max, v);
  for (const s of series) if (s.dashed) for (const [, v] of s.values) if (v !== null && v <= max * 1.5) max = Math.max(max, v);
  max = niceMax(max);
  g.font = "11px system-ui, sans-serif";
  g.strokeStyle = "#2a333d";
  g.fillStyle = "#8b96a1";
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = top + ph - (ph * i) / 4;
    g.beginPath(); g.moveTo(left, y); g.lineTo(left + pw, y); g.stroke();
    g.fillText(fmtAxis((max * i) / 4), 2, y + 4);
  }
  const minutes = Math.round((t1 - t0) / 60000);
  g.fillText("-" + minutes + " min", left, top + ph + 12);
  g.fillText("now", left + pw - 22, top + ph + 12);
  const x = (t) => left + (pw * (t - t0)) / Math.max(1, t1 - t0);
  const y = (v) => top + ph - (ph * Math.min(v, max)) / max;
  let legendX = left;
  for (const s of series) {
    g.strokeStyle = s.color;
    g.setLineDash(s.dashed ? [4, 4] : []);
    g.lineWidth = s.dashed ? 1 : 1.6;
    g.beginPath();
    let drawing = false;
    for (const [t, v] of s.values) {
      if (v === null || v === undefined) { drawing = false; continue; }
      if (drawing) g.lineTo(x(t), y(v)); else g.moveTo(x(t), y(v));
      drawing = true;
    }
    g.stroke();
    if (!s.dashed) {
      g.setLineDash([]);
      g.fillStyle = s.color;
      g.fillRect(legendX, h - 12, 8, 8);
      g.fillStyle = "#d8dee4";
      const label = s.name.length > 28 ? s.name.slice(0, 27) + "…" : s.name;
      g.fillText(label, legendX + 11, h - 4);
      legendX += 16 + g.measureText(label).width + 10;
    }
  }
  g.setLineDash([]);
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function fmtAxis(v) {
  if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + "k";
  return v >= 10 ? v.toFixed(0) : v.toFixed(v >= 1 ? 1 : 2);
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const token = $("token").value;
    const res = await fetch("/ui/login", {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token }),
    }).catch(() => null);
    $("token").value = "";
    if (!res) { $("login-error").textContent = "the gateway did not answer"; return; }
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      $("login-error").textContent = body.error ? body.error.message : "refused (" + res.status + ")";
      return;
    }
    start();
  });
  $("logout").addEventListener("click", async () => {
    await fetch("/ui/logout", { method: "POST", credentials: "same-origin" }).catch(() => null);
    showLogin("");
  });
  window.addEventListener("resize", drawCharts);
  start();
});
