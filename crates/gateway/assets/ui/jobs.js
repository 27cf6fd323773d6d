// Sluice's job browser: plain script, no library. Reads and changes jobs
// through the admin job routes with the admin token, which it keeps in
// this variable only (never a cookie, a URL or storage: a change must
// never ride on something the browser sends by itself). Every value from
// the server goes into the page as text, never as markup.
"use strict";

const STATES = ["available", "scheduled", "running", "retryable", "completed", "dead", "cancelled"];
const REFRESH_MS = 3000;
let token = null;
let cursor = null;
let chosen = null;
let timer = null;

const $ = (id) => document.getElementById(id);

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function button(label, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.addEventListener("click", onClick);
  return b;
}

function when(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "";
}

function say(text, bad) {
  const m = $("message");
  m.textContent = text;
  m.className = bad ? "error" : "muted";
}

// One call to an admin route; the error body's message on failure.
async function api(method, path) {
  const res = await fetch(path, {
    method,
    headers: { Authorization: "Bearer " + token },
    credentials: "omit",
  });
  const body = await res.json().catch(() => ({}));
  if (res.status === 401 || res.status === 403) {
    logout(body.error ? body.error.message : "refused");
    throw new Error("refused");
  }
  if (!res.ok) {
    throw new Error(body.error ? body.error.message : "error " + res.status);
  }
  return body;
}

function logout(message) {
  token = null;
  if (timer) { clearInterval(timer); timer = null; }
  $("browser").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("status").textContent = "logged out";
  $("status").className = "status off";
}

// A queue-wide action, then everything is read again.
async function act(label, method, path) {
  try {
    const r = await api(method, path);
    say(label + ": " + JSON.stringify(r));
  } catch (e) {
    say(label + ": " + e.message, true);
  }
  await refresh();
}

async function loadQueues() {
  const body = await api("GET", "/v1/queues");
  const rows = document.createDocumentFragment();
  for (const q of body.queues) {
    const tr = document.createElement("tr");
    tr.dataset.queue = q.queue;
    cell(tr, q.queue);
    cell(tr, q.paused ? "paused" : "running", q.paused ? "bad" : "");
    for (const s of STATES) {
      const td = cell(tr, q.counts[s]);
      td.dataset.state = s;
    }
    const actions = cell(tr, "", "actions");
    const path = "/v1/queues/" + encodeURIComponent(q.queue);
    actions.appendChild(q.paused
      ? button("resume", () => act("resume " + q.queue, "POST", path + "/resume"))
      : button("pause", () => act("pause " + q.queue, "POST", path + "/pause")));
    actions.appendChild(button("retry dead", () => act("retry dead of " + q.queue, "POST", path + "/dead/retry")));
    actions.appendChild(button("purge dead", () => {
      if (window.confirm("Delete every dead job of " + q.queue + "?")) {
        act("purge dead of " + q.queue, "DELETE", path + "/dead");
      }
    }));
    actions.appendChild(button("jobs", () => {
      $("f-queue").value = q.queue;
      loadJobs(false);
    }));
    rows.appendChild(tr);
  }
  $("queues").tBodies[0].replaceChildren(rows);
}

function query() {
  const p = new URLSearchParams();
  for (const f of ["queue", "state", "tenant"]) {
    const v = $("f-" + f).value.trim();
    if (v) p.set(f, v);
  }
  p.set("limit", "50");
  return p;
}

// The jobs the filter picks; `more` reads on from the last page.
async function loadJobs(more) {
  const p = query();
  if (more && cursor) p.set("cursor", cursor);
  let body;
  try {
    body = await api("GET", "/v1/jobs/all?" + p.toString());
  } catch (e) {
    say("jobs: " + e.message, true);
    return;
  }
  const rows = document.createDocumentFragment();
  for (const j of body.jobs) {
    const tr = document.createElement("tr");
    tr.dataset.job = j.id;
    if (String(j.id) === String(chosen)) tr.className = "chosen";
    cell(tr, j.id);
    cell(tr, j.tenant);
    cell(tr, j.queue);
    cell(tr, j.kind);
    const st = cell(tr, j.state);
    st.dataset.field = "state";
    cell(tr, j.attempts + "/" + j.max_attempts);
    cell(tr, j.last_error || "", "wrap");
    cell(tr, when(j.updated_at));
    tr.addEventListener("click", () => show(j.id));
    rows.appendChild(tr);
  }
  const tbody = $("jobs").tBodies[0];
  if (more) tbody.appendChild(rows); else tbody.replaceChildren(rows);
  cursor = body.next_cursor;
  $("more").hidden = !cursor;
}

