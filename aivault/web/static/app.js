// The aivault page: search, a session's messages, and the Agent Session History settings.
// No build step and no innerHTML: every piece of transcript text becomes a text node, and the
// highlight marks ([[ ]]) become <mark> elements.

const config = JSON.parse(document.querySelector('meta[name="aivault-config"]').content);
const $ = (id) => document.getElementById(id);
// The indexer phase in which status is polled; any other ends the polling (completion or error).
const ACTIVE_PHASES = new Set(["indexing"]);
const POLL_MS = 1000;

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Aivault-Csrf": config.csrf },
    body: JSON.stringify(body),
  };
  const res = await fetch(path, opts);
  const value = await res.json().catch(() => ({ ok: false, message: `${res.status} ${res.statusText}` }));
  if (!res.ok) {
    const err = new Error(value.message || `${res.status}`);
    err.name = value.error || "error";
    throw err;
  }
  return value;
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c);
  return node;
}

// "a [[lock]] error" -> text, <mark>lock</mark>, text
function marked(snippet) {
  const out = document.createDocumentFragment();
  const parts = String(snippet || "").split(/\[\[|\]\]/);
  parts.forEach((part, i) => out.append(i % 2 ? el("mark", {}, part) : document.createTextNode(part)));
  return out;
}

function when(ms) {
  if (ms === null || ms === undefined) return "";
  return new Date(ms).toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

// --- search ---------------------------------------------------------------------------------
const search = { params: null, cursor: null };
// The host selector's value that searches this machine and every configured host at once.
const ALL_HOSTS = "all";

function searchParams() {
  const p = new URLSearchParams({ query: $("q").value, limit: "10" });
  if ($("agent").value) p.set("agents", $("agent").value);
  if ($("path").value.trim()) p.set("path", $("path").value.trim());
  if ($("since").value) p.set("since", $("since").value);
  p.set("sort", $("sort").value);
  p.set("host", $("host").value);
  return p;
}

// The host selector: "This machine", each configured host (aiVault.listHosts), "All machines"; the page's
// own host is selected first.
async function loadHosts() {
  const select = $("host");
  const current = select.value;  // the page's host (init), or what the user chose while the list loaded
  let r;
  try {
    r = await api("/api/hosts");
  } catch (e) {
    // Without the list the selector still offers this machine, the page's host and all machines.
    r = { hosts: [{ id: "local" }, { id: config.host }], default: config.host };
    $("search-error").textContent = `The list of machines is unavailable: ${e.message}`;
  }
  const options = [el("option", { value: "local" }, "This machine")];
  for (const h of r.hosts) {
    if (h.id === "local" || options.some((o) => o.value === h.id)) continue;
    options.push(el("option", { value: h.id }, h.id));
  }
  options.push(el("option", { value: ALL_HOSTS }, "All machines"));
  select.replaceChildren(...options);
  select.value = options.some((o) => o.value === current) ? current : (r.default || config.host);
  select.dataset.loaded = "yes";
}

// The hosts of a merged hit: where it was found (a session on several hosts names them all).
function hitHosts(h) {
  if (Array.isArray(h.executionHostIds) && h.executionHostIds.length > 1) return h.executionHostIds.join(", ");
  return h.executionHostId || "";
}

// One line per host of a merged search that gave no part of it, and whether the list is partial.
function reportHosts(r) {
  const lines = (r.hosts || []).filter((h) => h.state !== "ok").map((h) =>
    el("li", { "data-host": h.id, "data-state": h.state }, `${h.id}: ${h.state}${h.reason ? ` — ${h.reason}` : ""}`));
  if (r.partial) lines.push(el("li", { class: "partial" }, "Partial results: the machines above are not in this list."));
  $("host-report").replaceChildren(...lines);
}

async function runSearch(fresh) {
  $("search-error").textContent = "";
  if (fresh) {
    search.params = searchParams();
    search.cursor = null;
    $("results").replaceChildren();
    $("search-summary").textContent = "";
    $("host-report").replaceChildren();
  }
  const p = new URLSearchParams(search.params);
  if (search.cursor) p.set("cursor", search.cursor);
  let r;
  try {
    r = await api(`/api/search?${p}`);
  } catch (e) {
    $("search-error").textContent = e.message;
    return;
  }
  if (r.kind === "stale-cursor") {
    const moved = (r.hosts || []).map((h) => h.id).join(", ");
    $("search-error").textContent = `The index${moved ? ` of ${moved}` : ""} changed since the first page; showing page 1 again.`;
    return runSearch(true);
  }
  if (r.kind !== "results") {
    const why = { disabled: "Search is turned off: open Agent Session History to turn it on.",
                  "not-ready": "The index is being built; try again in a moment.",
                  "no-service": "Nothing answers searches for this host." };
    $("search-error").textContent = r.kind === "unavailable" ? (why[r.reason] || r.reason) : "That page is not valid any more.";
    return;
  }
  if (r.hosts) reportHosts(r);
  for (const h of r.hits) $("results").append(hitItem(h));
  search.cursor = r.page.hasMore ? r.page.cursor : null;
  $("more").hidden = !search.cursor;
  const n = $("results").children.length;
  $("search-summary").textContent = n ? `${n} session${n === 1 ? "" : "s"}${search.cursor ? ", more below" : ""}` : "No sessions matched.";
}

function hitItem(h) {
  const host = hitHosts(h);
  const meta = [h.agent, h.cwd, h.branch && `branch ${h.branch}`, when(h.updatedAt)].filter(Boolean).join(" · ");
  const li = el("li", { tabIndex: 0, "data-session": h.sessionId, "data-host": host },
    el("div", { class: "hit-title" }, h.title || "(untitled session)"),
    el("div", { class: "hit-meta" }, host ? el("span", { class: "hit-host" }, host) : "", host && meta ? " · " : "", meta),
    el("p", { class: "snippet" }, marked(h.evidence && h.evidence.snippet)),
    el("div", { class: "resume" }, h.resumeCommand || ""));
  li.addEventListener("click", () => openSession(h));
  li.addEventListener("keydown", (e) => { if (e.key === "Enter") openSession(h); });
  return li;
}

// --- a session ------------------------------------------------------------------------------
const reading = { hit: null, host: null, before: null, after: null };

async function openSession(h) {
  reading.hit = h;
  // A hit is read on the host it came from (a merged hit names it), else on the host searched.
  const searched = search.params ? search.params.get("host") : config.host;
  reading.host = h.executionHostId || (searched === ALL_HOSTS ? "local" : searched);
  $("session").hidden = false;
  $("session-title").textContent = h.title || "(untitled session)";
  $("session-meta").textContent = [h.agent, h.cwd, h.branch].filter(Boolean).join(" · ");
  $("session-resume").textContent = h.resumeCommand || "";
  $("messages").replaceChildren();
  await readMore({ query: search.params ? search.params.get("query") : "" }, "replace");
}

async function readMore(extra, where) {
  $("session-error").textContent = "";
  const p = new URLSearchParams({ id: reading.hit.sessionId, agent: reading.hit.agent, count: "12" });
  if (reading.host) p.set("host", reading.host);
  for (const [k, v] of Object.entries(extra)) if (v !== null && v !== undefined && v !== "") p.set(k, String(v));
  let r;
  try {
    r = await api(`/api/session?${p}`);
  } catch (e) {
    $("session-error").textContent = e.message;
    return;
  }
  if (r.kind === "unavailable") {
    $("session-error").textContent = `This session cannot be read now (${r.reason}).`;
    return;
  }
  const items = r.messages.map((m) => el("li", { class: m.position === r.anchor ? "hit" : "", "data-position": m.position },
    el("span", { class: "role" }, m.kind === "text" ? m.role : `${m.role} · ${m.kind.replace("_", " ")}`),
    el("p", { class: "text" }, m.text),
    m.truncated ? el("span", { class: "cut" }, `… cut (${m.chars} characters in all)`) : ""));
  if (where === "before") $("messages").prepend(...items);
  else $("messages").append(...items);
  if (where !== "after") reading.before = r.before;
  if (where !== "before") reading.after = r.after;
  $("earlier").hidden = reading.before === null;
  $("later").hidden = reading.after === null;
  const hit = $("messages").querySelector("li.hit");
  if (where === "replace" && hit) hit.scrollIntoView({ block: "center" });
}

// --- Agent Session History ------------------------------------------------------------------
// Status is read only while the pane is open, the page visible and indexing enabled; it is polled
// only while the indexer is in an active phase and stops on completion or error. Opening the pane
// or changing the policy takes a fresh observation.
const settings = { policy: null, timer: null, reads: 0 };

function paneOpen() { return !$("settings").hidden; }

function stopPolling() {
  if (settings.timer !== null) clearTimeout(settings.timer);
  settings.timer = null;
  document.body.dataset.polling = "no";
}

function renderPolicy(p) {
  settings.policy = p;
  $("enabled").checked = p.enabled;
  $("keep-all").checked = p.historyDays === null;
  $("history-days").value = p.historyDays === null ? "" : String(p.historyDays);
  $("history-days").disabled = p.historyDays === null || !config.controls;
}

function phaseText(st) {
  const files = `${st.filesIndexed.toLocaleString()} file(s) indexed`;
  switch (st.phase) {
    case "indexing": return `Indexing: ${st.filesDue.toLocaleString()} file(s) to go, ${files}.`;
    case "current": return `Up to date: ${files}.`;
    case "degraded": return `Some sources could not be read (${st.degradedRoots.length}); ${files}.`;
    case "closed": return `Indexing is stopped; ${files}.`;
    default: return `No daemon is indexing (aivault serve keeps the index fresh); ${files}.`;
  }
}

async function observe() {
  stopPolling();
  if (!paneOpen() || document.visibilityState !== "visible" || !settings.policy || !settings.policy.enabled) {
    if (settings.policy && !settings.policy.enabled) $("status-line").textContent = "Indexing is off.";
    return;
  }
  let r;
  try {
    settings.reads += 1;
    document.body.dataset.statusReads = String(settings.reads);
    r = await api("/api/status");
  } catch (e) {
    $("status-line").textContent = `Status unavailable: ${e.message}`;
    return;  // an error ends the polling
  }
  $("status-line").textContent = phaseText(r.status);
  document.body.dataset.phase = r.status.phase;
  if (ACTIVE_PHASES.has(r.status.phase) && paneOpen() && document.visibilityState === "visible") {
    settings.timer = setTimeout(observe, POLL_MS);
    document.body.dataset.polling = "yes";
  }
}

async function loadPolicy() {
  $("settings-error").textContent = "";
  // The fields wait for the stored policy: an edit made before it arrives would be overwritten.
  $("settings").dataset.loaded = "no";
  $("policy-fields").disabled = true;
  try {
    const r = await api("/api/policy");
    renderPolicy(r.policy);
  } catch (e) {
    $("settings-error").textContent = e.message;
    return;
  } finally {
    $("policy-fields").disabled = !config.controls;
    $("settings").dataset.loaded = "yes";
  }
  await observe();
}

async function savePolicy() {
  $("settings-error").textContent = "";
  const days = $("keep-all").checked ? null : Number.parseInt($("history-days").value, 10);
  if (days !== null && !(days > 0)) {
    $("settings-error").textContent = "Keep a whole number of days (1 or more), or keep all history.";
    return;
  }
  try {
    const r = await api("/api/policy", { enabled: $("enabled").checked, historyDays: days });
    renderPolicy(r.policy);
    document.body.dataset.saved = String(Number(document.body.dataset.saved || 0) + 1);
    if (!r.daemon && r.policy.enabled) $("status-line").textContent = "Saved. Run aivault serve (or aivault index) to build the index.";
  } catch (e) {
    $("settings-error").textContent = e.message;
    return;
  }
  await observe();
}

async function clearIndex() {
  $("clear-confirm").hidden = true;
  $("settings-error").textContent = "";
  try {
    const r = await api("/api/clear", { confirm: true });
    // What status said before the clear is about the old index: it is not shown (nor kept in
    // data-phase) until the first read of the new one.
    delete document.body.dataset.phase;
    $("status-line").textContent = "Cleared; the index is being rebuilt.";
    $("results").replaceChildren();
    $("more").hidden = true;
    search.cursor = null;
    await observe();
    document.body.dataset.cleared = r.identity;
  } catch (e) {
    $("settings-error").textContent = e.message;
  }
}

function initSettings() {
  if (!config.controls) {
    $("policy-fields").disabled = true;
    $("clear-box").hidden = true;
    $("settings-note").textContent = `This page searches ${config.host}. Turning indexing on or off, retention and clearing are this machine's own settings and are not offered here.`;
  }
  $("settings-toggle").addEventListener("click", () => {
    const open = !paneOpen();
    $("settings").hidden = !open;
    $("settings-toggle").setAttribute("aria-expanded", String(open));
    if (open) loadPolicy(); else stopPolling();
  });
  $("keep-all").addEventListener("change", () => { $("history-days").disabled = $("keep-all").checked; });
  $("save-policy").addEventListener("click", savePolicy);
  $("clear").addEventListener("click", () => { $("clear-confirm").hidden = false; });
  $("clear-no").addEventListener("click", () => { $("clear-confirm").hidden = true; });
  $("clear-yes").addEventListener("click", clearIndex);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && paneOpen()) observe(); else stopPolling();
  });
}

function init() {
  $("host-label").textContent = config.host === "local" ? "this machine" : `host ${config.host}`;
  for (const a of config.agents) $("agent").append(el("option", { value: a }, a));
  if (config.host !== "local") $("host").append(el("option", { value: config.host }, config.host));
  $("host").value = config.host;
  $("search-form").addEventListener("submit", (e) => { e.preventDefault(); runSearch(true); });
  $("more").addEventListener("click", () => runSearch(false));
  $("session-close").addEventListener("click", () => { $("session").hidden = true; });
  $("earlier").addEventListener("click", () => readMore({ from: reading.before, direction: "backward" }, "before"));
  $("later").addEventListener("click", () => readMore({ from: reading.after, direction: "forward" }, "after"));
  initSettings();
  loadHosts().finally(() => { document.body.dataset.ready = "yes"; });
}

init();
