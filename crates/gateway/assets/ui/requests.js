// Sluice's request log page: plain script, no library. Reads the request
// log with the admin token (every tenant's, /v1/requests/all) or a
// tenant's API key (its own, /v1/requests), which it keeps in this
// variable only (never a cookie, a URL or storage). Every value from the
// server goes into the page as text, never as markup.
"use strict";

let token = null;
// "admin" or "tenant": which routes the token opens.
let as = null;
let before = null;
let chosen = null;

const $ = (id) => document.getElementById(id);

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function when(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "";
}

function say(text, bad) {
  const m = $("message");
  m.textContent = text;
  m.className = bad ? "error" : "muted";
}

// A GET of the request log; the error body's message on failure. A
// refusal of the token is `refused` (the caller decides what it means).
async function get(path) {
  const res = await fetch(path, {
    headers: { Authorization: "Bearer " + token },
    credentials: "omit",
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    const e = new Error(body.error ? body.error.message : "error " + res.status);
    e.refused = res.status === 401 || res.status === 403;
    throw e;
  }
  return body;
}

function base() {
  return as === "admin" ? "/v1/requests/all" : "/v1/requests";
}

function logout(message) {
  token = null;
  as = null;
  chosen = null;
  $("log").hidden = true;
  $("logout").hidden = true;
  $("request").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("status").textContent = "logged out";
  $("status").className = "status off";
}

// The filter as query parameters; an error names the field that is wrong.
function query() {
  const p = new URLSearchParams();
  for (const f of as === "admin" ? ["tenant", "model"] : ["model"]) {
    const v = $("f-" + f).value.trim();
    if (v) p.set(f, v);
  }
  const status = $("f-status").value.trim();
  if (status) p.set("status", status);
  if ($("f-errors").checked) p.set("errors", "true");
  // The inputs are read as UTC, as the table shows times.
  for (const f of ["from", "to"]) {
    const v = $("f-" + f).value;
    if (v) p.set(f, String(Date.parse(v + (v.length === 16 ? ":00Z" : "Z"))));
  }
  p.set("limit", $("f-limit").value);
  return p;
}

// The requests the filter picks, newest first; `more` reads on from the
// last page.
async function load(more) {
  const p = query();
  if (more && before !== null) p.set("before", String(before));
  let body;
  try {
    body = await get(base() + "?" + p.toString());
  } catch (e) {
    if (e.refused) logout(e.message); else say("requests: " + e.message, true);
    return;
  }
  const rows = document.createDocumentFragment();
  for (const r of body.requests) {
    const tr = document.createElement("tr");
    tr.dataset.id = r.id;
    tr.dataset.status = r.status;
    if (String(r.id) === String(chosen)) tr.className = "chosen";
    cell(tr, r.id);
    cell(tr, when(r.at_ms));
    cell(tr, r.tenant);
    cell(tr, r.key_id || "");
    cell(tr, r.model + (r.deployment ? " → " + r.deployment : ""));
    cell(tr, r.status, r.status === 0 || r.status >= 400 ? "bad" : "");
    cell(tr, r.prompt_tokens + " · " + r.completion_tokens + (r.estimated ? " (est.)" : ""));
    cell(tr, r.unpriced ? "unpriced" : r.cost_usd.toFixed(6));
    cell(tr, r.latency_ms);
    cell(tr, r.queue_ms);
    cell(tr, r.request_id, "wrap");
    tr.addEventListener("click", () => show(r.id));
    rows.appendChild(tr);
  }
  const tbody = $("requests").tBodies[0];
  if (more) tbody.appendChild(rows); else tbody.replaceChildren(rows);
  before = body.next_before;
  $("more").hidden = before === null || before === undefined;
  say(tbody.rows.length + " shown" + ($("more").hidden ? "" : "; older ones below"));
}

function field(tbody, name, value) {
  const tr = document.createElement("tr");
  tr.dataset.field = name;
  cell(tr, name);
  cell(tr, value === null || value === undefined ? "" : value, "wrap");
  tbody.appendChild(tr);
}

function cut(truncated, bytes) {
  return bytes + " bytes" + (truncated ? ", cut" : "");
}

// One request in full, with its bodies when they were kept.
async function show(id) {
  let r;
  try {
    r = await get(base() + "/" + encodeURIComponent(id));
  } catch (e) {
    if (e.refused) logout(e.message); else say("request " + id + ": " + e.message, true);
    return;
  }
  chosen = r.id;
  for (const tr of $("requests").tBodies[0].rows) {
    tr.className = tr.dataset.id === String(r.id) ? "chosen" : "";
  }
  $("request").hidden = false;
  $("request").dataset.id = r.id;
  $("request-no").textContent = r.id;
  const tbody = document.createElement("tbody");
  field(tbody, "when", when(r.at_ms));
  field(tbody, "request id", r.request_id);
  field(tbody, "tenant", r.tenant);
  field(tbody, "key", r.key_id);
  field(tbody, "user", r.user);
  field(tbody, "feature", r.feature);
  field(tbody, "kind", r.kind);
  field(tbody, "route", r.endpoint);
  field(tbody, "provider", r.provider);
  field(tbody, "model", r.model);
  if (r.alias) field(tbody, "alias", r.alias);
  if (r.deployment) field(tbody, "deployment", r.deployment);
  field(tbody, "status", r.status);
  field(tbody, "tokens", r.prompt_tokens + " in (" + r.cached_tokens + " cached), " +
    r.completion_tokens + " out (" + r.reasoning_tokens + " reasoning)" + (r.estimated ? ", estimated" : ""));
  field(tbody, "cost", r.unpriced ? "unpriced (add a price under [prices])" : "$" + r.cost_usd.toFixed(9));
  field(tbody, "latency", r.latency_ms + " ms (queue " + r.queue_ms + " ms, " + r.retries + " retries)");
  field(tbody, "cache", r.cache_hit ? "hit" : "miss");
  $("request-fields").replaceChildren(tbody);
  const b = r.bodies;
  $("bodies").hidden = !b;
  $("no-bodies").hidden = !!b;
  $("request-body").textContent = b ? pretty(b.request) : "";
  $("response-body").textContent = b ? pretty(b.response) : "";
  $("request-cut").textContent = b ? cut(b.request_truncated, b.request_bytes) : "";
  $("response-cut").textContent = b ? cut(b.response_truncated, b.response_bytes) : "";
}

// A JSON body indented; anything else (SSE, a cut body) as it is.
function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (_) {
    return text;
  }
}

async function open() {
  // The admin token first; a token it refuses may be a tenant's key.
  for (const kind of ["admin", "tenant"]) {
    as = kind;
    try {
      await get(base() + "?limit=1");
      return true;
    } catch (e) {
      if (!e.refused) { logout(e.message); return false; }
    }
  }
  logout("neither the admin token nor a tenant's API key");
  return false;
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    token = $("token").value;
    $("token").value = "";
    if (!(await open())) return;
    $("login").hidden = true;
    $("log").hidden = false;
    $("logout").hidden = false;
    $("l-tenant").hidden = as !== "admin";
    $("who").textContent = as === "admin" ? "(every tenant)" : "(this tenant's own)";
    $("status").textContent = as === "admin" ? "operator" : "tenant";
    $("status").className = "status live";
    before = null;
    await load(false);
  });
  $("logout").addEventListener("click", () => logout(""));
  $("filter").addEventListener("submit", (e) => {
    e.preventDefault();
    before = null;
    load(false);
  });
  $("more").addEventListener("click", () => load(true));
});