function field(tbody, name, value) {
  const tr = document.createElement("tr");
  tr.dataset.field = name;
  cell(tr, name);
  cell(tr, value === null || value === undefined ? "" : value, "wrap");
  tbody.appendChild(tr);
}

// One job in full: fields, payload, result, timeline, and what may be
// done to it.
async function show(id) {
  let j;
  try {
    j = await api("GET", "/v1/jobs/all/" + encodeURIComponent(id));
  } catch (e) {
    say("job " + id + ": " + e.message, true);
    return;
  }
  chosen = j.id;
  for (const tr of $("jobs").tBodies[0].rows) {
    tr.className = tr.dataset.job === String(j.id) ? "chosen" : "";
  }
  $("job").hidden = false;
  $("job").dataset.job = j.id;
  $("job").dataset.state = j.state;
  $("job-id").textContent = j.id;
  const tbody = document.createElement("tbody");
  field(tbody, "state", j.state);
  field(tbody, "tenant", j.tenant);
  field(tbody, "queue · kind", j.queue + " · " + j.kind);
  field(tbody, "attempts", j.attempts + " of " + j.max_attempts);
  field(tbody, "last error", j.last_error);
  field(tbody, "created", when(j.created_at));
  field(tbody, "runs at", when(j.run_at));
  field(tbody, "finished", when(j.finished_at));
  if (j.schedule) field(tbody, "schedule", j.schedule);
  if (j.parent) field(tbody, "parent", j.parent);
  if (j.children) field(tbody, "children", j.children.map((c) => c.id + ": " + c.state).join(", "));
  $("job-fields").replaceChildren(tbody);
  $("job-payload").textContent = JSON.stringify(j.payload, null, 2);
  $("job-result").textContent = JSON.stringify({ result: j.result, progress: j.progress }, null, 2);
  $("job-retry").disabled = j.state !== "dead";
  $("job-cancel").disabled = j.state === "completed" || j.state === "dead" || j.state === "cancelled";
  const rows = document.createDocumentFragment();
  for (const e of j.timeline || []) {
    const tr = document.createElement("tr");
    tr.dataset.event = e.event;
    cell(tr, when(e.at));
    cell(tr, e.event);
    cell(tr, e.attempts);
    cell(tr, when(e.run_at));
    cell(tr, e.error || (e.progress !== undefined ? JSON.stringify(e.progress) : ""), "wrap");
    rows.appendChild(tr);
  }
  $("timeline").tBodies[0].replaceChildren(rows);
}

async function jobAction(what) {
  if (chosen === null) return;
  const id = chosen;
  try {
    const j = await api("POST", "/v1/jobs/all/" + encodeURIComponent(id) + "/" + what);
    say(what + " job " + id + ": now " + j.state);
  } catch (e) {
    say(what + " job " + id + ": " + e.message, true);
  }
  await refresh();
}

async function refresh() {
  if (!token) return;
  try {
    await loadQueues();
    await loadJobs(false);
    if (chosen !== null) await show(chosen);
    $("status").textContent = "connected";
    $("status").className = "status live";
  } catch (e) {
    if (token) {
      $("status").textContent = "error";
      $("status").className = "status off";
      say(e.message, true);
    }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    token = $("token").value;
    $("token").value = "";
    try {
      await api("GET", "/v1/queues");
    } catch (err) {
      if (token) logout(err.message);
      return;
    }
    $("login").hidden = true;
    $("browser").hidden = false;
    $("logout").hidden = false;
    await refresh();
    timer = setInterval(refresh, REFRESH_MS);
  });
  $("logout").addEventListener("click", () => logout(""));
  $("filter").addEventListener("submit", (e) => {
    e.preventDefault();
    loadJobs(false);
  });
  $("more").addEventListener("click", () => loadJobs(true));
  $("job-retry").addEventListener("click", () => jobAction("retry"));
  $("job-cancel").addEventListener("click", () => jobAction("cancel"));
});
